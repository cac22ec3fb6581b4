package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// recorder keeps every request body a BigQuery fake received: the data
// its load jobs loaded and the parameters of its queries.
type recorder struct {
	mu     sync.Mutex
	bodies bytes.Buffer
}

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies.Write(body)
		r.bodies.WriteByte('\n')
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, req)
	})
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.bodies.Bytes())
}

// bqSink opens the BigQuery sink on a fake behind a recorder.
func bqSink(t *testing.T) (enginetest.Sink, *recorder) {
	t.Helper()
	s, rec, _ := bqSinkOnFake(t)
	return s, rec
}

// bqSinkOnFake is bqSink with the fake, for tests that inject faults.
func bqSinkOnFake(t *testing.T) (enginetest.Sink, *recorder, *bqfake.Server) {
	t.Helper()
	fake, err := bqfake.New(bqfake.Options{}) // served below, behind the recorder
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(fake.Handler()))
	t.Cleanup(srv.Close)
	s, err := bigquery.Open(t.Context(), bigquery.Config{
		Project: "test-project", Dataset: "formsync_test", Endpoint: srv.URL,
		PollInterval: time.Millisecond, RetryInitial: time.Millisecond, MaxRetries: 3,
	})
	if err != nil {
		t.Fatalf("opening the BigQuery sink on the fake: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, rec, fake
}

// deletionSinks are the sinks the deletion and privacy scenarios run on:
// the reference, and both real sinks.
var deletionSinks = []struct {
	name string
	open func(t *testing.T) enginetest.Sink
}{
	{"memory", memSink},
	{"sqlite", func(t *testing.T) enginetest.Sink { return openSQLite(t) }},
	{"bigquery", func(t *testing.T) enginetest.Sink { s, _ := bqSink(t); return s }},
}

// split tells the stored rows marked deleted from the others, by key.
func split(t *testing.T, s enginetest.Sink, formID string) (live, deleted map[string]sink.Row) {
	t.Helper()
	rows, err := s.ReadRows(t.Context(), formID)
	if err != nil {
		t.Fatal(err)
	}
	live, deleted = map[string]sink.Row{}, map[string]sink.Row{}
	for _, r := range rows {
		if r.DeletedAt.IsZero() {
			live[r.SubmissionKey] = r
		} else {
			deleted[r.SubmissionKey] = r
		}
	}
	return live, deleted
}

func idKeys(subs []apisim.Submission) []string {
	out := make([]string, 0, len(subs))
	for _, s := range subs {
		out = append(out, strconv.FormatInt(s.ID, 10))
	}
	slices.Sort(out)
	return out
}

func sortedKeys(m map[string]sink.Row) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestReconcile: 300 submissions synced, 20 deleted upstream; a reconcile
// marks exactly those 20, counts them in the state, costs one request per
// page; one served again is cleared by the next reconcile.
func TestReconcile(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			s := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 31, Variant: apisim.Newer, Forms: []string{"contact", "other"}, SubmissionsPerForm: 300}, s)
			h.MustSync(ctx)
			gone := h.Sim.Delete("contact", 20)
			h.Sim.Delete("other", 5) // not reconciled: stays unmarked

			h.Sim.ResetStats()
			rep := h.MustReconcile(ctx, "contact")
			fr := enginetest.FormReport(t, rep, "contact")
			if !fr.Reconciled || fr.Deleted != 20 || fr.Inserted != 0 {
				t.Errorf("reconcile report: reconciled %v, deleted %d, inserted %d; want true, 20, 0", fr.Reconciled, fr.Deleted, fr.Inserted)
			}
			if want := (280 + 9) / 10; h.Sim.Stats().Requests != want {
				t.Errorf("reconcile of 280 submissions at 10 per page made %d requests, want %d", h.Sim.Stats().Requests, want)
			}
			live, deleted := split(t, s, "contact")
			if got, want := sortedKeys(deleted), idKeys(gone); !slices.Equal(got, want) {
				t.Fatalf("rows marked deleted: %v, want %v", got, want)
			}
			if len(live) != 280 {
				t.Errorf("%d rows not marked, want 280", len(live))
			}
			st, err := s.ReadState(ctx, []string{"contact", "other"})
			if err != nil {
				t.Fatal(err)
			}
			if c := st["contact"]; c.Rows != 280 || c.Deleted != 20 || c.LastReconcileAt.IsZero() {
				t.Errorf("state: rows %d, deleted %d, last reconcile %v; want 280, 20, set", c.Rows, c.Deleted, c.LastReconcileAt)
			}
			if o := st["other"]; o.Deleted != 0 || !o.LastReconcileAt.IsZero() {
				t.Errorf("a form not reconciled: deleted %d, last reconcile %v", o.Deleted, o.LastReconcileAt)
			}
			// A sync after the reconcile sees nothing missing: the
			// completeness check counts the rows not deleted.
			if rep := h.MustSync(ctx); enginetest.FormReport(t, rep, "contact").Missing != 0 {
				t.Error("sync after reconcile reports missing rows")
			}

			// One is served again.
			if !h.Sim.Restore("contact", gone[3].ID) {
				t.Fatal("restore")
			}
			rep = h.MustReconcile(ctx, "contact")
			if fr := enginetest.FormReport(t, rep, "contact"); fr.Restored != 1 || fr.Deleted != 0 {
				t.Errorf("second reconcile: restored %d, deleted %d; want 1, 0", fr.Restored, fr.Deleted)
			}
			live, deleted = split(t, s, "contact")
			if _, ok := live[strconv.FormatInt(gone[3].ID, 10)]; !ok || len(deleted) != 19 || len(live) != 281 {
				t.Errorf("after the re-add: %d live, %d deleted; want 281 and 19 with %d live", len(live), len(deleted), gone[3].ID)
			}
			h.CheckTable(ctx, "contact", enginetest.Expected(t, h.Sim, "contact", apisim.Newer), enginetest.DeletedRows(t, h.Sim, "contact", apisim.Newer)...)
		})
	}
}

// TestReconcileWhilePagesMove deletes and adds submissions while the
// reconcile reads: no row still served may be marked deleted, and every
// row deleted before the read began is.
func TestReconcileWhilePagesMove(t *testing.T) {
	t.Parallel()
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			ctx := t.Context()
			s := memSink(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 32, Variant: apisim.Newer, Order: o.o, Forms: []string{"f"}, SubmissionsPerForm: 400, TieEvery: 9}, s)
			h.MustSync(ctx)
			before := h.Sim.Delete("f", 15)
			h.Sim.SetMutation(2, 1, 2) // every 2nd page: one added, two deleted
			h.MustReconcile(ctx)
			h.Sim.SetMutation(0, 0, 0)
			checkMarksAfterMovingReconcile(t, h, s, before)
			// The next reconcile, on still pages, marks exactly the stored
			// rows no longer served.
			h.MustReconcile(ctx)
			served := map[string]bool{}
			for _, k := range idKeys(h.Sim.Submissions("f")) {
				served[k] = true
			}
			live, deleted := split(t, s, "f")
			for k := range live {
				if !served[k] {
					t.Errorf("submission %s is not served but not marked deleted", k)
				}
			}
			for k := range deleted {
				if served[k] {
					t.Errorf("submission %s is served but marked deleted", k)
				}
			}
			if len(live) != len(served) {
				t.Errorf("%d rows not marked, %d submissions served", len(live), len(served))
			}
		})
	}
}

// TestReconcileUnderChurnMarksNoServedRow: under a submission added and
// three deleted for every page served, the walk of a newest-first form
// can skip a submission while the read's count still adds up (the rows
// read and then deleted make up for it). A reconcile marked such a row
// deleted; before the second read, these seeds each marked one or two
// rows that were served throughout.
func TestReconcileUnderChurnMarksNoServedRow(t *testing.T) {
	t.Parallel()
	for _, seed := range []int64{6, 21, 34, 41} {
		t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) {
			ctx := t.Context()
			s := memSink(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: seed, Variant: apisim.Newer, Order: apisim.NewestFirst, Forms: []string{"f"}, SubmissionsPerForm: 1000}, s)
			h.Config.PageSize = 20
			h.MustSync(ctx)
			before := h.Sim.Delete("f", 5)
			h.Sim.SetMutation(1, 1, 3)
			fr := enginetest.FormReport(t, h.MustReconcile(ctx), "f")
			h.Sim.SetMutation(0, 0, 0)
			checkMarksAfterMovingReconcile(t, h, s, before)
			// The second read costs a request per page again.
			if pages := (1000 + 19) / 20; fr.Requests < 2*pages-10 {
				t.Errorf("%d requests: the form was not read twice (%d pages)", fr.Requests, pages)
			}
		})
	}
}

// checkMarksAfterMovingReconcile asserts what a reconcile of form f made
// while its pages moved: no submission still served is marked deleted,
// and every one deleted before it began (before) is.
func checkMarksAfterMovingReconcile(t *testing.T, h *enginetest.Harness, s enginetest.Sink, before []apisim.Submission) {
	t.Helper()
	_, deleted := split(t, s, "f")
	served := map[string]bool{}
	for _, k := range idKeys(h.Sim.Submissions("f")) {
		served[k] = true
	}
	for k := range deleted {
		if served[k] {
			t.Errorf("submission %s is served but was marked deleted", k)
		}
	}
	for _, k := range idKeys(before) {
		if _, ok := deleted[k]; !ok {
			t.Errorf("submission %s was deleted before the reconcile but is not marked", k)
		}
	}
}

// TestReconcileEvery: a sync reconciles a form once its last reconcile is
// older than Config.ReconcileEvery.
func TestReconcileEvery(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memSink(t)
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 33, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 50, Now: func() time.Time { return now }}, s)
	h.Config.ReconcileEvery = 24 * time.Hour
	h.Config.Now = func() time.Time { return now }
	if fr := enginetest.FormReport(t, h.MustSync(ctx), "f"); !fr.Reconciled {
		t.Error("first sync of a form never reconciled did not reconcile")
	}
	h.Sim.Delete("f", 3)
	now = now.Add(time.Hour)
	if fr := enginetest.FormReport(t, h.MustSync(ctx), "f"); fr.Reconciled || fr.Deleted != 0 {
		t.Error("a sync an hour after the reconcile reconciled again")
	}
	now = now.Add(24 * time.Hour)
	if fr := enginetest.FormReport(t, h.MustSync(ctx), "f"); !fr.Reconciled || fr.Deleted != 3 {
		t.Errorf("a sync a day later: reconciled %v, deleted %d; want true, 3", fr.Reconciled, fr.Deleted)
	}
}

// A reconcile a sync is due that cannot be made (the read saw fewer
// submissions than the API counts: here a copy split across a page border,
// which is not counted) still commits the rows read, without marking
// deletions, and says why; an explicit reconcile of it fails.
func TestReconcileDueFromAShortReadStillStoresRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 45, Variant: apisim.Older, Order: apisim.OldestFirst, Forms: []string{"dup"}, SubmissionsPerForm: 60}, memSink(t))
	// Oldest first, 25 a page: the 25th oldest and its copy are the last of
	// page 1 and the first of page 2.
	if _, ok := h.Sim.AddCopy("dup", h.Sim.Submissions("dup")[24].ID); !ok {
		t.Fatal("no submission to copy")
	}
	h.Config.ReconcileEvery = time.Hour
	for run := 1; run <= 3; run++ {
		h.Sim.Add("dup", 2)
		fr := enginetest.FormReport(t, h.Sync(ctx), "dup")
		rows, err := h.Sink.ReadRows(ctx, "dup")
		if err != nil {
			t.Fatal(err)
		}
		// The copy has no row of its own.
		if want := h.Sim.Len("dup") - 1; len(rows) != want {
			t.Errorf("run %d: %d rows stored, want %d", run, len(rows), want)
		}
		if fr.Reconciled || fr.ReconcileErr == nil || fr.Deleted != 0 {
			t.Errorf("run %d: reconciled %v, reconcile error %v, deleted %d; want false, the reason, 0", run, fr.Reconciled, fr.ReconcileErr, fr.Deleted)
		}
	}
	rep, err := h.Engine().Reconcile(ctx, "dup")
	if err != nil {
		t.Fatal(err)
	}
	if fr := enginetest.FormReport(t, rep, "dup"); fr.Err == nil || fr.Reconciled {
		t.Errorf("formsync reconcile of the short read: error %v, reconciled %v; want it refused", fr.Err, fr.Reconciled)
	}
}

// Keys forgotten while no row has them are tombstoned, but counted as
// forgotten submissions only once a read meets them: a key that names no
// submission (a typo) must not make the form look one row fuller than it
// is, which would hide a row the read skipped from the completeness check.
func TestForgottenUnstoredKeysCountOnceServed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memSink(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 30}, s)
	// Before the form's first sync: served, never stored.
	key := strconv.FormatInt(h.Sim.Submissions("f")[20].ID, 10)
	rep, err := h.Engine().Forget(ctx, "f", sink.Match{Keys: []string{"no-such-submission", key}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Unstored) != 2 {
		t.Fatalf("unstored keys %v, want both", rep.Unstored)
	}
	st, err := s.ReadState(ctx, []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	if fg := st["f"].Forgotten; fg.Count != 0 || len(fg.Pending) != 2 {
		t.Fatalf("after the forget: counted %d, pending %d; want 0, 2", fg.Count, len(fg.Pending))
	}
	// The first read skips one submission (whatever the cause): the
	// completeness check must see it, and its re-read store it.
	victim := h.Sim.Submissions("f")[5].ID
	fr := enginetest.FormReport(t, mustSync(t, newEngine(t, h, &dropOnce{Source: client(t, h, nil), id: victim, left: 1})), "f")
	if fr.Err != nil || fr.Missing != 0 || fr.Rescans == 0 {
		t.Errorf("sync: error %v, missing %d, rescans %d; want the skipped row found by a re-read", fr.Err, fr.Missing, fr.Rescans)
	}
	rows, err := s.ReadRows(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if want := h.Sim.Len("f") - 1; len(rows) != want {
		t.Errorf("%d rows stored, want %d (every live submission but the forgotten one)", len(rows), want)
	}
	for _, r := range rows {
		if r.SubmissionKey == key {
			t.Errorf("the forgotten submission %s was stored", key)
		}
	}
	st, err = s.ReadState(ctx, []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	if fg := st["f"].Forgotten; fg.Count != 1 || len(fg.Pending) != 1 || !fg.IsPending("no-such-submission") {
		t.Errorf("after the sync: counted %d, pending %d; want the served one counted and the other pending", fg.Count, len(fg.Pending))
	}
}

// dropOnce hides the submission id from the first left pages that hold
// it: a row the read skipped, whatever the reason.
type dropOnce struct {
	worker.Source
	id   int64
	left int
}

func (d *dropOnce) Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error) {
	p, resp, err := d.Source.Page(ctx, formID, page, limit)
	if err != nil || d.left == 0 {
		return p, resp, err
	}
	for i, s := range p.Submissions {
		if s.ID != nil && *s.ID == d.id {
			d.left--
			p.Submissions = slices.Delete(slices.Clone(p.Submissions), i, i+1)
			p.Count--
			break
		}
	}
	return p, resp, err
}

// mustSync runs one sync on e and fails the test if it could not start.
func mustSync(t *testing.T, e *worker.Engine) *worker.Report {
	t.Helper()
	rep, err := e.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// emailOf reads the email field of a submission.
func fieldOf(t *testing.T, s apisim.Submission, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(s.Fields, &m); err != nil {
		t.Fatal(err)
	}
	v, _ := m[name].(string)
	return v
}

// TestForgetByField: forget --field email=... removes that person's rows;
// a later backfill of the whole form, a sync with lookback and a
// reconcile do not bring them back.
func TestForgetByField(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			s := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 34, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 120}, s)
			h.MustSync(ctx)
			subs := h.Sim.Submissions("contact")
			email := fieldOf(t, subs[17], "email")
			var theirs []string
			for _, sub := range subs {
				if fieldOf(t, sub, "email") == email {
					theirs = append(theirs, strconv.FormatInt(sub.ID, 10))
				}
			}
			slices.Sort(theirs)
			e := h.Engine()
			dry, err := e.Forget(ctx, "contact", sink.Match{Field: "email", Value: email}, true)
			if err != nil {
				t.Fatal(err)
			}
			if live, _ := split(t, s, "contact"); len(dry.Rows) != len(theirs) || len(live) != 120 {
				t.Fatalf("dry run found %d rows (want %d) or changed the table (%d rows)", len(dry.Rows), len(theirs), len(live))
			}
			rep, err := e.Forget(ctx, "contact", sink.Match{Field: "email", Value: email}, false)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Removed != int64(len(theirs)) {
				t.Errorf("forget removed %d rows, want %d", rep.Removed, len(theirs))
			}
			check := func(when string) {
				t.Helper()
				live, deleted := split(t, s, "contact")
				for _, k := range theirs {
					if _, ok := live[k]; ok {
						t.Errorf("%s: forgotten submission %s is stored", when, k)
					}
					if _, ok := deleted[k]; ok {
						t.Errorf("%s: forgotten submission %s is stored (marked deleted)", when, k)
					}
				}
				if len(live)+len(theirs) != len(h.Sim.Submissions("contact")) {
					t.Errorf("%s: %d rows stored, want %d", when, len(live), len(h.Sim.Submissions("contact"))-len(theirs))
				}
			}
			check("after forget")
			before, _ := s.ReadState(ctx, []string{"contact"})
			if rep, err := e.Forget(ctx, "contact", sink.Match{Field: "email", Value: "nobody@nowhere.example"}, false); err != nil || len(rep.Rows) != 0 {
				t.Fatalf("forget of an address no row holds: %v, %d rows", err, len(rep.Rows))
			}
			if after, _ := s.ReadState(ctx, []string{"contact"}); after["contact"].Revision != before["contact"].Revision {
				t.Error("a forget that matched nothing committed")
			}
			if _, err := e.Backfill(ctx, "contact", worker.BackfillOptions{}); err != nil {
				t.Fatal(err)
			}
			check("after a backfill of the whole form")
			h.Config.Lookback = 1000 * time.Hour
			rep2 := h.MustSync(ctx)
			if fr := enginetest.FormReport(t, rep2, "contact"); fr.Missing != 0 {
				t.Errorf("the completeness check counts the forgotten rows as missing: %d", fr.Missing)
			}
			check("after a sync with lookback")
			h.MustReconcile(ctx)
			check("after a reconcile")
			st, _ := s.ReadState(ctx, []string{"contact"})
			if fg := st["contact"].Forgotten; fg == nil || fg.Count != int64(len(theirs)) {
				t.Errorf("tombstones: %+v, want a count of %d", fg, len(theirs))
			} else if raw, _ := json.Marshal(fg); bytes.Contains(raw, []byte(`"`+theirs[0]+`"`)) {
				t.Errorf("the tombstones hold a submission key in clear: %s", raw)
			}
		})
	}
}

// clearValues are every value of the named fields in the simulator's
// submissions of forms.
func clearValues(t *testing.T, sim *apisim.Server, forms []string, names ...string) [][]byte {
	t.Helper()
	seen := map[string]bool{}
	var out [][]byte
	for _, f := range forms {
		for _, sub := range sim.Submissions(f) {
			for _, n := range names {
				if v := fieldOf(t, sub, n); v != "" && !seen[v] {
					seen[v] = true
					out = append(out, []byte(v))
				}
			}
		}
	}
	return out
}

// grepClear fails the test for every clear value found in data.
func grepClear(t *testing.T, where string, data []byte, values [][]byte) {
	t.Helper()
	found := 0
	for _, v := range values {
		if bytes.Contains(data, v) {
			if found++; found <= 3 {
				t.Errorf("%s holds the clear value %q", where, v)
			}
		}
	}
	if found > 3 {
		t.Errorf("%s holds %d clear values in all", where, found)
	}
}

// spoolSpy greps the spool directory when a commit starts: the staged
// rows are all there then.
type spoolSpy struct {
	enginetest.Sink
	t      *testing.T
	dir    string
	values [][]byte
	seen   int
}

func (s *spoolSpy) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	files, _ := filepath.Glob(filepath.Join(s.dir, "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s.seen += len(data)
		grepClear(s.t, "spool file "+filepath.Base(f), data, s.values)
	}
	return s.Sink.Commit(ctx, c)
}

// TestFieldPolicyKeepsClearValuesOut: with email=hash,phone=drop, no clear
// e-mail or phone value reaches the SQLite file, the spool directory, the
// BigQuery fake or the logs; e-mails hash the same across runs and sinks.
func TestFieldPolicyKeepsClearValuesOut(t *testing.T) {
	t.Parallel()
	pol := mustPolicy(t, "email=hash,phone=drop")
	pol = pol.WithKey([]byte("a test key of at least 16 bytes"))
	forms := []string{"contact", "signup"}
	hashes := map[string]map[string]string{} // sink -> submission key -> stored email hash
	for _, sk := range []string{"sqlite", "bigquery"} {
		for _, v := range []apisim.Variant{apisim.Newer, apisim.Live} {
			t.Run(sk+"/"+v.String(), func(t *testing.T) {
				ctx := t.Context()
				var (
					base enginetest.Sink
					rec  *recorder
					db   string
				)
				if sk == "sqlite" {
					db = filepath.Join(t.TempDir(), "p.db")
					sq, err := sqlite.Open(ctx, db)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { sq.Close() })
					base = sq
				} else {
					base, rec = bqSink(t)
				}
				spy := &spoolSpy{Sink: base, t: t}
				h := enginetest.NewHarness(t, apisim.Options{Seed: 35, Variant: v, Forms: forms, SubmissionsPerForm: 150}, spy)
				spy.dir = h.Config.TmpDir
				var logs bytes.Buffer
				h.Config.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				h.Config.FieldPolicy = pol
				spy.values = clearValues(t, h.Sim, forms, "email", "phone")
				if len(spy.values) < 100 {
					t.Fatalf("only %d clear values to look for", len(spy.values))
				}
				h.MustSync(ctx)
				h.Sim.Add("contact", 30)
				h.Sim.Add("signup", 30)
				spy.values = clearValues(t, h.Sim, forms, "email", "phone")
				h.MustSync(ctx)
				h.MustReconcile(ctx)
				if spy.seen == 0 {
					t.Fatal("the spy saw no spool data")
				}
				if db != "" {
					for _, f := range []string{db, db + "-wal"} {
						if data, err := os.ReadFile(f); err == nil {
							grepClear(t, filepath.Base(f), data, spy.values)
						}
					}
				}
				if rec != nil {
					grepClear(t, "the BigQuery fake's requests", rec.bytes(), spy.values)
				}
				grepClear(t, "the logs", logs.Bytes(), spy.values)

				byKey := map[string]string{}
				for _, f := range forms {
					rows, err := base.ReadRows(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range rows {
						var m map[string]any
						json.Unmarshal([]byte(r.Fields), &m)
						if _, ok := m["phone"]; ok {
							t.Fatalf("row %s keeps phone: %s", r.SubmissionKey, r.Fields)
						}
						byKey[f+"/"+r.SubmissionKey], _ = m["email"].(string)
					}
				}
				name := sk + "/" + v.String()
				hashes[name] = byKey
				if len(byKey) != 2*180 {
					t.Errorf("%d rows, want 360", len(byKey))
				}
				st, _ := base.ReadState(ctx, forms)
				if st["contact"].FieldPolicy != pol.Identity() {
					t.Errorf("stored policy identity %q, want %q", st["contact"].FieldPolicy, pol.Identity())
				}
			})
		}
	}
	// The same submissions, the same key: the same hashes, whichever sink.
	for _, v := range []string{"newer", "live"} {
		a, b := hashes["sqlite/"+v], hashes["bigquery/"+v]
		if len(a) == 0 || len(a) != len(b) {
			t.Errorf("%s: %d rows from SQLite and %d from BigQuery to compare", v, len(a), len(b))
			continue
		}
		for k, h := range a {
			if b[k] != h || len(h) != 64 {
				t.Errorf("%s submission %s: e-mail hashed %q in SQLite and %q in BigQuery", v, k, h, b[k])
				break
			}
		}
	}
}

// TestFieldPolicyChangeIsNoticed: a sync refuses a form stored under
// another policy, saying how to rewrite it; a reconcile rewrites it.
func TestFieldPolicyChangeIsNoticed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memSink(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 36, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 40}, s)
	h.MustSync(ctx)
	pol := mustPolicy(t, "email=drop")
	h.Config.FieldPolicy = pol
	rep := h.Sync(ctx)
	var pce *worker.PolicyChangedError
	if err := enginetest.FormReport(t, rep, "contact").Err; !errors.As(err, &pce) || pce.Stored != "" || pce.Now != pol.Identity() {
		t.Fatalf("sync under a new policy: %v, want a PolicyChangedError", err)
	}
	if fr := enginetest.FormReport(t, h.MustReconcile(ctx), "contact"); fr.Updated != 40 {
		t.Errorf("reconcile under the new policy rewrote %d rows, want 40", fr.Updated)
	}
	rows, _ := s.ReadRows(ctx, "contact")
	for _, r := range rows {
		if bytes.Contains([]byte(r.Fields), []byte(`"email"`)) {
			t.Fatalf("row %s keeps email after the rewrite: %s", r.SubmissionKey, r.Fields)
		}
	}
	h.MustSync(ctx)
}

// A form with no submissions, or with one, cannot tell its sort order,
// and needs none: its one page is read whole. A reconcile of it is made,
// and marks what the form no longer serves.
func TestReconcileOfAFormOfOnePageWithoutOrder(t *testing.T) {
	t.Parallel()
	subs := manySubs(2) // ids 2 and 1
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("empty")
	api.SetSubmissions("one", subs[1:]...)
	s := memory.New()
	e := fakeEngine(t, api, s, worker.Config{Forms: []string{"empty", "one"}, PageSize: 10})
	mustSync(t, e)
	api.SetSubmissions("one", subs[:1]...) // id 1 deleted, id 2 added
	rep, err := e.Reconcile(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, fr := range rep.Forms {
		if fr.Err != nil || !fr.Reconciled {
			t.Errorf("form %s: reconciled %v, error %v", fr.FormID, fr.Reconciled, fr.Err)
		}
	}
	if fr := enginetest.FormReport(t, rep, "one"); fr.Deleted != 1 {
		t.Errorf("form one: %d rows marked deleted, want 1", fr.Deleted)
	}
}

// A failed form's report carries when it last synced and was last
// reconciled, as stored, for the metrics of a fresh process.
func TestFailedFormReportsItsStoredLastSuccess(t *testing.T) {
	t.Parallel()
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("f", manySubs(3)...)
	var failing atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		api.ServeHTTP(w, r)
	})
	s := memory.New()
	e := fakeEngine(t, h, s, worker.Config{Forms: []string{"f"}, PageSize: 10})
	if _, err := e.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := s.ReadState(t.Context(), []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	fr := enginetest.FormReport(t, mustSync(t, e), "f")
	if fr.Err == nil || !fr.LastSuccessAt.Equal(st["f"].LastSuccessAt) || !fr.LastReconcileAt.Equal(st["f"].LastReconcileAt) || fr.LastSuccessAt.IsZero() {
		t.Errorf("failed form: error %v, last success %v, last reconcile %v; want an error and %v, %v",
			fr.Err, fr.LastSuccessAt, fr.LastReconcileAt, st["f"].LastSuccessAt, st["f"].LastReconcileAt)
	}
}

// TestReconcileMergedWithAConcurrentSync: a sync stores submissions added
// upstream after a reconcile read the form, and commits before the
// reconcile does. The reconcile, merged with it, leaves those rows live:
// they are served, and a row marked deleted looks gone to every query.
func TestReconcileMergedWithAConcurrentSync(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			base := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 47, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 60}, base)
			h.MustSync(ctx)
			h.Sim.Delete("f", 2)
			syncer := h.Engine()
			h.Sink = &onCommit{Sink: base, n: 1, hook: func(ctx context.Context, _ *sink.Commit) error {
				h.Sim.Add("f", 3)
				rep, err := syncer.Sync(ctx)
				if err == nil {
					err = rep.Err()
				}
				return err
			}}
			rep := h.MustReconcile(ctx)
			if rep.Conflicts == 0 {
				t.Fatal("the reconcile met no concurrent commit")
			}
			live, deleted := split(t, base, "f")
			if want := idKeys(h.Sim.Submissions("f")); !slices.Equal(sortedKeys(live), want) {
				t.Errorf("live rows after the reconcile: %d, want the %d served; marked deleted: %v", len(live), len(want), sortedKeys(deleted))
			}
			if want := idKeys(h.Sim.Deleted("f")); !slices.Equal(sortedKeys(deleted), want) {
				t.Errorf("rows marked deleted %v, want %v", sortedKeys(deleted), want)
			}
		})
	}
}

// purgeSink is a memory sink whose old copies of removed rows cannot be erased
// until blocked is cleared; purges counts the calls.
type purgeSink struct {
	*memory.Sink
	blocked error
	purges  int
}

func (s *purgeSink) Purge(context.Context) error {
	s.purges++
	return s.blocked
}

// TestForgetPurges: a forget has the sink erase its old copies of the
// removed rows, reports why it could not, and a second forget of the same
// person, with nothing left to remove, purges again; a dry run does not,
// nor a forget matching nothing in a form nothing was forgotten from.
func TestForgetPurges(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := &purgeSink{Sink: memory.New(), blocked: errors.New("a reader holds old pages")}
	h := enginetest.NewHarness(t, apisim.Options{Seed: 35, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 30}, s)
	h.MustSync(ctx)
	m := sink.Match{Field: "email", Value: fieldOf(t, h.Sim.Submissions("contact")[3], "email")}
	e := h.Engine()
	if rep, err := e.Forget(ctx, "contact", m, true); err != nil || rep.Purge != nil || s.purges != 0 {
		t.Fatalf("dry run: %v, purge %v, %d purges; want none", err, rep.Purge, s.purges)
	}
	// Nothing was ever forgotten from the form: nothing to erase, and no
	// reader can make a forget that matches nothing fail.
	nobody := sink.Match{Field: "email", Value: "nobody@nowhere.example"}
	if rep, err := e.Forget(ctx, "contact", nobody, false); err != nil || rep.Purge != nil || s.purges != 0 {
		t.Fatalf("forget of nobody in a form never forgotten from: %v, purge %v, %d purges; want none", err, rep.Purge, s.purges)
	}
	rep, err := e.Forget(ctx, "contact", m, false)
	if err != nil || rep.Removed == 0 || !errors.Is(rep.Purge, s.blocked) || s.purges != 1 {
		t.Fatalf("forget: %v, %d removed, purge %v, %d purges", err, rep.Removed, rep.Purge, s.purges)
	}
	s.blocked = nil
	rep, err = e.Forget(ctx, "contact", m, false)
	if err != nil || len(rep.Rows) != 0 || rep.Purge != nil || s.purges != 2 {
		t.Errorf("forget again: %v, %d rows, purge %v, %d purges; want it to purge what the first left", err, len(rep.Rows), rep.Purge, s.purges)
	}
}
