package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
)

// Per-row statements. Arguments are repeated rather than numbered so that
// every statement reads left to right.
const (
	insertRowSQL = `INSERT INTO submissions
	(form_id, submission_id, submission_key, created_at, is_spam, fields, files, raw, synced_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (form_id, submission_key) DO NOTHING`
	// updateRowSQL makes a stored row the later version of its submission,
	// every column included, and only when something differs, so that
	// RowsAffected says whether it was updated. created_at is compared to
	// the millisecond: the newer response form prints three digits where a
	// row loaded from the older one keeps six, and that is not a change. A
	// NULL raw (a row staged without it) leaves the stored one.
	updateRowSQL = `UPDATE submissions
	SET submission_id = coalesce(?1, submission_id), is_spam = ?2, fields = ?3, files = ?4,
	    raw = coalesce(?5, raw),
	    created_at = CASE WHEN substr(created_at, 1, 23) = substr(?6, 1, 23) THEN created_at ELSE ?6 END,
	    synced_at = ?7
	WHERE form_id = ?8 AND submission_key = ?9
	  AND (is_spam IS NOT ?2 OR fields IS NOT ?3 OR files IS NOT ?4
	       OR (?5 IS NOT NULL AND raw IS NOT ?5)
	       OR substr(created_at, 1, 23) IS NOT substr(?6, 1, 23)
	       OR (?1 IS NOT NULL AND submission_id IS NOT ?1))`
	// rekeyRowSQL moves a row loaded from the older response form (keyed
	// by content) to its id key, keeping its created_at (six digits where
	// the newer form prints three), unless the id key is already taken.
	rekeyRowSQL = `UPDATE submissions
	SET submission_id = ?, submission_key = ?, is_spam = ?, fields = ?, files = ?, raw = coalesce(?, raw), synced_at = ?
	WHERE form_id = ? AND submission_key = ? AND submission_id IS NULL
	  AND NOT EXISTS (SELECT 1 FROM submissions WHERE form_id = ? AND submission_key = ?)`
	// hasTwinSQL says whether a content-keyed twin is stored.
	hasTwinSQL = `SELECT EXISTS (SELECT 1 FROM submissions WHERE form_id = ? AND submission_key = ? AND submission_id IS NULL)`
	// deleteLegacySQL removes a content-keyed twin and says whether it was
	// marked deleted upstream, which the form's counters need.
	deleteLegacySQL = `DELETE FROM submissions WHERE form_id = ? AND submission_key = ? AND submission_id IS NULL
	RETURNING deleted_at IS NOT NULL`
	// restoreRowSQL clears the mark of a stored row staged again: it is
	// served upstream once more.
	restoreRowSQL = `UPDATE submissions SET deleted_at = NULL, synced_at = ?
	WHERE form_id = ? AND submission_key = ? AND deleted_at IS NOT NULL`
	// INDEXED BY: left to itself SQLite plans this on the primary key and
	// reads every row of the form; the partial index holds only the rows
	// keyed by content, so the answer costs a page or two.
	hasLegacySQL = `SELECT EXISTS (SELECT 1 FROM submissions INDEXED BY submissions_legacy
		WHERE form_id = ? AND submission_id IS NULL)`
	prevStateSQL = `SELECT row_count, deleted_count, revision FROM sync_state WHERE form_id = ?`
	// forgetSQL removes rows by key, saying of each whether it was marked
	// deleted.
	forgetSQL = `DELETE FROM submissions WHERE form_id = ? AND submission_key IN (SELECT value FROM json_each(?))
	RETURNING deleted_at IS NOT NULL`
)

// A reconcile records the key of every row it stages in a temporary table
// of the transaction's connection; the rows of the form whose key is not
// there are then marked in one statement. Other commits never touch it.
const (
	servedTableSQL = `CREATE TEMP TABLE IF NOT EXISTS served (submission_key TEXT NOT NULL PRIMARY KEY) WITHOUT ROWID`
	servedClearSQL = `DELETE FROM temp.served`
	servedAddSQL   = `INSERT OR IGNORE INTO temp.served (submission_key) VALUES (?)`
	// restoreServedSQL clears the marks of the rows a reconcile staged:
	// per row, the upsert leaves deleted_at alone.
	restoreServedSQL = `UPDATE submissions SET deleted_at = NULL, synced_at = ?
	WHERE form_id = ? AND deleted_at IS NOT NULL
	  AND submission_key IN (SELECT submission_key FROM temp.served)`
	// markUnservedSQL marks the rows a reconcile did not stage. Their
	// synced_at stays: deleted_at says when the commit found them gone.
	markUnservedSQL = `UPDATE submissions SET deleted_at = ?
	WHERE form_id = ? AND deleted_at IS NULL
	  AND submission_key NOT IN (SELECT submission_key FROM temp.served)`
)

// ctxCheckEvery is how many rows go by between checks of the context: the
// per-row statements run without it (the driver would start a goroutine
// per statement to watch it).
const ctxCheckEvery = 256

type commitStmts struct {
	insert, update, rekey, hasTwin, deleteLegacy, restore, hasLegacy, prevState, writeState *sql.Stmt
	// served adds a key to the reconcile's table and servedBatch
	// servedBatchSize keys; prepared by the first reconcile of the commit,
	// after the table exists.
	served, servedBatch *sql.Stmt
}

func prepare(ctx context.Context, tx *sql.Tx) (*commitStmts, error) {
	var st commitStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.insert, insertRowSQL}, {&st.update, updateRowSQL}, {&st.rekey, rekeyRowSQL}, {&st.hasTwin, hasTwinSQL},
		{&st.deleteLegacy, deleteLegacySQL}, {&st.restore, restoreRowSQL}, {&st.hasLegacy, hasLegacySQL},
		{&st.prevState, prevStateSQL}, {&st.writeState, writeStateSQL},
	} {
		stmt, err := tx.PrepareContext(ctx, p.query)
		if err != nil {
			return nil, fmt.Errorf("sqlite: preparing commit: %w", err)
		}
		*p.dst = stmt
	}
	return &st, nil
}

// Commit applies c in one SQL transaction: every form's staged rows are
// upserted on (form_id, submission_key) and every form's state is written,
// or, on any error or cancellation, nothing is. The result holds the counts
// of every form in c.
func (s *Sink) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	if c == nil {
		return sink.Result{}, nil
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: commit: %w", err)
	}
	syncedAt := c.SyncTime(s.now)

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: beginning commit: %w", err)
	}
	defer tx.Rollback()
	st, err := prepare(ctx, tx)
	if err != nil {
		return nil, err
	}
	rebuild, err := dropCreatedIndex(ctx, tx, c)
	if err != nil {
		return nil, err
	}
	res := make(sink.Result, len(c.Forms))
	// A form listed twice is checked once, against the revision stored
	// before this commit, and stored at that revision + 1.
	expected := map[string]int64{}
	var conflicts []string
	for _, fc := range c.Forms {
		id := fc.State.FormID
		rev, seen := expected[id]
		if !seen {
			rev = fc.State.Revision
			expected[id] = rev
		}
		counts, err := s.commitForm(ctx, tx, st, fc, rev, !seen, syncedAt, res[id])
		if errors.Is(err, sink.ErrStateConflict) {
			conflicts = append(conflicts, id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: committing form %s: %w", id, err)
		}
		res[id] = res[id].Add(counts)
	}
	if len(conflicts) > 0 {
		return nil, fmt.Errorf("sqlite: %w", &sink.ConflictError{Forms: conflicts})
	}
	if rebuild {
		if err := createCreatedIndex(ctx, tx); err != nil {
			return nil, err
		}
	}
	taken, err := ensureViews(ctx, tx, c.Forms)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: committing: %w", err)
	}
	for id, kind := range taken {
		counts := res[id]
		counts.View = &viewTakenError{View: sqlname.ViewName(id), Kind: kind, Path: s.path}
		res[id] = counts
	}
	return res, nil
}

// ensureViews makes the view of every form of a commit match the field
// names and types the commit stores for it (a form listed twice: its last entry's),
// and returns those it could not make: what holds each one's name, by
// form id. A view that could not be made does not fail the commit: the
// rows are what the user asked for, and a later commit makes the view
// once its name is free.
func ensureViews(ctx context.Context, tx *sql.Tx, forms []sink.FormCommit) (map[string]string, error) {
	last := map[string]int{}
	for i, fc := range forms {
		last[fc.State.FormID] = i
	}
	taken := map[string]string{}
	for i, fc := range forms {
		if last[fc.State.FormID] != i {
			continue
		}
		kind, err := ensureView(ctx, tx, fc.State.FormID, fc.State.FieldNames, fc.State.FieldTypes)
		if err != nil {
			return nil, fmt.Errorf("sqlite: committing form %s: %w", fc.State.FormID, err)
		}
		if kind != "" {
			taken[fc.State.FormID] = kind
		}
	}
	return taken, nil
}

// ErrPurgeBlocked is wrapped by Purge's error when a reader of the file
// holds a snapshot older than the last commit.
var ErrPurgeBlocked = errors.New("a reader of the database holds an older snapshot")

// purgeWait is how long Purge waits for readers of older snapshots to
// finish: busyTimeout, shorter in tests.
var purgeWait = busyTimeout

// Purge erases from the file what a commit removed: the pages as they
// were before it (a forgotten row's bytes among them) stay in the database
// file, and earlier versions in the write-ahead log, until a checkpoint
// copies the log's newer pages over them. Purge runs that checkpoint to
// its end and empties the log (wal_checkpoint(TRUNCATE)). A reader holding
// an older snapshot (another process in the middle of a read) keeps the
// old pages in use: Purge waits for it up to purgeWait, then returns an
// error wrapping ErrPurgeBlocked, and the old pages go at the first
// checkpoint after that reader ends (a later commit, or the last
// connection to the file closing).
func (s *Sink) Purge(ctx context.Context) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: purging %s: %w", s.path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", purgeWait.Milliseconds())); err != nil {
		return fmt.Errorf("sqlite: purging %s: %w", s.path, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds()))
	var busy, logFrames, copied int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &copied); err != nil {
		return fmt.Errorf("sqlite: purging %s: %w", s.path, err)
	}
	if busy != 0 {
		return fmt.Errorf("sqlite: purging %s: %w, so the pages as they were before the last commit stay in the file until it ends (waited %v)",
			s.path, ErrPurgeBlocked, purgeWait)
	}
	return nil
}

// createdIndexSQL is the index on created_at, as the first migration
// creates it.
const createdIndexSQL = `CREATE INDEX submissions_form_created ON submissions (form_id, created_at)`

// indexBuildCacheKiB is the page cache while the index is built. SQLite's
// sorter takes as much memory as the page cache again; at 2 MiB the build
// keeps the commit's peak RSS near where the inserts put it (60.2-61.1
// MiB for a million rows, against 62.3-62.7 at 4 MiB, BENCHMARKS.md
// section 8.3).
const indexBuildCacheKiB = 2048

// dropCreatedIndex drops the created_at index, in the commit's transaction,
// when the commit stages at least as many rows keyed by content (the older
// response form) as the table holds: a first load, whose rebuild
// (createCreatedIndex) scans at most twice the rows it stages.
//
// Such rows are keyed by hashes. Read in key order (sink.Spool.RowsByKey)
// they grow the table at one edge, but their created_at values come at
// random, and at a million rows the index took them on random pages far
// beyond the page cache: the inserts took about 18 s. Without the index
// they took about 7.5 s, and building it again after them, from one sorted
// pass, about 2.5 s (BENCHMARKS.md section 8.3).
//
// Not for a reconcile, which stages the rows a form holds. A backfill's
// checkpoint qualifies by the same count: one that holds the whole form
// (read within worker.CheckpointInterval) is a first load too. The
// statements of a commit never use the index, and readers never see it
// missing: the drop and the build are in one transaction, and a failed
// commit rolls both back.
func dropCreatedIndex(ctx context.Context, tx *sql.Tx, c *sink.Commit) (bool, error) {
	var staged int64
	for _, fc := range c.Forms {
		if fc.Reconcile {
			return false, nil
		}
		if fc.Rows != nil && fc.Rows.OnlyContentKeys() {
			staged += int64(fc.Rows.Len())
		}
	}
	if staged == 0 {
		return false, nil
	}
	var stored int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(row_count + deleted_count), 0) FROM sync_state`).Scan(&stored); err != nil {
		return false, fmt.Errorf("sqlite: counting stored rows: %w", err)
	}
	if staged < stored {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `DROP INDEX submissions_form_created`); err != nil {
		return false, fmt.Errorf("sqlite: dropping the created_at index for a first load: %w", err)
	}
	return true, nil
}

// createCreatedIndex builds the created_at index again, with the page
// cache lowered while SQLite sorts the entries.
func createCreatedIndex(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size = -%d", indexBuildCacheKiB)); err != nil {
		return fmt.Errorf("sqlite: lowering the page cache to build the created_at index: %w", err)
	}
	_, err := tx.ExecContext(ctx, createdIndexSQL)
	if _, rerr := tx.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA cache_size = -%d", cacheKiB)); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("sqlite: building the created_at index: %w", err)
	}
	return nil
}

// rowTally is what a commit did to one form's rows: the counts it reports,
// and the form's rows not marked deleted (live) and marked (deleted), kept
// from the stored state through every change so that the state's counters
// equal the rows without counting them.
type rowTally struct {
	sink.Counts
	live, deleted int64
}

// removed accounts for a stored row deleted from the table.
func (t *rowTally) removed(wasDeleted bool) {
	if wasDeleted {
		t.deleted--
	} else {
		t.live--
	}
}

// commitForm writes one form's rows and state at revision+1. When check is
// set it first compares the stored revision with revision and returns
// sink.ErrStateConflict, writing nothing, when they differ. before is what
// the commit did to the form already (it lists the form twice): the state's
// last_commit holds the sum.
func (s *Sink) commitForm(ctx context.Context, tx *sql.Tx, st *commitStmts, fc sink.FormCommit, revision int64, check bool, syncedAt time.Time, before sink.Counts) (sink.Counts, error) {
	formID := fc.State.FormID
	var (
		tally  rowTally
		stored int64
	)
	err := st.prevState.QueryRowContext(ctx, formID).Scan(&tally.live, &tally.deleted, &stored)
	missing := errors.Is(err, sql.ErrNoRows)
	if err != nil && !missing {
		return sink.Counts{}, fmt.Errorf("reading previous state: %w", err)
	}
	if check && stored != revision {
		return sink.Counts{}, sink.ErrStateConflict
	}
	if missing || tally.live < 0 || tally.deleted < 0 {
		// The counters go on from the stored ones: without a state (a
		// new form, or one whose state row was deleted by hand while its
		// rows stayed) or with a count no commit writes, they start from
		// the rows themselves, one range of the primary key.
		if err := tx.QueryRowContext(ctx, countRowsSQL, formID).Scan(&tally.live, &tally.deleted); err != nil {
			return sink.Counts{}, fmt.Errorf("counting stored rows: %w", err)
		}
	}
	synced := formatTime(syncedAt).String
	if len(fc.Forget) > 0 {
		if err := forget(ctx, tx, formID, fc.Forget, &tally); err != nil {
			return tally.Counts, err
		}
	}
	if fc.Reconcile {
		if err := st.startReconcile(ctx, tx); err != nil {
			return tally.Counts, err
		}
	}
	if fc.Rows != nil && fc.Rows.Len() > 0 {
		if err := upsertRows(ctx, st, fc, synced, &tally); err != nil {
			return tally.Counts, err
		}
	}
	if fc.Reconcile {
		if err := finishReconcile(ctx, tx, formID, synced, &tally); err != nil {
			return tally.Counts, err
		}
	}
	args, err := stateArgs(fc.State, tally.live, tally.deleted, revision+1, syncedAt, before.Add(tally.Counts))
	if err != nil {
		return tally.Counts, fmt.Errorf("encoding state: %w", err)
	}
	if _, err := st.writeState.ExecContext(ctx, args...); err != nil {
		return tally.Counts, fmt.Errorf("writing state: %w", err)
	}
	return tally.Counts, nil
}

// forget removes the form's rows stored under keys.
func forget(ctx context.Context, tx *sql.Tx, formID string, keys []string, tally *rowTally) error {
	j, err := json.Marshal(keys)
	if err != nil {
		return fmt.Errorf("encoding the keys to forget: %w", err)
	}
	rows, err := tx.QueryContext(ctx, forgetSQL, formID, string(j))
	if err != nil {
		return fmt.Errorf("forgetting submissions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var wasDeleted bool
		if err := rows.Scan(&wasDeleted); err != nil {
			return fmt.Errorf("forgetting submissions: %w", err)
		}
		tally.Forgotten++
		tally.removed(wasDeleted)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("forgetting submissions: %w", err)
	}
	return nil
}

// startReconcile readies the table of served keys, empty, for a reconcile.
func (st *commitStmts) startReconcile(ctx context.Context, tx *sql.Tx) error {
	if st.served == nil {
		if _, err := tx.ExecContext(ctx, servedTableSQL); err != nil {
			return fmt.Errorf("creating the table of served keys: %w", err)
		}
		for _, p := range []struct {
			dst   **sql.Stmt
			query string
		}{{&st.served, servedAddSQL}, {&st.servedBatch, servedBatchSQL}} {
			stmt, err := tx.PrepareContext(ctx, p.query)
			if err != nil {
				return fmt.Errorf("preparing the table of served keys: %w", err)
			}
			*p.dst = stmt
		}
	}
	if _, err := tx.ExecContext(ctx, servedClearSQL); err != nil {
		return fmt.Errorf("clearing the table of served keys: %w", err)
	}
	return nil
}

// servedBatchSize is how many keys one statement adds to the reconcile's
// table. A statement per key cost a reconcile of 100,000 unchanged rows
// some 4 µs of CPU per row more than a plain commit of them; batches of 128
// cost 3 µs, and six allocations per row fewer (BenchmarkCommitAgain, on a
// busy 2-core machine).
const servedBatchSize = 128

// servedBatchSQL adds servedBatchSize keys.
var servedBatchSQL = `INSERT OR IGNORE INTO temp.served (submission_key) VALUES (?)` +
	strings.Repeat(`, (?)`, servedBatchSize-1)

// servedKeys gathers the keys of a reconcile's staged rows and adds them
// to its table a batch at a time.
type servedKeys struct {
	st   *commitStmts
	keys []any
}

func (k *servedKeys) add(ctx context.Context, key string) error {
	k.keys = append(k.keys, key)
	if len(k.keys) < servedBatchSize {
		return nil
	}
	_, err := k.st.servedBatch.ExecContext(ctx, k.keys...)
	k.keys = k.keys[:0]
	return err
}

func (k *servedKeys) flush(ctx context.Context) error {
	for _, key := range k.keys {
		if _, err := k.st.served.ExecContext(ctx, key); err != nil {
			return err
		}
	}
	k.keys = k.keys[:0]
	return nil
}

// finishReconcile clears the marks of the rows the reconcile staged and
// marks the form's other rows deleted upstream at synced.
func finishReconcile(ctx context.Context, tx *sql.Tx, formID, synced string, tally *rowTally) error {
	exec := func(query string) (int64, error) {
		r, err := tx.ExecContext(ctx, query, synced, formID)
		if err != nil {
			return 0, err
		}
		return r.RowsAffected()
	}
	if tally.deleted > 0 {
		n, err := exec(restoreServedSQL)
		if err != nil {
			return fmt.Errorf("restoring rows served again: %w", err)
		}
		tally.Restored += n
		tally.live += n
		tally.deleted -= n
	}
	n, err := exec(markUnservedSQL)
	if err != nil {
		return fmt.Errorf("marking rows no longer served: %w", err)
	}
	tally.Deleted += n
	tally.live -= n
	tally.deleted += n
	return nil
}

// stagedRow is a spool row with its created_at formatted for the table.
type stagedRow struct {
	sink.Row
	created string
	// skip is set for a row that must not be stored (a tombstoned one).
	skip bool
}

// prefetchBatch is how many rows prefetch hands over at a time, and
// prefetchDepth how many batches it reads ahead.
const (
	prefetchBatch = 256
	prefetchDepth = 4
)

// prefetch yields the rows of seq, reading and parsing them in a goroutine
// of its own a few batches ahead, so that decoding the spool runs on
// another core than the statements, which are the commit's critical path.
// skip, when not nil, runs there too and sets stagedRow.skip. The goroutine
// has ended (and closed the spool) when the iteration does.
func prefetch(seq iter.Seq2[sink.Row, error], skip func(*sink.Row) bool) iter.Seq2[stagedRow, error] {
	type batch struct {
		rows []stagedRow
		err  error
	}
	return func(yield func(stagedRow, error) bool) {
		ch := make(chan batch, prefetchDepth)
		free := make(chan []stagedRow, prefetchDepth+2)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(ch)
			send := func(b batch) bool {
				select {
				case ch <- b:
					return true
				case <-stop:
					return false
				}
			}
			next := func() []stagedRow {
				select {
				case b := <-free:
					return b[:0]
				default:
					return make([]stagedRow, 0, prefetchBatch)
				}
			}
			b := next()
			for r, err := range seq {
				if err != nil {
					send(batch{rows: b, err: err})
					return
				}
				b = append(b, stagedRow{Row: r, created: r.CreatedAt.UTC().Format(sink.TimeLayout)})
				if skip != nil {
					sr := &b[len(b)-1]
					sr.skip = skip(&sr.Row)
				}
				if len(b) == prefetchBatch {
					if !send(batch{rows: b}) {
						return
					}
					b = next()
				}
			}
			if len(b) > 0 {
				send(batch{rows: b})
			}
		}()
		defer func() {
			close(stop)
			<-done
		}()
		for b := range ch {
			for _, r := range b.rows {
				if !yield(r, nil) {
					return
				}
			}
			if b.err != nil {
				yield(stagedRow{}, b.err)
				return
			}
			clear(b.rows)
			select {
			case free <- b.rows:
			default:
			}
		}
	}
}

// upsertRows streams one form's spool into the submissions table, adding to
// tally. A row with a tombstone is skipped. A stored row staged again has
// its mark cleared (restored): here, row by row, when the form holds marked
// rows; in one statement after the rows, by finishReconcile, in a
// reconcile, which records here the key every staged row is stored under.
func upsertRows(ctx context.Context, st *commitStmts, fc sink.FormCommit, syncedAt string, tally *rowTally) error {
	u, err := newUpsert(ctx, st, fc, syncedAt, tally)
	if err != nil {
		return err
	}
	n := 0
	for sr, err := range prefetch(u.ordered(fc.Rows), skipForgotten(fc.State.Forgotten)) {
		if err != nil {
			return err
		}
		if n++; n%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if sr.FormID != u.formID {
			return fmt.Errorf("spool row %d belongs to form %q", n, sr.FormID)
		}
		if sr.skip {
			continue
		}
		if err := u.row(&sr.Row, sr.created); err != nil {
			return err
		}
	}
	if err := u.finish(); err != nil {
		return err
	}
	return ctx.Err()
}

// upsert is the writing of one form's staged rows.
type upsert struct {
	st *commitStmts
	// bg is the context of the statements, never cancelled: the commit's
	// is checked every ctxCheckEvery rows and again by tx.Commit, and its
	// cancellation rolls the transaction back.
	bg               context.Context
	formID, syncedAt string
	tally            *rowTally
	// hasLegacy reports that the form holds rows keyed by content.
	hasLegacy bool
	// restoreEach clears the mark of every stored row staged again, row
	// by row: only rows marked before this commit can be restored, so a
	// form without any (most) pays nothing for it.
	restoreEach bool
	// doomed holds the content-keyed twins to remove after the rows: each
	// of a row with an id whose id key is stored already. One staged again
	// later in the commit (the older response form serving it) is the
	// stored row, not a new one, and stays; a doomed twin is not re-keyed
	// to another id meanwhile.
	doomed map[string]struct{}
	// served, in a reconcile, records the key every row is stored under.
	served *servedKeys
}

func newUpsert(ctx context.Context, st *commitStmts, fc sink.FormCommit, syncedAt string, tally *rowTally) (*upsert, error) {
	u := &upsert{
		st: st, bg: context.WithoutCancel(ctx), formID: fc.State.FormID, syncedAt: syncedAt, tally: tally,
		restoreEach: !fc.Reconcile && tally.deleted > 0,
	}
	if err := st.hasLegacy.QueryRowContext(ctx, u.formID).Scan(&u.hasLegacy); err != nil {
		return nil, fmt.Errorf("looking for rows keyed by content: %w", err)
	}
	if fc.Reconcile {
		u.served = &servedKeys{st: st, keys: make([]any, 0, servedBatchSize)}
	}
	return u, nil
}

// skipForgotten tells the rows with a tombstone; nil when there is none.
func skipForgotten(fg *state.Forgotten) func(*sink.Row) bool {
	if fg.Empty() {
		return nil
	}
	return func(r *sink.Row) bool { return fg.Has(r.SubmissionKey) || fg.Has(r.ContentKey) }
}

// ordered reads the spool in the order the table takes fastest.
//
// A spool read newest first holds each submission once, ids descending:
// read backwards, it inserts in ascending key order, and the B-trees grow
// at one edge instead of splitting pages everywhere (a quarter less time
// into an empty table, BENCHMARKS.md section 8). Rows with distinct keys
// do not depend on each other's order, unless some are re-keyed from
// content keys, which only a form holding such rows does.
//
// Rows keyed by content carry hashes for keys, in no order related to the
// reading. Read in key order (the spools the command stages for SQLite
// sort them, worker.Config.SortContentKeys), they grow the table's B-tree
// at one edge too, and only the created_at index takes them at random (a
// first sync of a million took 32 s instead of 55, BENCHMARKS.md section
// 8.3). Without ids, no row is re-keyed, and rows under one key keep their
// order.
func (u *upsert) ordered(sp *sink.Spool) iter.Seq2[sink.Row, error] {
	switch {
	case !u.hasLegacy && sp.DescendingIDs():
		return sp.RowsReversed()
	case sp.KeyOrdered():
		return sp.RowsByKey()
	}
	return sp.Rows()
}

// rowArgs are a row's columns as the statements take them.
type rowArgs struct {
	id   sql.NullInt64
	spam int
	raw  sql.NullString
}

func argsOf(r *sink.Row) rowArgs {
	var a rowArgs
	if r.SubmissionID != nil {
		a.id = sql.NullInt64{Int64: *r.SubmissionID, Valid: true}
	}
	if r.IsSpam {
		a.spam = 1
	}
	if r.Raw != "" {
		a.raw = sql.NullString{String: r.Raw, Valid: true}
	}
	return a
}

// row writes one staged row: re-keys its content-keyed twin, or inserts
// it, or updates the stored version.
func (u *upsert) row(r *sink.Row, created string) error {
	if u.served != nil {
		// The key the row ends up under, whichever way below it goes.
		if err := u.served.add(u.bg, r.SubmissionKey); err != nil {
			return fmt.Errorf("recording submission %s as served: %w", r.SubmissionKey, err)
		}
	}
	a := argsOf(r)
	if a.id.Valid && u.hasLegacy && r.ContentKey != "" && r.ContentKey != r.SubmissionKey {
		if done, err := u.rekey(r, a); done || err != nil {
			return err
		}
	} else if !a.id.Valid {
		// Staged again after a row with its id doomed it: it is the
		// stored row, upserted as any other.
		delete(u.doomed, r.SubmissionKey)
	}
	return u.insertOrUpdate(r, created, a)
}

// rekey moves the row's content-keyed twin to its id key; done reports
// that it did. When the id key is taken already, the twin is doomed.
func (u *upsert) rekey(r *sink.Row, a rowArgs) (done bool, err error) {
	if _, gone := u.doomed[r.ContentKey]; gone {
		return false, nil
	}
	k, err := u.exec(u.st.rekey, a.id, r.SubmissionKey, a.spam, r.Fields, r.Files, a.raw, u.syncedAt,
		u.formID, r.ContentKey, u.formID, r.SubmissionKey)
	if err != nil {
		return false, fmt.Errorf("re-keying submission %s: %w", r.SubmissionKey, err)
	}
	if k > 0 {
		u.tally.Updated++
		return true, u.restore(r.SubmissionKey)
	}
	// The id key is taken already: a legacy twin must not stay.
	var twin bool
	if err := u.st.hasTwin.QueryRowContext(u.bg, u.formID, r.ContentKey).Scan(&twin); err != nil {
		return false, fmt.Errorf("looking for the content-keyed twin of submission %s: %w", r.SubmissionKey, err)
	}
	if twin {
		if u.doomed == nil {
			u.doomed = map[string]struct{}{}
		}
		u.doomed[r.ContentKey] = struct{}{}
	}
	return false, nil
}

// insertOrUpdate inserts the row, or makes the stored row its later
// version.
func (u *upsert) insertOrUpdate(r *sink.Row, created string, a rowArgs) error {
	k, err := u.exec(u.st.insert, u.formID, a.id, r.SubmissionKey, created, a.spam, r.Fields, r.Files, a.raw, u.syncedAt)
	if err != nil {
		return fmt.Errorf("inserting submission %s: %w", r.SubmissionKey, err)
	}
	if k > 0 {
		u.tally.Inserted++
		u.tally.live++
		if !a.id.Valid {
			u.hasLegacy = true
		}
		return nil
	}
	k, err = u.exec(u.st.update, a.id, a.spam, r.Fields, r.Files, a.raw, created, u.syncedAt, u.formID, r.SubmissionKey)
	if err != nil {
		return fmt.Errorf("updating submission %s: %w", r.SubmissionKey, err)
	}
	u.tally.Updated += k
	return u.restore(r.SubmissionKey)
}

// finish removes the doomed twins and records the last served keys.
func (u *upsert) finish() error {
	for key := range u.doomed {
		var wasDeleted bool
		switch err := u.st.deleteLegacy.QueryRowContext(u.bg, u.formID, key).Scan(&wasDeleted); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("deleting content-keyed twin %s: %w", key, err)
		default:
			u.tally.removed(wasDeleted)
		}
	}
	if u.served != nil {
		if err := u.served.flush(u.bg); err != nil {
			return fmt.Errorf("recording submissions as served: %w", err)
		}
	}
	return nil
}

// exec runs a per-row statement and says how many rows it changed.
func (u *upsert) exec(stmt *sql.Stmt, args ...any) (int64, error) {
	r, err := stmt.ExecContext(u.bg, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// restore clears the mark of one stored row staged again, if it has one
// and the commit restores row by row.
func (u *upsert) restore(key string) error {
	if !u.restoreEach {
		return nil
	}
	k, err := u.exec(u.st.restore, u.syncedAt, u.formID, key)
	if err != nil {
		return fmt.Errorf("restoring submission %s: %w", key, err)
	}
	u.tally.Restored += k
	u.tally.live += k
	u.tally.deleted -= k
	return nil
}
