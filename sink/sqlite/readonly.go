package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrOlderSchema is returned by OpenReadOnly for a database written by an
// older formsync than it can read: it needs the migration Open applies,
// which a read-only open cannot make.
var ErrOlderSchema = errors.New("database schema is older than this formsync")

// readOnlyFrom is the oldest schema version OpenReadOnly reads. The
// migrations since it only add sync_state columns (stateAddedIn), which a
// read-only Sink reads as NULL: so that `formsync status` works on a file
// the new formsync has not synced yet.
const readOnlyFrom = 5

// stateAddedIn maps the sync_state columns ReadState reads that migrations
// after readOnlyFrom added to the version that added them.
var stateAddedIn = map[string]int{"copies": 6, "field_types": 7}

// olderStateSelect is the select list of stateColumns for a file of schema
// version: the columns added after it read as NULL.
func olderStateSelect(version int) string {
	cols := strings.Split(stateColumns, ",")
	for i, c := range cols {
		name := strings.TrimSpace(c)
		if v, ok := stateAddedIn[name]; ok && version < v {
			cols[i] = " NULL AS " + name
		}
	}
	return strings.Join(cols, ",")
}

// OpenReadOnly opens an existing formsync database for reading only, for
// tools such as `formsync status`: it never creates the file (a missing file
// is an error wrapping fs.ErrNotExist), never migrates it, takes no write
// lock, and works on a file the process may not write (a read-only copy or
// mount). A file from a newer formsync is refused as Open refuses it, one
// from a formsync older than schema version readOnlyFrom with
// ErrOlderSchema, and one in a directory it cannot write whose -wal file is
// there without its -shm, whose last commits it could not read. Commit
// fails on such a Sink.
func OpenReadOnly(ctx context.Context, path string) (*Sink, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if strings.HasPrefix(path, ":memory:") || path == ":memory" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: database path %q is not a file path", path)
	}
	// Checked before opening: SQLite itself would report a missing file as
	// "unable to open", indistinguishable from a permission problem.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err) // *fs.PathError: wraps fs.ErrNotExist for a missing file
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("sqlite: %s is a directory, not a database file", path)
	}
	s, err := openReadOnly(ctx, path, false)
	if cannotCreateBeside(err) {
		// A WAL database is read through its -shm file, which SQLite
		// creates beside it; in a read-only directory (a mounted copy, or
		// one whose mode forbids this process to write) it cannot, and
		// says so. Nothing writes a file there
		// that this process could see change, so it is read as immutable:
		// without the -shm and without locks.
		if err := checkNoLog(path); err != nil {
			return nil, err
		}
		s, err = openReadOnly(ctx, path, true)
	}
	return s, err
}

func openReadOnly(ctx context.Context, path string, immutable bool) (*Sink, error) {
	q := url.Values{}
	q.Set("mode", "ro") // SQLite's URI parameter: never creates, never writes
	if immutable {
		q.Set("immutable", "1")
	}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	// As a URI, '%' in the path would start an escape.
	db, err := sql.Open("sqlite", "file:"+strings.ReplaceAll(path, "%", "%25")+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: opening %s: %w", path, err)
	}
	db.SetMaxIdleConns(2)
	s := &Sink{db: db, path: path, now: time.Now}
	if err := s.checkSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// checkNoLog refuses a database whose write-ahead log is beside it, not
// empty, before it is read as immutable: an immutable read ignores the
// log, and the commits still in it (a copy taken before a checkpoint, a
// writer that was killed) would go unseen, the older state read as the
// current one.
func checkNoLog(path string) error {
	wal := path + "-wal"
	fi, err := os.Stat(wal)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("sqlite: %s: looking for its write-ahead log: %w", path, err)
	case fi.Size() == 0:
		return nil
	}
	return fmt.Errorf("sqlite: %s: its write-ahead log %s may hold commits the file does not, and SQLite reads it only through the -shm file beside it, which it cannot create in this directory: copy the -shm file with it, or open the database once where it can be written", path, wal)
}

// cannotCreateBeside reports the errors SQLite gives when it cannot create
// a WAL database's -wal or -shm file in its directory: SQLITE_CANTOPEN on
// a read-only mount, SQLITE_READONLY_DIRECTORY where the directory's mode
// forbids it.
func cannotCreateBeside(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_CANTOPEN || se.Code() == sqlite3.SQLITE_READONLY_DIRECTORY)
}

// checkSchema refuses what a read-only open cannot read: a file that is not
// formsync's, an empty one, a schema older than readOnlyFrom and one newer
// than this formsync's.
func (s *Sink) checkSchema(ctx context.Context) error {
	var appID, version int
	if err := s.db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return s.openError(err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.openError(err)
	}
	switch {
	case appID == 0 && version == 0:
		return fmt.Errorf("sqlite: %s: %w (it holds no formsync tables: no sync has written it)", s.path, ErrNotFormsync)
	case appID != applicationID:
		return fmt.Errorf("sqlite: %s: %w (it holds other tables)", s.path, ErrNotFormsync)
	case version > SchemaVersion:
		return fmt.Errorf("sqlite: %s: %w: schema version %d, this formsync knows up to %d; upgrade formsync", s.path, ErrNewerSchema, version, SchemaVersion)
	case version < readOnlyFrom:
		return fmt.Errorf("sqlite: %s: %w: schema version %d; a sync (which migrates it) must run first", s.path, ErrOlderSchema, version)
	case version < SchemaVersion:
		s.stateSelect = olderStateSelect(version)
		s.version = version
	}
	return nil
}
