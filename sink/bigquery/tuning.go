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
//
// A part also ends at PartDays distinct days of created_at: BigQuery lets
// one job write at most 4,000 daily partitions ("Too many partitions
// produced by query, allowed 4000"), and a low-volume form spread over
// years (20 a day for 13 years: under 100,000 rows, 4,700 days) would
// otherwise fail its first sync on every run.
func (s *Sink) Tuning() sink.Tuning {
	return sink.Tuning{CommitInParts: true, PartRows: s.cfg.PartRows, PartsByContent: true, PartDays: PartDays, CommitDays: MaxPartitionsPerJob}
}

// MaxPartitionsPerJob is BigQuery's bound on the partitions one job may
// write: a commit's rows span at most so many days (sink.Tuning.CommitDays).
const MaxPartitionsPerJob = 4_000

// PartDays is the most distinct days of created_at one part of a form's
// rows spans (sink.Tuning.PartDays). Well under BigQuery's 4,000
// partitions per job, so that the run's final commit, which carries
// every form's last rows together, stays under it too: the forms of a
// run share their recent days, and only forms whose last rows are each
// spread over years of their own could add up past it: those commit
// theirs as parts first (sink.Tuning.CommitDays).
const PartDays = 1_000
