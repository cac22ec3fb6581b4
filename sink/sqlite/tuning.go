package sqlite

import "github.com/formsync/formsync/sink"

// Tuning says how the engine had better write to SQLite (sink.Tuner).
// SQLite writes a form's rows while the rest is read, and a commit costs
// it nothing of note: a sync commits in parts (a million-row first sync
// took 11.3-11.8 s in parts of 10,000 against 14.2-16.2 s in one commit,
// BENCHMARKS.md section 8.2). Rows keyed by content are inserted in key
// order (see Commit): staged sorted, they grow the table's B-tree at one
// edge (32 s instead of 55 for a million, section 8.3).
func (s *Sink) Tuning() sink.Tuning {
	return sink.Tuning{CommitInParts: true, SortContentKeys: true}
}
