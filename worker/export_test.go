package worker

import "testing"

// SetContentCheckpointRows makes a backfill's checkpoints of rows keyed by
// content hold from least to most rows, rather than from
// DefaultCheckpointRows to MaxCheckpointRows, until t ends.
func SetContentCheckpointRows(t testing.TB, least, most int) {
	oldLeast, oldMost := contentCheckpointRows, maxContentCheckpointRows
	contentCheckpointRows, maxContentCheckpointRows = least, most
	t.Cleanup(func() { contentCheckpointRows, maxContentCheckpointRows = oldLeast, oldMost })
}
