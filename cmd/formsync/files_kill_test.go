package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/enginetest"
)

// TestFilesSIGKILL kills `formsync sync` (SIGKILL) ten times while it
// keeps files: some runs die while the pages are read and their files
// fetched beside the reading, before the rows' commit; others after it,
// while the files phase fetches and records. Some files are slow (a body
// that waits), so that fetches are under way at the kills. The forms move
// on between runs. Then one clean run, after which: the rows table is
// exactly the simulators' submissions; every file of every stored row is
// stored with the simulator's bytes or recorded expired; one copy a
// (submission, url), none without its row; every copy's object holds the
// bytes its sha256 names, and so does every object in the store's folder
// (no half-written object survives a kill).
func TestFilesSIGKILL(t *testing.T) {
	t.Parallel()
	enginetest.Slow(t, "SIGKILLs ten syncs that keep files, about 80 s")
	bin := buildBinary(t)
	// Reading is throttled (10 a page, 40 requests/s: 60 pages for the
	// first sync's 600 submissions, 45 and more for the 450 added before
	// each later run), so that files are fetched beside the reading for a
	// while before the commit; 4 % of the files take 300 ms to come.
	sims, srvURL := filesSims(t, 600, apisim.Options{Seed: 81, Latency: time.Millisecond,
		Files: apisim.FileOptions{Expired: 0.05, Slow: 0.04, SlowFor: 300 * time.Millisecond}})
	dir := filepath.Join(t.TempDir(), "files")
	base := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	db := filepath.Join(t.TempDir(), "k.db")
	env := filesEnv(t, sims, srvURL, db, base, "FORMSYNC_PAGE_SIZE=10", "FORMSYNC_RATE_LIMIT=40")

	// Each run is killed when something has happened in it, not after a
	// time, so that the kills land where they are meant to on a busy box
	// as on an idle one: once it has made some file requests (while the
	// pages are read, before the commit), once its first write to the
	// database is seen (the write-ahead log written to: the commit under
	// way, as nothing else writes before it once the schema is made),
	// once it has made some file requests after that (in the files
	// phase, before its first record), or once copies it recorded are
	// seen (a files phase records 2,000 at a time: others are pending).
	// A run that ends first is not a kill, and the next plan is tried.
	plans := []killPlan{{files: 5}, {commit: true}, {afterCommit: 300}, {files: 60}, {commit: true}, {recorded: true},
		{files: 20}, {commit: true}, {recorded: true}, {afterCommit: 100}, {commit: true}, {recorded: true}, {files: 200}, {recorded: true}}
	var kills, beforeCommit, inCommit, afterCommit, recording int
	rows, copies := 0, 0
	for i := 0; kills < 10 && i < len(plans); i++ {
		p := plans[i]
		requests := sims.fileRequests()
		wal, committing, atCommit, polls := walState(db), false, 0, 0
		killed := runUntil(t, command(t, env), func() bool {
			n := sims.fileRequests()
			if !committing {
				if w := walState(db); w.size > 0 && w != wal {
					committing, atCommit = true, n
				}
			}
			switch polls++; {
			case p.commit:
				return committing
			case p.afterCommit > 0:
				return committing && n-atCommit >= p.afterCommit
			case p.recorded:
				// Every 10 ms: a read of the database beside the run's
				// writes.
				return polls%40 == 0 && copiesNow(db) > copies
			}
			return n-requests >= p.files
		})
		fetched := sims.fileRequests() - requests
		now, pending, recorded := countRows(t, db), pendingFiles(t, db), countCopies(t, db)
		if killed {
			kills++
			switch {
			case now == rows && p.commit:
				inCommit++
			case now == rows && fetched > 0:
				beforeCommit++
			case now > rows && pending > 0:
				afterCommit++
				if recorded > copies {
					recording++
				}
			}
		}
		t.Logf("run %d (%v): killed %v: %d file requests, rows %d -> %d, copies %d -> %d, %d files pending", i+1, p, killed, fetched, rows, now, copies, recorded, pending)
		copies = recorded
		rows = now
		for _, form := range sims.forms() { // the forms move on between runs
			sims[form].Add(form, 150)
		}
	}
	if kills < 10 {
		t.Errorf("%d runs killed, want 10", kills)
	}
	if beforeCommit+inCommit == 0 || recording == 0 {
		t.Errorf("%d kills while files were fetched before the rows' commit, %d in it, %d after it with files pending (%d once copies were recorded): want some before or in the commit, and some while copies were recorded",
			beforeCommit, inCommit, afterCommit, recording)
	}

	run(t, bin, env, "sync") // the clean run
	s, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	h := &enginetest.Harness{T: t, Sink: s}
	for _, form := range sims.forms() {
		h.Sim = sims[form].Server
		h.CheckTable(t.Context(), form, enginetest.Expected(t, sims[form].Server, form, apisim.Newer))
	}
	s.Close()
	c := checkViewFiles(t, sims, sqliteFiles(t, db), base, readFileObject)
	copies = checkCopyObjects(t, db)
	objects := checkStoreFolder(t, dir)
	t.Logf("%d SIGKILLs (%d while files were fetched before the rows' commit, %d in the commit, %d after it with files pending, %d of them once copies were recorded), then one clean run: rows exact, %d files stored, %d expired, %d copies, each naming an object with its bytes; %d objects in the folder, each holding the bytes it is named by",
		kills, beforeCommit, inCommit, afterCommit, recording, c.stored, c.expired, copies, objects)
}

// killPlan is when a run of TestFilesSIGKILL is killed: once it has made
// files file requests; with commit, once its database's write-ahead log
// is written to (the commit begins); with afterCommit, once it has made
// that many file requests after that; with recorded, once the copies it
// records are seen.
type killPlan struct {
	files       int
	commit      bool
	afterCommit int
	recorded    bool
}

func (p killPlan) String() string {
	switch {
	case p.commit:
		return "kill in the commit"
	case p.afterCommit > 0:
		return fmt.Sprintf("kill after the commit and %d file requests", p.afterCommit)
	case p.recorded:
		return "kill once copies are recorded"
	}
	return fmt.Sprintf("kill after %d file requests", p.files)
}

// wal is the size and modification time of a database's write-ahead
// log: one that differs from an earlier one was written since.
type wal struct {
	size    int64
	modTime time.Time
}

// walState is db's write-ahead log's; size -1 when there is none.
func walState(db string) wal {
	info, err := os.Stat(db + "-wal")
	if err != nil {
		return wal{size: -1}
	}
	return wal{info.Size(), info.ModTime()}
}

// runUntil runs cmd and kills it (SIGKILL) as soon as kill reports true,
// polled every 250 µs (a commit of a few hundred rows lasts a few
// milliseconds), unless it ends first (bounded at two
// minutes). It says whether the process was killed.
func runUntil(t *testing.T, cmd *exec.Cmd, kill func() bool) bool {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Microsecond)
	defer tick.Stop()
	bound := time.After(2 * time.Minute)
	for {
		select {
		case <-done:
			return false
		case <-bound:
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			t.Fatal("a run lasted two minutes")
		case <-tick.C:
			if kill() {
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
				return ok && ws.Signaled()
			}
		}
	}
}

// pendingFiles counts the files of db's stored rows that have no copy
// recorded; 0 before a run has made the view.
func pendingFiles(t testing.TB, db string) int {
	return countIn(t, db, "submission_files", `SELECT count(*) FROM submission_files WHERE stored_at IS NULL AND not_stored_reason IS NULL`)
}

// countCopies counts db's copies; 0 before a run has made their table.
func countCopies(t testing.TB, db string) int {
	return countIn(t, db, sink.FilesTable, `SELECT count(*) FROM `+sink.FilesTable)
}

// countIn runs the count query on db, 0 when db or the table or view
// named does not exist yet.
func countIn(t testing.TB, db, name, query string) int {
	t.Helper()
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var found int
	if err := conn.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = ?`, name).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		return 0
	}
	var n int
	if err := conn.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// copiesNow counts db's copies while a run may be writing it; -1 when it
// cannot (no table yet, the database busy).
func copiesNow(db string) int {
	conn, err := sql.Open("sqlite", db+"?mode=ro")
	if err != nil {
		return -1
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM ` + sink.FilesTable).Scan(&n); err != nil {
		return -1
	}
	return n
}

// checkCopyObjects checks db's copies: one a (form, submission, url),
// each of a stored row, and the object of each stored one holds the bytes
// its sha256 and size name. It returns how many copies there are.
func checkCopyObjects(t testing.TB, db string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var dups, orphans int
	if err := conn.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM ` + sink.FilesTable + ` GROUP BY form_id, submission_key, url HAVING count(*) > 1)`).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(`SELECT count(*) FROM ` + sink.FilesTable + ` AS c
		WHERE NOT EXISTS (SELECT 1 FROM submissions AS s WHERE s.form_id = c.form_id AND s.submission_key = c.submission_key)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if dups != 0 || orphans != 0 {
		t.Errorf("%d (submission, url) with more than one copy, %d copies without their row: want none", dups, orphans)
	}
	rows, err := conn.Query(`SELECT form_id, submission_key, url, sha256, object_uri, size, reason FROM ` + sink.FilesTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		var form, key, u string
		var sum, uri, reason sql.NullString
		var size sql.NullInt64
		if err := rows.Scan(&form, &key, &u, &sum, &uri, &size, &reason); err != nil {
			t.Fatal(err)
		}
		if !sum.Valid {
			if !reason.Valid || uri.Valid {
				t.Errorf("copy of %s/%s %s: no sha256, object %q, reason %q: want a reason and no object", form, key, u, uri.String, reason.String)
			}
			continue
		}
		b, err := readFileObject(uri.String)
		if err != nil {
			t.Errorf("copy of %s/%s %s names %s: %v", form, key, u, uri.String, err)
			continue
		}
		if got := sum256(b); got != sum.String || int64(len(b)) != size.Int64 {
			t.Errorf("copy of %s/%s %s names %s, %d bytes of %s: the object holds %d bytes of %s", form, key, u, uri.String, size.Int64, sum.String, len(b), got)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkStoreFolder checks that every object in a file:// store's folder
// (sha256/<digest>) holds the bytes of its digest; the driver's metadata
// beside them and temporary files a kill left (which a files phase sweeps
// once they are a day old) are not objects. It returns how many objects
// there are.
func checkStoreFolder(t testing.TB, dir string) int {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "sha256", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range paths {
		name := filepath.Base(p)
		if len(name) != 64 || !isHex(name) {
			continue
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := sum256(b); got != name {
			t.Errorf("object %s holds %d bytes of SHA-256 %s", p, len(b), got)
		}
	}
	return n
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
