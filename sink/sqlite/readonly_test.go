package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/sinktest"
)

func TestOpenReadOnlyMissingFileIsNotCreated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "typo.db")
	_, err := OpenReadOnly(t.Context(), path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want one wrapping fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenReadOnly created %s", path)
	}
}

func TestOpenReadOnlyReadsAndNeverWrites(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	commit(t, s, sink.FormCommit{State: stateOf("f1", "a"), Rows: sinktest.Spool(t, row(t, "f1", ptr(1), t0, false, `{"a":1}`))})
	s.Close()
	// A read-only copy: the mode bits say so (root ignores them, mode=ro
	// does not).
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	ro, err := OpenReadOnly(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	st, err := ro.ReadState(t.Context(), nil)
	if err != nil || st["f1"].Rows != 1 {
		t.Fatalf("state: %+v, %v", st, err)
	}
	rows, err := ro.ReadRows(t.Context(), "f1")
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows: %v, %v", rows, err)
	}
	if _, err := ro.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: stateOf("f2")}}}); err == nil {
		t.Error("a commit through a read-only sink succeeded")
	}
	if _, err := ro.db.Exec(`DELETE FROM submissions`); err == nil {
		t.Error("a write through a read-only sink's DB succeeded")
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Error("the file changed under a read-only open")
	}
}

// TestOpenReadOnlyReadsTheSchemaBefore: a file of the schema before this
// one (version 5, without sync_state.copies and field_types) is read as
// it is, the missing columns as NULL, so that `formsync status` works before the
// first sync of a newer formsync migrates the file.
func TestOpenReadOnlyReadsTheSchemaBefore(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	st := stateOf("f1", "a")
	st.Copies = map[string]int64{"k": 1}
	commit(t, s, sink.FormCommit{State: st, Rows: sinktest.Spool(t, row(t, "f1", ptr(1), t0, false, `{"a":1}`))})
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(undoVersion8, `ALTER TABLE sync_state DROP COLUMN copies`, `ALTER TABLE sync_state DROP COLUMN field_types`,
		`DROP VIEW submission_files`, `PRAGMA user_version = 5`) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	ro, err := OpenReadOnly(t.Context(), path)
	if err != nil {
		t.Fatalf("read-only open of a version 5 file: %v", err)
	}
	got, err := ro.ReadState(t.Context(), nil)
	ro.Close()
	if err != nil || got["f1"].Rows != 1 || got["f1"].Copies != nil || got["f1"].FieldTypes.Seen != nil {
		t.Fatalf("state of a version 5 file: %+v, %v; want one row, no copies and no types", got["f1"], err)
	}

	// A sync's Open migrates it; the column is there from then on.
	s, err = Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st = got["f1"]
	st.Copies = map[string]int64{"k": 2}
	commit(t, s, sink.FormCommit{State: st})
	if got, err := s.ReadState(t.Context(), nil); err != nil || got["f1"].Copies["k"] != 2 {
		t.Fatalf("state after the migration: %+v, %v", got["f1"], err)
	}
}

func TestOpenReadOnlyRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, make := range map[string]func(p string) error{
		"empty file": func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"junk": func(p string) error {
			return os.WriteFile(p, []byte(strings.Repeat("this is not sqlite\n", 100)), 0o600)
		},
		"other application": func(p string) error {
			s, err := Open(t.Context(), p)
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.db.Exec("PRAGMA application_id = 42")
			return err
		},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
		if err := make(p); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenReadOnly(t.Context(), p); !errors.Is(err, ErrNotFormsync) {
			t.Errorf("%s: err = %v, want ErrNotFormsync", name, err)
		}
	}

	for _, tc := range []struct {
		version int
		want    error
	}{{SchemaVersion + 1, ErrNewerSchema}, {readOnlyFrom - 1, ErrOlderSchema}} {
		p := filepath.Join(dir, fmt.Sprintf("v%d.db", tc.version))
		s, err := Open(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", tc.version))
		s.Close()
		if _, err := OpenReadOnly(t.Context(), p); !errors.Is(err, tc.want) {
			t.Errorf("schema version %d: err = %v, want %v", tc.version, err, tc.want)
		}
	}
	if _, err := OpenReadOnly(t.Context(), dir); err == nil {
		t.Error("a directory opened")
	}
}

// TestOpenReadOnlyInAReadOnlyDirectory reads a WAL database whose directory
// cannot be written (a mounted copy): SQLite cannot create its -shm file
// there. As root a directory's mode does not stop writes, so the test
// makes a read-only bind mount instead, and is skipped where it cannot.
func TestOpenReadOnlyInAReadOnlyDirectory(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	s, err := Open(t.Context(), filepath.Join(src, "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, sink.FormCommit{State: stateOf("f1", "a"), Rows: sinktest.Spool(t, row(t, "f1", ptr(1), t0, false, `{"a":1}`))})
	s.Close() // the last connection: the -wal and -shm files go
	dir := readOnlyDir(t, src)
	ro, err := OpenReadOnly(t.Context(), filepath.Join(dir, "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if st, err := ro.ReadState(t.Context(), nil); err != nil || st["f1"].Rows != 1 {
		t.Errorf("state: %+v, %v", st, err)
	}
}

// TestOpenReadOnlyCopyWithItsLog reads a copy, in a directory that cannot
// be written, of a database whose last commits are still in its
// write-ahead log (the -wal file, copied) but without the -shm file, which
// SQLite needs to read that log and cannot create there. The state read
// must be the last one committed, or the open must fail: never the older
// state the main file alone holds.
func TestOpenReadOnlyCopyWithItsLog(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	s, err := Open(t.Context(), filepath.Join(src, "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit(t, s, sink.FormCommit{State: stateOf("f1", "a"), Rows: sinktest.Spool(t, row(t, "f1", ptr(1), t0, false, `{"a":1}`))})
	if _, err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	// Committed, and only in the log: the copy is taken before a checkpoint.
	commit(t, s, sink.FormCommit{State: stateOf("f1", "a"), Rows: sinktest.Spool(t, row(t, "f1", ptr(2), t0, false, `{"a":2}`))})
	cp := t.TempDir()
	for _, name := range []string{"f.db", "f.db-wal"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := readOnlyDir(t, cp)

	ro, err := OpenReadOnly(t.Context(), filepath.Join(dir, "f.db"))
	if err != nil {
		if !strings.Contains(err.Error(), "-wal") {
			t.Errorf("refused without naming the log: %v", err)
		}
		return
	}
	defer ro.Close()
	if st, err := ro.ReadState(t.Context(), nil); err != nil || st["f1"].Rows != 2 || st["f1"].Revision != 2 {
		t.Errorf("state read without the log's commits: %d rows at revision %d (%v), want 2 rows at revision 2", st["f1"].Rows, st["f1"].Revision, err)
	}
}

// readOnlyDir returns src as a directory this process cannot write. As root
// a directory's mode does not stop writes, so it is a read-only bind mount
// then; the test is skipped where neither works.
func readOnlyDir(t *testing.T, src string) string {
	t.Helper()
	dir := src
	if os.Geteuid() == 0 {
		dir = t.TempDir()
		if out, err := exec.Command("mount", "--bind", src, dir).CombinedOutput(); err != nil {
			t.Skipf("cannot make a read-only mount here: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
		if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot make a read-only mount here: %v %s", err, out)
		}
	} else {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); err == nil {
		t.Skip("the directory is still writable")
	}
	return dir
}

// TestOpenRefusesAFileItCannotWrite: a file this process may only read
// (its mode, or a read-only mount that holds its -wal and -shm, as a
// killed writer leaves them) is opened by SQLite read-only without a word.
// A sync must learn it when it opens the file, not at its commit, after it
// has read the API.
func TestOpenRefusesAFileItCannotWrite(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	s, err := Open(t.Context(), filepath.Join(src, "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, sink.FormCommit{State: stateOf("f1", "a"), Rows: sinktest.Spool(t, row(t, "f1", ptr(1), t0, false, `{"a":1}`))})
	cp := t.TempDir()
	for _, name := range []string{"f.db", "f.db-wal", "f.db-shm"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if os.Geteuid() != 0 {
		os.Chmod(filepath.Join(cp, "f.db"), 0o444)
	}
	path := filepath.Join(readOnlyDir(t, cp), "f.db")

	s, err = Open(t.Context(), path)
	if err == nil {
		defer s.Close()
		st, _ := s.ReadState(t.Context(), nil)
		_, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st["f1"]}}})
		t.Fatalf("Open of a file it cannot write succeeded; the commit then failed: %v", err)
	}
	if !strings.Contains(err.Error(), "cannot be written") {
		t.Errorf("Open: %v, want it to say the file cannot be written", err)
	}
}

// TestOpenSaysWhyItCannotOpen: SQLite's "unable to open database file"
// names no cause; Open adds the one the file system shows, so that a
// mistyped FORMSYNC_SQLITE_PATH or an unmounted volume is fixed at once.
func TestOpenSaysWhyItCannotOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing", "f.db"): "the directory " + filepath.Join(dir, "missing") + " does not exist",
		dir:                                   "it is a directory, not a file",
		filepath.Join(file, "f.db"):           file + " is not a directory",
	} {
		s, err := Open(t.Context(), path)
		if err == nil {
			s.Close()
			t.Errorf("Open(%s) succeeded", path)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want it to say %q", path, err, want)
		}
	}
}
