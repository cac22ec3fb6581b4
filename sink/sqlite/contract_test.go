package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/sinktest"
)

func TestContract(t *testing.T) {
	t.Parallel()
	sinktest.Run(t, func(t *testing.T) sinktest.Sink {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, sinktest.Tunes, sinktest.Purges, sinktest.KeepsFiles)
}
