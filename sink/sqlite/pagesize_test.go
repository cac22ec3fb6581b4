package sqlite

import (
	"path/filepath"
	"testing"
)

// A new file gets 8 KiB pages (and stays in WAL mode); reopening keeps them.
func TestNewFileHasLargerPages(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.db")
	for range 2 {
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		var size int
		var mode string
		if err := s.db.QueryRowContext(t.Context(), "PRAGMA page_size").Scan(&size); err != nil {
			t.Fatal(err)
		}
		if err := s.db.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if size != 8192 || mode != "wal" {
			t.Fatalf("page_size %d, journal_mode %s; want 8192, wal", size, mode)
		}
	}
}
