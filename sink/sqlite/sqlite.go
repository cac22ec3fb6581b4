package sqlite

import (
	"github.com/formsync/formsync/sink"
	"io/fs"
	"os"
	"path/filepath"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	// ErrNotFormsync is returned by Open for a file that is not a formsync
	// database (not SQLite at all, or SQLite written by something else).
	ErrNotFormsync = errors.New("not a formsync database")
	// ErrNewerSchema is returned by Open for a database written by a newer
	// formsync than this one.
	ErrNewerSchema = errors.New("database schema is newer than this formsync")
)

var _ sink.Sink = (*Sink)(nil)

// busyTimeout bounds how long a statement waits for a lock held by another
// process (a second formsync, a read-only tool) before failing.
const busyTimeout = 30 * time.Second

// Sink is a formsync destination backed by one SQLite file. It is safe for
// concurrent use.
//
// It satisfies sink.Sink and passes sinktest's contract.
type Sink struct {
	db   *sql.DB
	path string
	// writeMu serialises Commits: SQLite has one writer at a time, and
	// waiting here is cheaper and clearer than SQLITE_BUSY.
	writeMu sync.Mutex
	now     func() time.Time
	// stateSelect is the select list ReadState reads sync_state with:
	// stateColumns, or, on a read-only file of an older schema, with the
	// columns added since read as NULL.
	stateSelect string
	// version is the schema version of a file opened read-only before a
	// sync migrated it; 0 when the file is of SchemaVersion.
	version int
}

// CheckPath reports a database path Open refuses whatever the file
// system holds: empty, in memory, or not a plain file path.
func CheckPath(path string) error {
	if path == "" {
		return errors.New("sqlite: empty database path")
	}
	if strings.HasPrefix(path, ":memory:") || path == ":memory" {
		// An in-memory database is gone when the process exits: a sync
		// into it would report success and keep nothing.
		return fmt.Errorf("sqlite: database path %q is an in-memory database, which keeps nothing after the run: give a file path", path)
	}
	if strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		// The driver reads a query string after '?'; refusing is clearer
		// than opening some other file.
		return fmt.Errorf("sqlite: database path %q must be a plain file path, without '?' or '#' and not a file: URI", path)
	}
	return nil
}

// Open opens the formsync database at path, creating the file if it is
// missing, and creates or migrates its schema.
func Open(ctx context.Context, path string) (*Sink, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Mode().IsRegular() && fi.Size() == 0) {
		setPageSize(ctx, path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// A row removed (forget) or rewritten (a field policy) has its old
	// bytes zeroed rather than left in free space: in the pages the commit
	// writes anyway, and, since FAST would leave them, in the overflow
	// pages that a submission longer than about 2 KB spills into and that
	// its removal frees (ON writes those freed pages once more, as zeros).
	// A load that only inserts frees no page and pays nothing for it.
	q.Add("_pragma", "secure_delete(ON)")
	// A page cache of 12 MiB (KiB when negative); a fixed bound. A commit
	// of rows in key order (a newest-first spool, read backwards) touches
	// few pages at a time and was no slower with 16 than with 32 MiB, and
	// peak RSS fell from 83 to 60 MiB; rows keyed by content land at random
	// and were some 5% slower (BENCHMARKS.md). Since a sync commits parts
	// while it reads, the cache is full while the readers hold their pages:
	// 16 MiB put a 4 x 250,000 first sync at 66-69 MiB, 12 MiB at 62-63.
	// 64 MiB was measured 12% faster on a million-row backfill before
	// key-order inserts, but pushed peak RSS from 94 to 156 MiB.
	q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", cacheKiB))
	// Writers take the write lock when they begin, so that two writers
	// never deadlock upgrading read locks; readers never open transactions.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: opening %s: %w", path, err)
	}
	db.SetMaxIdleConns(4)
	s := &Sink{db: db, path: path, now: time.Now}
	if err := s.checkWritable(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// readOnlyReporter is the driver connection's sqlite3_db_readonly.
type readOnlyReporter interface {
	IsReadOnly(schema string) (bool, error)
}

// checkWritable refuses a file this process may only read: SQLite opens
// one it cannot write (its mode, its owner, a read-only mount holding its
// -wal and -shm) read-only without a word, and a sync would learn it at its
// commit, after reading the API.
func (s *Sink) checkWritable(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.openError(err)
	}
	defer conn.Close()
	var readOnly bool
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(readOnlyReporter)
		if !ok {
			return nil
		}
		var err error
		readOnly, err = c.IsReadOnly("main")
		return err
	})
	if err != nil {
		return s.openError(err)
	}
	if readOnly {
		return fmt.Errorf("sqlite: %s: the file cannot be written by this process (its permissions, or a read-only mount); `formsync status` reads such a file", s.path)
	}
	return nil
}

// cacheKiB is the page cache of every connection, in KiB (see Open).
const cacheKiB = 12288

// newPageSize is the page size of a new database file. A submission with
// its raw JSON is some 500 bytes: a 4 KiB page (SQLite's default) holds a
// handful, and a large commit spends much of its time splitting pages
// (BENCHMARKS.md).
const newPageSize = 8192

// setPageSize gives a new, empty database file newPageSize pages. It must
// run before the file is put in WAL mode, which writes its header: the
// driver applies DSN pragmas in lexicographic order, journal_mode before
// page_size, hence a connection of its own. Errors are left to Open, which
// meets them again; a file another process created meanwhile keeps its
// page size (SQLite ignores the pragma for a file with content).
func setPageSize(ctx context.Context, path string) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d", newPageSize)); err != nil {
		return
	}
	conn.ExecContext(ctx, "PRAGMA journal_mode = WAL")
}

// Close closes the database.
func (s *Sink) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("sqlite: closing %s: %w", s.path, err)
	}
	return nil
}

func (s *Sink) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.openError(err)
	}
	defer tx.Rollback()
	var appID, version, objects int
	if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return s.openError(err)
	}
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.openError(err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").Scan(&objects); err != nil {
		return s.openError(err)
	}
	switch {
	case appID == 0 && version == 0 && objects == 0:
		// A new (or empty) file: ours to create.
	case appID != applicationID:
		return fmt.Errorf("sqlite: %s: %w (it holds other tables; point FORMSYNC_SQLITE_PATH at a new file)", s.path, ErrNotFormsync)
	case version > SchemaVersion:
		return fmt.Errorf("sqlite: %s: %w: schema version %d, this formsync knows up to %d; upgrade formsync", s.path, ErrNewerSchema, version, SchemaVersion)
	}
	if version == SchemaVersion {
		return nil
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("sqlite: %s: migrating schema to version %d: %w", s.path, v+1, err)
		}
	}
	if version < viewsTyped {
		// The rows stored before say what type each field's column has;
		// the views created before are untyped (and before version 4
		// leave out nothing): each is created again as a commit would
		// create it now.
		if err := typeViews(ctx, tx); err != nil {
			return fmt.Errorf("sqlite: %s: migrating schema to version %d: %w", s.path, viewsTyped, err)
		}
	}
	if version < filesViewSince {
		if err := filesViewCopies(ctx, tx); err != nil {
			return fmt.Errorf("sqlite: %s: migrating schema to version %d: %w", s.path, filesViewSince, err)
		}
	}
	// Both pragmas live in the file header and are transactional.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return fmt.Errorf("sqlite: %s: setting application id: %w", s.path, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return fmt.Errorf("sqlite: %s: setting schema version: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: %s: committing schema: %w", s.path, err)
	}
	return nil
}

func (s *Sink) openError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
		return fmt.Errorf("sqlite: %s: %w (the file is not an SQLite database)", s.path, ErrNotFormsync)
	}
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN {
		if why := cantOpenReason(s.path); why != "" {
			return fmt.Errorf("sqlite: opening %s: %s: %w", s.path, why, err)
		}
	}
	return fmt.Errorf("sqlite: opening %s: %w", s.path, err)
}

// cantOpenReason says why SQLite could not open or create path, where
// the file system tells: SQLite's own message ("unable to open database
// file") names no cause. "" when no cause is found.
func cantOpenReason(path string) string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "it is a directory, not a file"
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("the directory %s does not exist (create it, or fix the path)", dir)
	case err != nil:
		return fmt.Sprintf("the directory %s cannot be read: %v", dir, err)
	case !fi.IsDir():
		return fmt.Sprintf("%s is not a directory", dir)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("the file cannot be created in %s (this process may not write there: the directory's permissions, or a read-only mount)", dir)
	}
	return ""
}
