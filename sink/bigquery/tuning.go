package bigquery

import "github.com/formsync/formsync/sink"

// DefaultPartRows is Config.PartRows's default.
//
// Every commit costs a load job, and BigQuery allows 1,500 of them per
// table per day (failed ones included), so a sync keeps one commit per run
// for everything it read: only a form that stages this many rows in one
// run (a first sync, a long outage) is committed in parts. A commit's
// transaction grows with its rows; one that outgrows Config.JobTimeout is
// cancelled and, unsplit, would be read, loaded and cancelled again on
// every run.
const DefaultPartRows = 100_000

// Tuning says how the engine had better write to BigQuery (sink.Tuner):
// a form's rows in parts of Config.PartRows, each part one load job and
// one transaction that moves no watermark, the form's last rows and its
// watermark in the run's final commit.
func (s *Sink) Tuning() sink.Tuning {
	return sink.Tuning{CommitInParts: true, PartRows: s.cfg.PartRows, PartsByContent: true}
}
