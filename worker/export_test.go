package worker

import (
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/sink/sqlite"
)

// The SQLite sink keeps removed rows' bytes in its write-ahead log until it
// purges them, and BigQuery in its staging tables: if their Purge stopped
// being a sink.Purger, Forget would stop erasing them without a word.
var (
	_ sink.Purger = (*sqlite.Sink)(nil)
	_ sink.Purger = (*bigquery.Sink)(nil)
)

// SetContentCheckpointRows makes a backfill's checkpoints of rows keyed by
// content hold from least to most rows, rather than from
// DefaultCheckpointRows to MaxCheckpointRows, until t ends.
func SetContentCheckpointRows(t testing.TB, least, most int) {
	oldLeast, oldMost := contentCheckpointRows, maxContentCheckpointRows
	contentCheckpointRows, maxContentCheckpointRows = least, most
	t.Cleanup(func() { contentCheckpointRows, maxContentCheckpointRows = oldLeast, oldMost })
}
