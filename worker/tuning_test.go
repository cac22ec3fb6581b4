package worker_test

import (
	"path/filepath"
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/worker"
)

var (
	_ sink.Tuner = (*sqlite.Sink)(nil)
	_ sink.Tuner = (*bigquery.Sink)(nil)
)

// TestTunedFor: a sink that says how it is best written to gets its
// tuning, a part size set by the caller kept; any other sink gets the
// Config as it was.
func TestTunedFor(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if got := (worker.Config{}).TunedFor(s); got.PartRows != worker.DefaultPartRows || !got.SortContentKeys {
		t.Errorf("into SQLite: PartRows %d, SortContentKeys %v; want %d and true", got.PartRows, got.SortContentKeys, worker.DefaultPartRows)
	}
	if got := (worker.Config{PartRows: 7}).TunedFor(s); got.PartRows != 7 {
		t.Errorf("into SQLite with PartRows 7: %d", got.PartRows)
	}
	if got := (worker.Config{}).TunedFor(memory.New()); got.PartRows != 0 || got.SortContentKeys {
		t.Errorf("into a sink that says nothing: PartRows %d, SortContentKeys %v; want the Config unchanged", got.PartRows, got.SortContentKeys)
	}
}
