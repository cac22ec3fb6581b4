package sink

// Tuning is how a sink is best written to, for the engine to shape its
// commits by: a sink says it by implementing Tuning() Tuning (Tuner). The
// zero Tuning, and a sink that says none, get the engine's plain
// behaviour: every form's rows in one commit at the end of a run, staged
// in the order read.
type Tuning struct {
	// CommitInParts: a commit costs the sink little, so a sync had better
	// commit a form's rows in parts while the rest is still read
	// (worker.Config.PartRows), so that the sink writes while the API is
	// read rather than after.
	CommitInParts bool
	// PartRows is the part size the sink asks for when it commits in
	// parts; 0 leaves it to the engine (worker.DefaultPartRows). A sink
	// whose commits cost a job each asks for large parts, so that only a
	// large read (a first sync) is split and the steady state keeps one
	// commit per run.
	PartRows int
	// SortContentKeys: the sink inserts rows keyed by content (the older
	// response form) faster in key order (Spool.SortContentKeys).
	SortContentKeys bool
	// PartsByContent: rows keyed by content (the older response form)
	// are committed in parts too. A sink that commits in parts to bound
	// each transaction (BigQuery's job timeout), not to write sooner, asks
	// for it: a part of such rows is as safe as any (it moves no
	// watermark, and a row keyed by content has no later version to
	// order), only slower in SQLite's key order.
	PartsByContent bool
	// PartDays, when set, bounds the distinct days (Spool.Days) of a
	// part's rows as PartRows bounds their number: a sink whose one job
	// may write only so many daily partitions (BigQuery: 4,000) asks for
	// it, so that a low-volume form spread over years is committed in
	// parts too.
	PartDays int
	// CommitDays, when set, bounds the distinct days the rows of one
	// commit span in all, every form's together: the run's final commit
	// carries each form's last rows, and a sink whose one job may write
	// only so many daily partitions (BigQuery: 4,000) needs the forms
	// beyond it committed as parts first.
	CommitDays int
}
