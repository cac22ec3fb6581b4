package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/filestest"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/fieldpolicy"
	"github.com/formsync/formsync/worker/files"
)

// fileHost serves files on loopback and counts the requests each path got.
type fileHost struct {
	srv   *httptest.Server
	mu    sync.Mutex
	hits  map[string]int
	order []string
	auth  []string
	// body of each path; a path absent answers 404 (expired).
	body map[string][]byte
	// redirect, by path, to another URL.
	redirect map[string]string
}

func newFileHost(t *testing.T) *fileHost {
	h := &fileHost{hits: map[string]int{}, body: map[string][]byte{}, redirect: map[string]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.order = append(h.order, r.URL.Path)
		h.auth = append(h.auth, r.Header.Get("Authorization"))
		b, ok := h.body[r.URL.Path]
		to := h.redirect[r.URL.Path]
		h.mu.Unlock()
		switch {
		case to != "":
			http.Redirect(w, r, to, http.StatusFound)
		case !ok:
			http.NotFound(w, r)
		default:
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(b)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fileHost) url(path string) string { return h.srv.URL + path }

func (h *fileHost) requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.order)
}

// withFiles is subs with files: each submission i names the files
// names(i) gives, as an array of {name, url, size, type}.
func withFiles(subs []apisim.Submission, h *fileHost, names func(i int) []string) []apisim.Submission {
	for i := range subs {
		var arr []map[string]any
		for _, n := range names(i) {
			arr = append(arr, map[string]any{"name": n, "url": h.url("/f/" + n), "size": len(h.body["/f/"+n]), "type": "application/pdf"})
		}
		subs[i].Files, _ = json.Marshal(arr)
	}
	return subs
}

// filesConfig keeps files in a folder, fetched over a test network that
// reaches loopback alone.
func filesConfig(t *testing.T, maxBytes int64, token string, apiOrigin string) (*worker.Files, *files.Store, *filestest.Dialer) {
	t.Helper()
	store, err := files.OpenStore(t.Context(), "file://"+t.TempDir(), files.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	dialer := &filestest.Dialer{T: t, Loopback: true}
	f, err := files.NewFetcher(files.FetcherConfig{
		AddressPolicy: files.AddressPolicy{AllowLoopback: true},
		MaxBytes:      maxBytes, Token: token, APIOrigin: apiOrigin,
		Resolver: &filestest.Resolver{T: t, Hosts: map[string][]string{"meta.test": {"169.254.169.254"}, "ten.test": {"10.0.0.1"}, "mapped.test": {"::ffff:127.0.0.1"}}},
		Dialer:   dialer, Attempts: 1,
		NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	return &worker.Files{Store: store, Fetcher: f, Scope: "memory:test"}, store, dialer
}

func fileRows(t *testing.T, s enginetest.Sink, form string) []sink.FileRow {
	t.Helper()
	k, err := sink.Optional{Sink: s}.FileKeeper()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := k.FileRows(t.Context(), []string{form}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFilesKeptOnce: a sync keeps every file the stored rows name in the
// store, exactly as served, and records each once; a second sync fetches
// nothing; a file the service no longer has is recorded as expired once,
// one over the cap as too large, and one that redirects to the metadata
// address, or is named by a host resolving to a private, link-local or
// mapped loopback address, as refused, with no dial; the rows are all
// committed whatever became of their files.
func TestFilesKeptOnce(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			host := newFileHost(t)
			for i := range 12 {
				host.body[fmt.Sprintf("/f/doc-%d.pdf", i)] = []byte(strings.Repeat(fmt.Sprintf("bytes of %d;", i), 40+i))
			}
			host.body["/f/big.pdf"] = make([]byte, 4096)
			host.body["/f/shared.pdf"] = []byte("the same bytes in two submissions")
			host.redirect["/f/moved.pdf"] = "http://meta.test/computeMetadata/v1/"
			dst := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, dst)
			fk, store, dialer := filesConfig(t, 2048, "", "")
			h.Config.Files = fk
			base := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
			subs := withFiles(shaped(1, 14, base, "name"), host, func(i int) []string {
				switch {
				case i < 12:
					return []string{fmt.Sprintf("doc-%d.pdf", i), "shared.pdf"}
				case i == 12:
					return []string{"gone.pdf", "big.pdf", "moved.pdf"}
				}
				return nil
			})
			// Hosts that resolve to addresses never fetched from.
			var extra []map[string]any
			for _, u := range []string{"https://ten.test/a.pdf", "https://meta.test/b.pdf", "ftp://ten.test/c.pdf"} {
				extra = append(extra, map[string]any{"name": "x", "url": u})
			}
			subs[13].Files, _ = json.Marshal(extra)
			h.Sim.SetSubmissions("f", subs...)
			rep := h.MustSync(ctx)
			fr := enginetest.FormReport(t, rep, "f")
			if fr.Inserted != 14 {
				t.Fatalf("inserted %d rows, want 14", fr.Inserted)
			}
			want := map[string]int64{sink.FileExpired: 1, sink.FileTooLarge: 1, sink.FileRefused: 4}
			if fr.Files.Stored != 24 || fr.Files.Pending != 0 || fmt.Sprint(fr.Files.NotStored) != fmt.Sprint(want) {
				t.Errorf("files: %+v; want 24 stored, none pending, not stored %v", fr.Files, want)
			}
			// Two fetches of the shared file at once may both find it
			// missing: the object is the same.
			if fr.Files.New < 13 || fr.Files.New > 14 {
				t.Errorf("%d new objects, want 13 (12 documents, one shared), or 14 with the shared one fetched twice at once", fr.Files.New)
			}
			for _, addr := range dialer.Calls() {
				if !strings.HasPrefix(addr, "127.0.0.1:") {
					t.Errorf("dialled %s", addr)
				}
			}
			rows := fileRows(t, dst, "f")
			if len(rows) != 14 {
				t.Fatalf("%d file rows, want 14", len(rows))
			}
			for _, r := range rows {
				for _, c := range r.Copies {
					path := strings.TrimPrefix(c.URL, host.srv.URL)
					if !c.Stored() {
						continue
					}
					if want := sha(host.body[path]); c.SHA256 != want {
						t.Errorf("%s: sha256 %s, want %s", c.URL, c.SHA256, want)
					}
					rc, err := store.Open(ctx, c.SHA256)
					if err != nil {
						t.Fatalf("%s: %v", c.URL, err)
					}
					got, _ := io.ReadAll(rc)
					rc.Close()
					if sha(got) != c.SHA256 || c.Size != int64(len(got)) || c.ObjectURI != store.URI(c.SHA256) {
						t.Errorf("%s: object %s holds %d bytes of digest %s", c.URL, c.ObjectURI, len(got), sha(got))
					}
				}
			}
			last := rows[12].Copies
			reasons := map[string]string{}
			for _, c := range last {
				reasons[strings.TrimPrefix(c.URL, host.srv.URL)] = c.Reason
			}
			if reasons["/f/gone.pdf"] != sink.FileExpired || reasons["/f/big.pdf"] != sink.FileTooLarge || reasons["/f/moved.pdf"] != sink.FileRefused {
				t.Errorf("reasons %v", reasons)
			}
			before := host.requests()
			rep = h.MustSync(ctx)
			if fr := enginetest.FormReport(t, rep, "f"); fr.Files.Any() {
				t.Errorf("second sync's files: %+v, want nothing", fr.Files)
			}
			if n := host.requests() - before; n != 0 {
				t.Errorf("second sync made %d file requests, want 0", n)
			}
			st, err := worker.FileStatus(ctx, mustKeeper(t, dst), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c := st["f"]; c.Stored != 24 || c.Pending != 0 || c.Gone() != 1 {
				t.Errorf("status %+v", c)
			}
		})
	}
}

func mustKeeper(t *testing.T, s enginetest.Sink) sink.FileKeeper {
	t.Helper()
	k, err := sink.Optional{Sink: s}.FileKeeper()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFilesCaughtUpOldestFirst: rows stored before a files store was set
// have their files fetched by the next sync, oldest row first; a file
// whose input the field policy drops is never fetched.
func TestFilesCaughtUpOldestFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := newFileHost(t)
	dst := openSQLite(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Order: apisim.NewestFirst, Forms: []string{"f"}}, dst)
	base := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	subs := shaped(1, 30, base, "name")
	for i := range subs {
		cv, photo := fmt.Sprintf("cv-%02d.pdf", i), fmt.Sprintf("photo-%02d.jpg", i)
		host.body["/f/"+cv], host.body["/f/"+photo] = []byte("cv "+cv), []byte("photo "+photo)
		subs[i].Files, _ = json.Marshal(map[string]any{
			"cv":    map[string]any{"name": cv, "url": host.url("/f/" + cv)},
			"photo": []any{map[string]any{"name": photo, "url": host.url("/f/" + photo)}},
		})
	}
	policy, err := fieldpolicy.Parse("photo=drop")
	if err != nil {
		t.Fatal(err)
	}
	h.Config.FieldPolicy = policy
	h.Sim.SetSubmissions("f", subs...)
	h.MustSync(ctx)
	if host.requests() != 0 {
		t.Fatalf("%d file requests without a files store", host.requests())
	}
	fk, _, _ := filesConfig(t, 0, "", "")
	fk.Workers = 1
	h.Config.Files = fk
	rep := h.MustSync(ctx)
	fr := enginetest.FormReport(t, rep, "f")
	if fr.Files.Stored != 30 || fr.Files.NotStored[sink.FileDropped] != 30 {
		t.Errorf("files %+v, want 30 stored and 30 dropped", fr.Files)
	}
	host.mu.Lock()
	order := slices.Clone(host.order)
	host.mu.Unlock()
	if !slices.IsSorted(order) || len(order) != 30 || strings.Contains(strings.Join(order, ","), "photo") {
		t.Errorf("fetched %v: want the 30 CVs, oldest first, and no photo", order)
	}
}

// TestFilesRefusedWithoutDial: without the loopback allowance, a file on
// loopback is refused and its listener sees no connection; hosts that
// resolve to 10.0.0.1, 169.254.169.254 or ::ffff:127.0.0.1, and a
// redirect to one, are refused with no dial; the reason is recorded and
// the rows are committed all the same.
func TestFilesRefusedWithoutDial(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := newFileHost(t)
	host.body["/f/local.pdf"] = []byte("on loopback")
	dst := openSQLite(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, dst)
	store, err := files.OpenStore(ctx, "mem://", files.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := &filestest.Dialer{T: t, Fake: true}
	resolver := &filestest.Resolver{T: t, Hosts: map[string][]string{
		"ten.test": {"10.0.0.1"}, "meta.test": {"169.254.169.254"}, "mapped.test": {"::ffff:127.0.0.1"},
		"hop.test": {"203.0.113.9"},
	}}
	f, err := files.NewFetcher(files.FetcherConfig{Resolver: resolver, Dialer: dialer, Attempts: 1,
		NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }})
	if err != nil {
		t.Fatal(err)
	}
	h.Config.Files = &worker.Files{Store: store, Fetcher: f}
	urls := []string{host.url("/f/local.pdf"), "https://ten.test/a", "https://meta.test/b", "https://mapped.test/c", "https://[::ffff:127.0.0.1]/d"}
	subs := shaped(1, len(urls), time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), "name")
	for i, u := range urls {
		subs[i].Files, _ = json.Marshal([]any{map[string]any{"url": u}})
	}
	h.Sim.SetSubmissions("f", subs...)
	rep := h.MustSync(ctx)
	fr := enginetest.FormReport(t, rep, "f")
	if fr.Inserted != int64(len(urls)) || fr.Files.NotStored[sink.FileRefused] != int64(len(urls)) {
		t.Errorf("inserted %d rows, files %+v; want %d rows, all files refused", fr.Inserted, fr.Files, len(urls))
	}
	if calls := dialer.Calls(); len(calls) != 0 {
		t.Errorf("dialled %v", calls)
	}
	if n := host.requests(); n != 0 {
		t.Errorf("the loopback listener saw %d requests", n)
	}
	for _, r := range fileRows(t, dst, "f") {
		if len(r.Copies) != 1 || r.Copies[0].Reason != sink.FileRefused {
			t.Errorf("row %s: copies %+v, want one refused", r.SubmissionKey, r.Copies)
		}
	}
}

// TestFilesTokenStaysWithTheAPI: the API token goes to a file URL on the
// API's own origin, never to another origin, a redirect's included.
func TestFilesTokenStaysWithTheAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	api := newFileHost(t)   // the API's origin serves some files
	other := newFileHost(t) // another origin serves the others
	api.body["/f/on-api.pdf"] = []byte("on the API's origin")
	other.body["/f/elsewhere.pdf"] = []byte("elsewhere")
	api.redirect["/f/hop.pdf"] = other.url("/f/elsewhere.pdf")
	dst := memSink(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, dst)
	fk, _, _ := filesConfig(t, 0, "secret-token", api.srv.URL)
	h.Config.Files = fk
	subs := shaped(1, 1, time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), "name")
	subs[0].Files, _ = json.Marshal([]any{
		map[string]any{"url": api.url("/f/on-api.pdf")},
		map[string]any{"url": other.url("/f/elsewhere.pdf")},
		map[string]any{"url": api.url("/f/hop.pdf")},
	})
	h.Sim.SetSubmissions("f", subs...)
	h.MustSync(ctx)
	api.mu.Lock()
	defer api.mu.Unlock()
	other.mu.Lock()
	defer other.mu.Unlock()
	for _, a := range api.auth {
		if a != "Bearer secret-token" {
			t.Errorf("a request to the API's origin carried %q", a)
		}
	}
	for _, a := range other.auth {
		if a != "" {
			t.Errorf("a request to another origin carried %q", a)
		}
	}
	if len(other.auth) != 2 {
		t.Errorf("%d requests to the other origin, want 2", len(other.auth))
	}
}

// TestForgetDeletesObjects: forget removes the objects the forgotten
// submission named, and keeps one another stored submission names, in
// every sink, from a folder and from Cloud Storage (its fake).
func TestForgetDeletesObjects(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		for _, kind := range []string{"file", "gcs"} {
			t.Run(sk.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				testForgetDeletesObjects(t, sk.open(t), kind)
			})
		}
	}
}

func testForgetDeletesObjects(t *testing.T, dst enginetest.Sink, kind string) {
	ctx := t.Context()
	host := newFileHost(t)
	host.body["/f/own.pdf"] = []byte("only the first submission's")
	host.body["/f/shared.pdf"] = []byte("both submissions'")
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, dst)
	fk, store, _ := filesConfig(t, 0, "", "")
	if kind == "gcs" {
		gcs, err := files.OpenStore(ctx, "gs://bucket/formsync", files.StoreOptions{GCS: filestest.GCS(t, "bucket")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gcs.Close() })
		fk.Store, store = gcs, gcs
	}
	h.Config.Files = fk
	subs := withFiles(shaped(1, 2, time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), "name"), host, func(i int) []string {
		if i == 0 {
			return []string{"own.pdf", "shared.pdf"}
		}
		return []string{"shared.pdf"}
	})
	h.Sim.SetSubmissions("f", subs...)
	h.MustSync(ctx)
	rep, err := h.Engine().Forget(ctx, "f", sink.Match{Keys: []string{"1"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	own, shared := sha(host.body["/f/own.pdf"]), sha(host.body["/f/shared.pdf"])
	if !slices.Equal(rep.Deleted, []string{own}) || !slices.Equal(rep.Kept, []string{shared}) || rep.ObjectsErr != nil {
		t.Errorf("deleted %v, kept %v (%v); want %s deleted, %s kept", rep.Deleted, rep.Kept, rep.ObjectsErr, own, shared)
	}
	if ok, _ := store.Exists(ctx, own); ok {
		t.Error("the forgotten submission's own object is still stored")
	}
	if ok, _ := store.Exists(ctx, shared); !ok {
		t.Error("the object another submission names was deleted")
	}
	rows := fileRows(t, dst, "f")
	if len(rows) != 1 || rows[0].SubmissionKey != "2" || len(rows[0].Copies) != 1 || rows[0].Copies[0].SHA256 != shared {
		t.Errorf("file rows after forget: %+v", rows)
	}
}

// sinceRecorder is a sink that records the since of each FileRows.
type sinceRecorder struct {
	enginetest.Sink
	mu     sync.Mutex
	asked  map[string][]time.Time
	keeper sink.FileKeeper
}

func (s *sinceRecorder) FileRows(ctx context.Context, formIDs []string, since time.Time) ([]sink.FileRow, error) {
	s.mu.Lock()
	for _, f := range formIDs {
		s.asked[f] = append(s.asked[f], since)
	}
	s.mu.Unlock()
	return s.keeper.FileRows(ctx, formIDs, since)
}

func (s *sinceRecorder) RecordFiles(ctx context.Context, copies []sink.FileCopy) error {
	return s.keeper.RecordFiles(ctx, copies)
}

func (s *sinceRecorder) NamedDigests(ctx context.Context, digests []string) (map[string]bool, error) {
	return s.keeper.NamedDigests(ctx, digests)
}

// TestFilesCatchUpOnceThenRecentRows: a form's first files phase in a
// store looks at every stored row, its files years old included, and
// marks the form caught up in the store; later ones look at the rows of
// the last worker.FilesWindow only. A new store catches up again.
func TestFilesCatchUpOnceThenRecentRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := newFileHost(t)
	host.body["/f/old.pdf"], host.body["/f/new.pdf"] = []byte("old"), []byte("new")
	mem := memSink(t)
	dst := &sinceRecorder{Sink: mem, asked: map[string][]time.Time{}, keeper: mustKeeper(t, mem)}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, dst)
	h.Config.Now = func() time.Time { return now }
	subs := shaped(1, 2, now.AddDate(-2, 0, 0), "name")
	subs[1].CreatedAt = now.Add(-time.Hour)
	subs[0].Files, _ = json.Marshal([]any{map[string]any{"url": host.url("/f/old.pdf")}})
	subs[1].Files, _ = json.Marshal([]any{map[string]any{"url": host.url("/f/new.pdf")}})
	h.Sim.SetSubmissions("f", subs...)
	fk, store, _ := filesConfig(t, 0, "", "")
	h.Config.Files = fk
	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "f"); fr.Files.Stored != 2 {
		t.Errorf("first sync kept %d files, want both, the two-year-old one too", fr.Files.Stored)
	}
	if caught, err := store.CaughtUp(ctx, "memory:test"); err != nil || !caught["f"].Equal(now) {
		t.Errorf("caught up %v, %v; want f at %s", caught, err, now)
	}
	h.MustSync(ctx)
	want := []time.Time{{}, now.Add(-worker.FilesWindow)}
	if got := dst.asked["f"]; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("FileRows since %v, want %v", got, want)
	}
	// Another database keeping its files in the same store: its rows
	// are looked at all again.
	other := *fk
	other.Scope = "memory:other"
	h.Config.Files = &other
	h.MustSync(ctx)
	if got := dst.asked["f"]; len(got) != 3 || !got[2].IsZero() {
		t.Errorf("FileRows since %v, want every row for another scope", got)
	}
	dst.asked["f"] = dst.asked["f"][:2]
	// Another store: every row is looked at again. The copies recorded
	// name the objects of the first store, where they are: nothing is
	// fetched (moving a store's objects is the user's; docs/files.md).
	fk2, _, _ := filesConfig(t, 0, "", "")
	h.Config.Files = fk2
	before := host.requests()
	h.MustSync(ctx)
	if got := dst.asked["f"]; len(got) != 3 || !got[2].IsZero() {
		t.Errorf("FileRows since %v, want every row on the new store", got)
	}
	if n := host.requests() - before; n != 0 {
		t.Errorf("%d file requests, want none", n)
	}
}

// TestForgottenFilesNeverFetched: a submission forgotten before it was
// ever stored has its files fetched neither while the form is read nor
// after the commit.
func TestForgottenFilesNeverFetched(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := newFileHost(t)
	host.body["/f/secret.pdf"], host.body["/f/kept.pdf"] = []byte("a forgotten person's"), []byte("another's")
	dst := openSQLite(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, dst)
	fk, _, _ := filesConfig(t, 0, "", "")
	h.Config.Files = fk
	if _, err := h.Engine().Forget(ctx, "f", sink.Match{Keys: []string{"1"}}, false); err != nil {
		t.Fatal(err)
	}
	subs := shaped(1, 2, time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), "name")
	subs[0].Files, _ = json.Marshal([]any{map[string]any{"url": host.url("/f/secret.pdf")}})
	subs[1].Files, _ = json.Marshal([]any{map[string]any{"url": host.url("/f/kept.pdf")}})
	h.Sim.SetSubmissions("f", subs...)
	h.MustSync(ctx)
	host.mu.Lock()
	defer host.mu.Unlock()
	if !slices.Equal(host.order, []string{"/f/kept.pdf"}) {
		t.Errorf("fetched %v, want the kept submission's file alone", host.order)
	}
}

// failingRecords is a sink whose RecordFiles fails.
type failingRecords struct {
	*sinceRecorder
}

func (failingRecords) RecordFiles(context.Context, []sink.FileCopy) error {
	return errors.New("the copies table is unavailable")
}

// TestFilesNotRecordedRowsStay: when the copies cannot be recorded, the
// run says so (Report.FilesErr), its rows are committed all the same, and
// the next run records the files.
func TestFilesNotRecordedRowsStay(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := newFileHost(t)
	host.body["/f/a.pdf"] = []byte("a")
	mem := memSink(t)
	rec := &sinceRecorder{Sink: mem, asked: map[string][]time.Time{}, keeper: mustKeeper(t, mem)}
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, failingRecords{rec})
	fk, _, _ := filesConfig(t, 0, "", "")
	h.Config.Files = fk
	subs := shaped(1, 3, time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), "name")
	subs[1].Files, _ = json.Marshal([]any{map[string]any{"url": host.url("/f/a.pdf")}})
	h.Sim.SetSubmissions("f", subs...)
	rep := h.Sync(ctx)
	if rep.FilesErr == nil || !strings.Contains(rep.FilesErr.Error(), "the copies table is unavailable") || rep.Err() != nil {
		t.Errorf("files error %v, run error %v; want the files' alone", rep.FilesErr, rep.Err())
	}
	if fr := enginetest.FormReport(t, rep, "f"); fr.Inserted != 3 || fr.Files.Pending != 1 {
		t.Errorf("inserted %d, files %+v; want 3 rows, the file pending", fr.Inserted, fr.Files)
	}
	h2 := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}}, mem)
	h2.Sim.SetSubmissions("f", subs...)
	h2.Config.Files = fk
	if fr := enginetest.FormReport(t, h2.MustSync(ctx), "f"); fr.Files.Stored != 1 || fr.Files.New != 0 {
		t.Errorf("next run's files %+v, want the file recorded, its object found stored", fr.Files)
	}
}

// TestFilesOfEveryFaultFromTheSimulator: the simulator serving its own
// files with every fault it has (expired as 404 and 410, slow, larger
// than the cap, redirected, shorter and longer than declared), a sync
// records each as it should: the bytes served, by their SHA-256, for
// the files it could fetch (those of the wrong size too: recorded, not
// trusted), expired and too large for the others.
func TestFilesOfEveryFaultFromTheSimulator(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dst := openSQLite(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 12, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 120,
		Files: apisim.FileOptions{Every: 1, PerSubmission: 2, Size: 4096, Expired: 0.15, Slow: 0.1, SlowFor: 50 * time.Millisecond,
			TooLarge: 0.1, LargeSize: 64 << 10, Redirect: 0.1, SizeMismatch: 0.15}}, dst)
	fk, _, _ := filesConfig(t, 32<<10, "", "")
	h.Config.Files = fk
	h.MustSync(ctx)
	copies := map[string]sink.FileCopy{}
	for _, r := range fileRows(t, dst, "f") {
		for _, c := range r.Copies {
			copies[c.URL] = c
		}
	}
	faults := map[apisim.FileFault]int{}
	for _, f := range h.Sim.Files("f") {
		faults[f.Fault]++
		c, ok := copies[f.URL]
		if !ok {
			t.Errorf("%s (%v): no copy recorded", f.URL, f.Fault)
			continue
		}
		switch f.Fault {
		case apisim.FileNotFound, apisim.FileGone:
			if c.Reason != sink.FileExpired {
				t.Errorf("%s (%v): %+v, want expired", f.URL, f.Fault, c)
			}
		case apisim.FileTooLarge:
			if c.Reason != sink.FileTooLarge {
				t.Errorf("%s (%v): %+v, want too_large", f.URL, f.Fault, c)
			}
		default:
			if !c.Stored() || c.SHA256 != f.SHA256 || c.Size != f.Served {
				t.Errorf("%s (%v): %+v, want stored with sha256 %s, %d bytes", f.URL, f.Fault, c, f.SHA256, f.Served)
			}
		}
	}
	for _, fault := range []apisim.FileFault{apisim.FileOK, apisim.FileNotFound, apisim.FileGone, apisim.FileSlow,
		apisim.FileTooLarge, apisim.FileRedirect, apisim.FileShort, apisim.FileLong} {
		if faults[fault] == 0 {
			t.Errorf("no file served %v: the test covers less than it says", fault)
		}
	}
}
