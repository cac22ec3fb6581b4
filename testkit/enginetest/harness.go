// Package enginetest runs the sync engine against the API simulator for
// tests: a Harness wires a simulator on loopback, a real API client and a
// sink, syncs, and checks the table the sink ends up with against the
// simulator's submissions (Expected, CheckTable).
package enginetest

import (
	"context"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/sinktest"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// Sink is what a harness needs of a sink: what the engine uses, and a way
// to read back what was stored.
type Sink interface {
	worker.Sink
	sinktest.RowReader
}

// Harness wires a simulator, a client and a sink together for one test.
type Harness struct {
	T    testing.TB
	Sim  *apisim.Server
	Sink Sink
	URL  string
	// Config is applied to every Sync; tests may change it between runs.
	Config worker.Config
	client *formsapi.Client
}

// NewHarness starts the simulator with opts on loopback and returns a
// harness syncing every simulated form into s.
func NewHarness(t testing.TB, opts apisim.Options, s Sink) *Harness {
	t.Helper()
	if opts.Token == "" {
		opts.Token = "contract-token"
	}
	sim := apisim.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	// The file URLs name this server from the start: Expected before the
	// first sync renders them as the pages will.
	if err := sim.SetFilesOrigin(srv.URL); err != nil {
		t.Fatal(err)
	}
	client, err := formsapi.New(formsapi.Config{
		BaseURL:        srv.URL,
		Token:          formsapi.Secret(opts.Token),
		RateLimit:      10000,
		RequestTimeout: 10 * time.Second,
		MaxWait:        300 * time.Millisecond,
		MaxRetryAfter:  50 * time.Millisecond,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &Harness{
		T: t, Sim: sim, Sink: s, URL: srv.URL, client: client,
		Config: worker.Config{Forms: sim.FormIDs(), PageSize: 10, TmpDir: t.TempDir()},
	}
}

// Sync runs one sync and fails the test if it could not run at all.
func (h *Harness) Sync(ctx context.Context) *worker.Report {
	h.T.Helper()
	e, err := worker.New(h.client, h.Sink, h.Config)
	if err != nil {
		h.T.Fatalf("engine: %v", err)
	}
	rep, err := e.Sync(ctx)
	if err != nil {
		h.T.Fatalf("sync: %v", err)
	}
	return rep
}

// Engine returns an engine on the harness's client, sink and Config.
func (h *Harness) Engine() *worker.Engine {
	h.T.Helper()
	e, err := worker.New(h.client, h.Sink, h.Config)
	if err != nil {
		h.T.Fatalf("engine: %v", err)
	}
	return e
}

// MustReconcile reconciles forms (every configured form when none is
// given) and fails the test if any form failed.
func (h *Harness) MustReconcile(ctx context.Context, forms ...string) *worker.Report {
	h.T.Helper()
	rep, err := h.Engine().Reconcile(ctx, forms...)
	if err != nil {
		h.T.Fatalf("reconcile: %v", err)
	}
	if err := rep.Err(); err != nil {
		h.T.Fatalf("reconcile failed: %v", err)
	}
	return rep
}

// MustSync runs one sync and fails the test if any form failed.
func (h *Harness) MustSync(ctx context.Context) *worker.Report {
	h.T.Helper()
	rep := h.Sync(ctx)
	if err := rep.Err(); err != nil {
		h.T.Fatalf("sync failed: %v", err)
	}
	return rep
}

// Expected is the rows the simulator's live submissions of a form should
// become in the given response form.
func Expected(t testing.TB, sim *apisim.Server, formID string, v apisim.Variant) []sink.Row {
	t.Helper()
	return rowsOf(t, formID, sim.Submissions(formID), v)
}

// DeletedRows is the rows of the form's deleted submissions: loaded before
// they were deleted, they may stay in the table.
func DeletedRows(t testing.TB, sim *apisim.Server, formID string, v apisim.Variant) []sink.Row {
	t.Helper()
	return rowsOf(t, formID, sim.Deleted(formID), v)
}

// rowsOf is what subs become when read in response form v: no id and six
// fractional digits in the older form, the id and three digits in the newer
// and the live form, which sends neither files nor is_spam.
func rowsOf(t testing.TB, formID string, subs []apisim.Submission, v apisim.Variant) []sink.Row {
	t.Helper()
	rows := make([]sink.Row, 0, len(subs))
	for _, s := range subs {
		id, at := &s.ID, s.CreatedAt
		if v == apisim.Older {
			id = nil
		} else {
			at = at.Truncate(time.Millisecond)
		}
		spam, files := s.IsSpam, s.Files
		if v == apisim.Live {
			spam, files = false, nil
		}
		r, err := sink.NewRow(formID, id, at, spam, s.Fields, files)
		if err != nil {
			t.Fatalf("expected row: %v", err)
		}
		rows = append(rows, r)
	}
	return rows
}

// CheckTable asserts that the form's stored rows are exactly want: same
// keys, no duplicates, same content (created_at compared to the
// millisecond, which both response forms carry, and to the microsecond
// for rows expected from the older form, which carries six digits). extra lists keys that may
// also be stored (submissions deleted after they were loaded).
func (h *Harness) CheckTable(ctx context.Context, formID string, want []sink.Row, extra ...sink.Row) {
	h.T.Helper()
	got, err := h.Sink.ReadRows(ctx, formID)
	if err != nil {
		h.T.Fatalf("reading %s: %v", formID, err)
	}
	seen := map[string]sink.Row{}
	for _, r := range got {
		if _, dup := seen[r.SubmissionKey]; dup {
			h.T.Errorf("form %s: key %s stored twice", formID, r.SubmissionKey)
		}
		seen[r.SubmissionKey] = r
	}
	allowed := map[string]bool{}
	for _, r := range extra {
		allowed[r.SubmissionKey], allowed[r.ContentKey] = true, true
	}
	missing := 0
	for _, w := range want {
		older := w.SubmissionID == nil
		g, ok := seen[w.SubmissionKey]
		key := w.SubmissionKey
		if !ok { // loaded from the older response form, keyed by content
			g, ok = seen[w.ContentKey]
			key = w.ContentKey
			w.SubmissionID = nil
		}
		if !ok {
			missing++
			if missing <= 5 {
				h.T.Errorf("form %s: missing %s (created %s)", formID, w.SubmissionKey, w.CreatedAt.Format(time.RFC3339Nano))
			}
			continue
		}
		delete(seen, key)
		// A row expected from the older form (no id) carries its six
		// fractional digits, and must keep them.
		if older && !g.CreatedAt.Equal(w.CreatedAt) {
			h.T.Errorf("form %s key %s: created_at %s, want %s (the older form's six digits)", formID, w.SubmissionKey, g.CreatedAt.Format(time.RFC3339Nano), w.CreatedAt.Format(time.RFC3339Nano))
		}
		if diff := sinktest.RowDiff(w, g, tableColumns...); diff != "" {
			h.T.Errorf("form %s key %s (-want +got):\n%s", formID, w.SubmissionKey, diff)
		}
	}
	if missing > 0 {
		h.T.Errorf("form %s: %d of %d rows missing", formID, missing, len(want))
	}
	var unexpected []string
	for k := range seen {
		if !allowed[k] {
			unexpected = append(unexpected, k)
		}
	}
	sort.Strings(unexpected)
	if len(unexpected) > 0 {
		h.T.Errorf("form %s: %d unexpected rows, e.g. %v", formID, len(unexpected), unexpected[:min(5, len(unexpected))])
	}
}

// tableColumns is what CheckTable compares of a row: what the API's
// submission says, created_at to the millisecond (both response forms carry
// it). The keys matched the row already; raw and deleted_at are the sink's.
var tableColumns = []cmp.Option{
	sinktest.IgnoreColumns("SubmissionKey", "ContentKey", "Raw", "DeletedAt"),
	sinktest.CreatedAtTo(time.Millisecond),
}

// CheckKeys asserts that every submission of want is stored exactly once,
// by id or, when it was last read without one, by content, and nothing
// else is: what a form switching response forms must keep, whatever each
// row's content was when last read.
func (h *Harness) CheckKeys(ctx context.Context, formID string, want []sink.Row) {
	h.T.Helper()
	got, err := h.Sink.ReadRows(ctx, formID)
	if err != nil {
		h.T.Fatalf("reading %s: %v", formID, err)
	}
	byKey := map[string]sink.Row{}
	for _, r := range got {
		if _, dup := byKey[r.SubmissionKey]; dup {
			h.T.Errorf("form %s: key %s stored twice", formID, r.SubmissionKey)
		}
		byKey[r.SubmissionKey] = r
	}
	for _, w := range want {
		_, byID := byKey[w.SubmissionKey]
		_, byContent := byKey[w.ContentKey]
		switch {
		case byID && byContent && w.SubmissionKey != w.ContentKey:
			h.T.Errorf("form %s: submission %s stored twice, by id and by content", formID, w.SubmissionKey)
		case !byID && !byContent:
			h.T.Errorf("form %s: submission %s missing", formID, w.SubmissionKey)
		}
		delete(byKey, w.SubmissionKey)
		delete(byKey, w.ContentKey)
	}
	if len(byKey) > 0 {
		h.T.Errorf("form %s: %d rows that are no submission", formID, len(byKey))
	}
}

// FormReport finds one form in a report.
func FormReport(t testing.TB, rep *worker.Report, formID string) worker.FormReport {
	t.Helper()
	i := slices.IndexFunc(rep.Forms, func(f worker.FormReport) bool { return f.FormID == formID })
	if i < 0 {
		t.Fatalf("no report for form %s", formID)
	}
	return rep.Forms[i]
}

// SlowTestsVar switches on the slow tests: those that sweep many seeds,
// soak a binary for minutes or compile it again with other flags. They add
// minutes to a run; .ci/run sets it, and so can anyone:
// FORMSYNC_SLOW_TESTS=1 go test ./...
const SlowTestsVar = "FORMSYNC_SLOW_TESTS"

// Slow skips tb unless FORMSYNC_SLOW_TESTS=1; cost says what the test costs.
func Slow(tb testing.TB, cost string) {
	tb.Helper()
	if !SlowTests() {
		tb.Skipf("slow test (%s): runs with %s=1, as .ci/run does", cost, SlowTestsVar)
	}
}

// SlowTests reports whether the slow tests run (FORMSYNC_SLOW_TESTS=1): a
// test that sweeps many seeds or moments runs a few of them without it,
// and all of them with it.
func SlowTests() bool { return os.Getenv(SlowTestsVar) == "1" }
