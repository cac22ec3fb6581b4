package main

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
)

// Proofs of the files store through the real binary: every file a stored
// submission names is kept once, by its bytes, and submission_files says
// where.

// formSims serves several simulators at one address, one a form, so that
// the forms' files differ in number (apisim's FileOptions are a server's):
// a request's form, in the API's path or the files' path, picks the
// simulator. Every simulator serves with the default token.
type formSims map[string]formSim

// formSim is one form's simulator and the seed it was made with, which
// apisim.FileBytes needs.
type formSim struct {
	*apisim.Server
	seed int64
}

func (m formSims) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	form := ""
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/api/forms/"):
		form, _, _ = strings.Cut(strings.TrimPrefix(p, "/api/forms/"), "/")
	case strings.HasPrefix(p, apisim.FilesPath+"moved/"):
		form, _, _ = strings.Cut(strings.TrimPrefix(p, apisim.FilesPath+"moved/"), "/")
	case strings.HasPrefix(p, apisim.FilesPath):
		form, _, _ = strings.Cut(strings.TrimPrefix(p, apisim.FilesPath), "/")
	}
	if f, err := url.PathUnescape(form); err == nil {
		form = f
	}
	sim, ok := m[form]
	if !ok {
		http.NotFound(w, r)
		return
	}
	sim.ServeHTTP(w, r)
}

// forms is the forms served, sorted.
func (m formSims) forms() []string { return slices.Sorted(maps.Keys(m)) }

// fileRequests is the number of file requests every simulator answered.
func (m formSims) fileRequests() int {
	n := 0
	for _, s := range m {
		n += s.Stats().FileRequests
	}
	return n
}

// filesSims is three forms of n submissions in all, every submission with
// files: one a submission in form "one", two in "two", three in "three".
// Each form's simulator has o's options (o.Files too, but for Every and
// PerSubmission), its seed o.Seed plus the form's place, and unless o
// dates them its submissions end a minute ago. It returns the
// simulators and their server's URL; the file URLs name that server.
func filesSims(t testing.TB, n int, o apisim.Options) (formSims, string) {
	t.Helper()
	if o.Start.IsZero() && o.End.IsZero() {
		// Dated up to a minute ago, within worker.FilesWindow, so that
		// every files phase looks at every row, not only a form's first
		// in a store (the simulator's default dates are months old).
		o.End = time.Now().Add(-time.Minute)
	}
	sims := formSims{}
	names := []string{"one", "two", "three"}
	for i, form := range names {
		per := n / len(names)
		if i < n%len(names) {
			per++
		}
		fo := o
		fo.Seed, fo.Variant, fo.Forms, fo.SubmissionsPerForm = o.Seed+int64(i), apisim.Newer, []string{form}, per
		fo.Files.Every, fo.Files.PerSubmission = 1, i+1
		sims[form] = formSim{apisim.New(fo), fo.Seed}
	}
	srv := httptest.NewServer(sims)
	t.Cleanup(srv.Close)
	for _, s := range sims {
		if err := s.SetFilesOrigin(srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	return sims, srv.URL
}

// viewFile is one row of submission_files, with where the file stands.
type viewFile struct {
	FormID, SubmissionKey, URL                    string
	ObjectURI, SHA256, ContentType, StoredAt, Why sql.NullString
	StoredSize                                    sql.NullInt64
}

// sqliteFiles reads db's submission_files view.
func sqliteFiles(t testing.TB, db string) []viewFile {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT form_id, submission_key, url, object_uri, sha256, stored_size, content_type, stored_at, not_stored_reason
		FROM submission_files ORDER BY form_id, submission_key, url`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []viewFile
	for rows.Next() {
		var v viewFile
		if err := rows.Scan(&v.FormID, &v.SubmissionKey, &v.URL, &v.ObjectURI, &v.SHA256, &v.StoredSize, &v.ContentType, &v.StoredAt, &v.Why); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sqliteCopies reads db's submission_file_copies table, every column as
// text, one line a copy, in key order: two reads are equal when no copy
// was written between them.
func sqliteCopies(t testing.TB, db string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT form_id, submission_key, url, coalesce(sha256, '-'), coalesce(object_uri, '-'), coalesce(size, -1),
		coalesce(content_type, '-'), coalesce(stored_at, '-'), coalesce(reason, '-'), recorded_at
		FROM ` + sink.FilesTable + ` ORDER BY form_id, submission_key, url`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c [10]string
		if err := rows.Scan(&c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7], &c[8], &c[9]); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(c[:], " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readFileObject reads the object a file:// object URI names.
func readFileObject(uri string) ([]byte, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return nil, fmt.Errorf("object URI %q: not a file:// URI", uri)
	}
	return os.ReadFile(filepath.FromSlash(u.Path))
}

// storeObjects lists the files under a file:// store's folder with their
// sizes and modification times: two listings are equal when nothing was
// stored between them.
func storeObjects(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%d %s", info.Size(), info.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fileChecks counts what checkViewFiles found.
type fileChecks struct{ stored, expired int }

// checkViewFiles checks that view (submission_files) names every file of
// every live submission of sims once, each where the simulator says it
// should stand: an expired one recorded expired with no object, every
// other stored, the object (read) holding the simulator's bytes for that
// file (apisim.FileBytes) under their SHA-256, object_uri
// base/sha256/<digest>. Pending files fail it: call it after a sync that
// ends.
func checkViewFiles(t testing.TB, sims formSims, view []viewFile, base string, read func(uri string) ([]byte, error)) fileChecks {
	t.Helper()
	type key struct{ form, sub, url string }
	got := map[key]viewFile{}
	for _, v := range view {
		k := key{v.FormID, v.SubmissionKey, v.URL}
		if _, dup := got[k]; dup {
			t.Errorf("submission_files names %v twice", k)
		}
		got[k] = v
	}
	var c fileChecks
	want := 0
	for _, form := range sims.forms() {
		sim := sims[form]
		for _, f := range sim.Files(form) {
			want++
			k := key{form, strconv.FormatInt(f.ID, 10), f.URL}
			v, ok := got[k]
			if !ok {
				t.Errorf("submission_files has no row for %v", k)
				continue
			}
			if f.Fault == apisim.FileNotFound || f.Fault == apisim.FileGone {
				if v.Why.String != sink.FileExpired || v.ObjectURI.Valid || v.SHA256.Valid || v.StoredSize.Valid || v.StoredAt.Valid {
					t.Errorf("%v (%v at the service): %+v, want not_stored_reason expired and no object", k, f.Fault, v)
				}
				c.expired++
				continue
			}
			wantBytes := apisim.FileBytes(sim.seed, form, f.ID, f.Position, f.Served)
			wantSum := sum256(wantBytes)
			if wantSum != f.SHA256 {
				t.Fatalf("%v: FileBytes' SHA-256 %s is not Files' %s", k, wantSum, f.SHA256)
			}
			if v.Why.Valid || v.SHA256.String != wantSum || v.StoredSize.Int64 != f.Served || !v.StoredSize.Valid ||
				v.ObjectURI.String != base+"/sha256/"+wantSum || v.ContentType.String != f.Type || !v.StoredAt.Valid {
				t.Errorf("%v: %+v, want stored at %s/sha256/%s, %d bytes of %s", k, v, base, wantSum, f.Served, f.Type)
				continue
			}
			b, err := read(v.ObjectURI.String)
			if err != nil {
				t.Errorf("%v: reading its object: %v", k, err)
				continue
			}
			if s := sum256(b); s != wantSum {
				t.Errorf("%v: object %s holds %d bytes of SHA-256 %s, want the simulator's %d bytes of %s", k, v.ObjectURI.String, len(b), s, f.Served, wantSum)
				continue
			}
			c.stored++
		}
	}
	if len(view) != want {
		t.Errorf("submission_files has %d rows, want one a file: %d", len(view), want)
	}
	return c
}

// filesEnv is the environment of a sync of sims' forms into the SQLite
// file db, keeping the files in store.
func filesEnv(t testing.TB, sims formSims, srvURL, db, store string, extra ...string) []string {
	t.Helper()
	return baseEnv(srvURL, strings.Join(sims.forms(), ","), db, t.TempDir(),
		append([]string{"FORMSYNC_FILES_STORE=" + store, "FORMSYNC_FILES_ALLOW_LOOPBACK=true"}, extra...)...)
}

// TestFilesSyncSQLiteFolder runs `formsync sync` on 1,000 submissions of
// three forms, with one, two and three files each (2,000 files, 5 %
// expired at the service), into SQLite with a file:// store: every file
// is stored by its bytes or recorded expired, submission_files says
// where, and a second sync requests no file and stores nothing.
func TestFilesSyncSQLiteFolder(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	sims, srvURL := filesSims(t, 1000, apisim.Options{Seed: 61, Files: apisim.FileOptions{Expired: 0.05, Redirect: 0.02}})
	dir := filepath.Join(t.TempDir(), "files")
	base := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	db := filepath.Join(t.TempDir(), "f.db")
	env := filesEnv(t, sims, srvURL, db, base, "FORMSYNC_PAGE_SIZE=100")

	run(t, bin, env, "sync")
	if got := countRows(t, db); got != 1000 {
		t.Fatalf("%d rows stored, want 1000", got)
	}
	c := checkViewFiles(t, sims, sqliteFiles(t, db), base, readFileObject)
	if c.expired == 0 || c.stored == 0 {
		t.Fatalf("%d files stored, %d expired: want some of each", c.stored, c.expired)
	}
	requests, objects, copies := sims.fileRequests(), storeObjects(t, dir), sqliteCopies(t, db)
	t.Logf("first sync: %d files stored, %d recorded expired, %d file requests, %d files in the store's folder", c.stored, c.expired, requests, len(objects))

	out := run(t, bin, env, "sync")
	if got := sims.fileRequests(); got != requests {
		t.Errorf("the second sync made %d file requests, want none\n%s", got-requests, out)
	}
	if got := storeObjects(t, dir); !maps.Equal(got, objects) {
		t.Errorf("the second sync changed the store's folder: %d files before, %d after", len(objects), len(got))
	}
	if got := sqliteCopies(t, db); !slices.Equal(got, copies) {
		t.Errorf("the second sync rewrote copies: %d before, %d after", len(copies), len(got))
	}
	checkViewFiles(t, sims, sqliteFiles(t, db), base, readFileObject)

	// The second sync looked at every row and found its files final: a
	// copy taken away by hand makes the next sync fetch that file alone,
	// and record it as it was.
	f := sims["three"].Files("three")[4]
	if f.Fault != apisim.FileOK {
		t.Fatalf("file %v: fault %v, want one served whole", f.FileRef, f.Fault)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := conn.Exec(`DELETE FROM `+sink.FilesTable+` WHERE form_id = 'three' AND url = ?`, f.URL); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d copies of %s deleted, want 1", n, f.URL)
	}
	conn.Close()
	run(t, bin, env, "sync")
	if got := sims.fileRequests(); got != requests+1 {
		t.Errorf("the sync after a copy was removed made %d file requests, want 1", got-requests)
	}
	if got := storeObjects(t, dir); !maps.Equal(got, objects) {
		t.Errorf("fetching a stored file again changed the store's folder: %d files before, %d after", len(objects), len(got))
	}
	checkViewFiles(t, sims, sqliteFiles(t, db), base, readFileObject)
}

// TestFilesNewDatabaseSameStore syncs into a second, empty database with
// the files store a first database's syncs filled, submissions months
// old: the second database must end its sync with every file stored or
// recorded expired, as the first did, none left pending.
func TestFilesNewDatabaseSameStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	// The simulator's default dates: from 2026-01-01, months before now.
	sims, srvURL := filesSims(t, 60, apisim.Options{Seed: 91, Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Files: apisim.FileOptions{Expired: 0.05}})
	dir := filepath.Join(t.TempDir(), "files")
	base := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	first, second := filepath.Join(t.TempDir(), "first.db"), filepath.Join(t.TempDir(), "second.db")
	run(t, bin, filesEnv(t, sims, srvURL, first, base), "sync")
	checkViewFiles(t, sims, sqliteFiles(t, first), base, readFileObject)
	run(t, bin, filesEnv(t, sims, srvURL, second, base), "sync")
	checkViewFiles(t, sims, sqliteFiles(t, second), base, readFileObject)
}
