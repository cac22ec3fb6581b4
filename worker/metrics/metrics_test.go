package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newMetrics() *Metrics {
	return New(WithClock(func() time.Time { return now }))
}

// histogram returns the sample count and sum of an unlabelled histogram.
func histogram(t *testing.T, reg prometheus.Gatherer, name string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0, 0
}

func TestObserveRequest(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	events := []formsapi.Event{
		{FormID: "f1", Page: 1, Attempt: 1, Status: 200, Duration: 100 * time.Millisecond},
		{FormID: "f1", Page: 2, Attempt: 1, Status: 429, Duration: 50 * time.Millisecond,
			Err: fmt.Errorf("page 2: %w", formsapi.ErrRateLimited), Wait: 2 * time.Second, RetryAfter: 2 * time.Second},
		{FormID: "f1", Page: 2, Attempt: 2, Status: 0, Duration: 250 * time.Millisecond,
			Err: formsapi.ErrTransport, Wait: 1500 * time.Millisecond},
		{FormID: "f2", Page: 1, Attempt: 1, Status: 500, Duration: 100 * time.Millisecond, Err: formsapi.ErrServer},
		{FormID: "f1", Page: 2, Attempt: 3, Status: 200, Duration: 100 * time.Millisecond},
	}
	for _, ev := range events {
		m.ObserveRequest(ev)
	}

	want := `
# HELP formsync_api_backoff_seconds_total Seconds spent waiting before retrying Forms API requests.
# TYPE formsync_api_backoff_seconds_total counter
formsync_api_backoff_seconds_total 3.5
# HELP formsync_api_rate_limited_total Forms API request attempts answered 429 Too Many Requests.
# TYPE formsync_api_rate_limited_total counter
formsync_api_rate_limited_total 1
# HELP formsync_api_requests_total Forms API request attempts, retries included, by HTTP status ("error" when no response arrived).
# TYPE formsync_api_requests_total counter
formsync_api_requests_total{status="200"} 2
formsync_api_requests_total{status="429"} 1
formsync_api_requests_total{status="500"} 1
formsync_api_requests_total{status="error"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"formsync_api_requests_total", "formsync_api_rate_limited_total", "formsync_api_backoff_seconds_total"); err != nil {
		t.Error(err)
	}
	count, sum := histogram(t, m.Registry(), "formsync_api_request_duration_seconds")
	if count != 5 || !near(sum, 0.6) {
		t.Errorf("request duration count %d sum %g, want 5 and 0.6", count, sum)
	}
}

func TestObserveRun(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	rep := &worker.Report{
		Duration: 90 * time.Second,
		Forms: []worker.FormReport{
			{FormID: "a", Inserted: 3, Updated: 1, Pages: 2, Reconciled: true, Deleted: 2, Restored: 1,
				Watermark: state.Watermark{CreatedAt: now.Add(-10 * time.Minute)}},
			{FormID: "b", Pages: 1, Err: fmt.Errorf("form b: %w", formsapi.ErrAccessDisabled)},
			{FormID: "c"}, // an empty form: no watermark yet, so no lag
		},
	}
	m.ObserveRun(rep, 4*time.Second)

	want := `
# HELP formsync_runs_total Sync runs by result: failure when the commit or any form failed.
# TYPE formsync_runs_total counter
formsync_runs_total{result="failure"} 1
formsync_runs_total{result="success"} 0
# HELP formsync_rows_total Submission rows committed, by form and kind (inserted: new; updated: changed or re-keyed; deleted_upstream: marked deleted by a reconcile; restored: marked rows served again).
# TYPE formsync_rows_total counter
formsync_rows_total{form="a",kind="deleted_upstream"} 2
formsync_rows_total{form="a",kind="inserted"} 3
formsync_rows_total{form="a",kind="restored"} 1
formsync_rows_total{form="a",kind="updated"} 1
formsync_rows_total{form="c",kind="inserted"} 0
formsync_rows_total{form="c",kind="updated"} 0
# HELP formsync_pages_total Forms API pages read, by form.
# TYPE formsync_pages_total counter
formsync_pages_total{form="a"} 2
formsync_pages_total{form="b"} 1
formsync_pages_total{form="c"} 0
# HELP formsync_form_failures_total Sync runs in which a form failed (its watermark did not move), by form.
# TYPE formsync_form_failures_total counter
formsync_form_failures_total{form="b"} 1
# HELP formsync_last_success_timestamp_seconds Unix time of the form's last successful sync.
# TYPE formsync_last_success_timestamp_seconds gauge
formsync_last_success_timestamp_seconds{form="a"} 1.7723664e+09
formsync_last_success_timestamp_seconds{form="c"} 1.7723664e+09
# HELP formsync_last_reconcile_timestamp_seconds Unix time of the form's last reconcile (every page read, rows deleted upstream marked).
# TYPE formsync_last_reconcile_timestamp_seconds gauge
formsync_last_reconcile_timestamp_seconds{form="a"} 1.7723664e+09
# HELP formsync_watermark_lag_seconds Seconds between the end of the form's last sync and the created_at of the newest submission loaded.
# TYPE formsync_watermark_lag_seconds gauge
formsync_watermark_lag_seconds{form="a"} 600
`
	names := []string{
		"formsync_runs_total", "formsync_rows_total", "formsync_pages_total", "formsync_form_failures_total",
		"formsync_last_success_timestamp_seconds", "formsync_last_reconcile_timestamp_seconds", "formsync_watermark_lag_seconds",
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if count, sum := histogram(t, m.Registry(), "formsync_commit_duration_seconds"); count != 1 || sum != 4 {
		t.Errorf("commit duration count %d sum %g, want 1 and 4", count, sum)
	}
	if count, sum := histogram(t, m.Registry(), "formsync_run_duration_seconds"); count != 1 || sum != 90 {
		t.Errorf("run duration count %d sum %g, want 1 and 90", count, sum)
	}

	// A failed commit fails every form: no rows (its report counts only
	// rows committed in parts, none here), no new success stamp.
	m.ObserveRun(&worker.Report{
		Duration:  time.Second,
		CommitErr: errors.New("committing 1 forms: boom"),
		Forms:     []worker.FormReport{{FormID: "a", Pages: 1}},
	}, time.Second)
	// A run that failed before it could report.
	m.ObserveRun(nil, 0)
	// A clean run.
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{{FormID: "c", Inserted: 2}}}, time.Second)

	for _, c := range []struct {
		what string
		c    prometheus.Collector
		want float64
	}{
		{"failed runs", m.runs.WithLabelValues("failure"), 3},
		{"successful runs", m.runs.WithLabelValues("success"), 1},
		{"a inserted", m.rows.WithLabelValues("a", "inserted"), 3},
		{"c inserted", m.rows.WithLabelValues("c", "inserted"), 2},
		{"a failures", m.formFailures.WithLabelValues("a"), 1},
		{"a pages", m.pages.WithLabelValues("a"), 3},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %g, want %g", c.what, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.Registry(), "formsync_watermark_lag_seconds"); n != 1 {
		t.Errorf("watermark lag series = %d, want 1 (forms without a watermark have none)", n)
	}
	if count, _ := histogram(t, m.Registry(), "formsync_commit_duration_seconds"); count != 3 {
		t.Errorf("commit durations observed = %d, want 3 (zero is not observed)", count)
	}
}

// TestFailedFormKeepsItsStoredLastSuccess: a fresh process (a one-shot
// command pushing to the Pushgateway, a restarted pod) whose run fails a
// form shows the form's last success, reconcile and watermark as stored
// (and a form synced without a reconcile its last reconcile as stored),
// so that an alert on their age fires, instead of no series at all.
func TestFailedFormKeepsItsStoredLastSuccess(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{
		{FormID: "a", Err: errors.New("form a: HTTP 500"), LastSuccessAt: now.Add(-3 * time.Hour),
			LastReconcileAt: now.Add(-48 * time.Hour), Watermark: state.Watermark{CreatedAt: now.Add(-4 * time.Hour)}},
		{FormID: "never", Err: errors.New("form never: HTTP 404")},
		// Synced, not reconciled this run: its last reconcile as stored.
		{FormID: "b", LastSuccessAt: now.Add(-time.Hour), LastReconcileAt: now.Add(-48 * time.Hour)},
	}}, 0)
	want := `
# HELP formsync_last_success_timestamp_seconds Unix time of the form's last successful sync.
# TYPE formsync_last_success_timestamp_seconds gauge
formsync_last_success_timestamp_seconds{form="a"} 1.7723556e+09
formsync_last_success_timestamp_seconds{form="b"} 1.7723664e+09
# HELP formsync_last_reconcile_timestamp_seconds Unix time of the form's last reconcile (every page read, rows deleted upstream marked).
# TYPE formsync_last_reconcile_timestamp_seconds gauge
formsync_last_reconcile_timestamp_seconds{form="a"} 1.7721936e+09
formsync_last_reconcile_timestamp_seconds{form="b"} 1.7721936e+09
# HELP formsync_watermark_lag_seconds Seconds between the end of the form's last sync and the created_at of the newest submission loaded.
# TYPE formsync_watermark_lag_seconds gauge
formsync_watermark_lag_seconds{form="a"} 14400
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "formsync_last_success_timestamp_seconds",
		"formsync_last_reconcile_timestamp_seconds", "formsync_watermark_lag_seconds"); err != nil {
		t.Error(err)
	}
}

func TestMetricNamesFollowConventions(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.ObserveRequest(formsapi.Event{FormID: "a", Status: 200, Duration: time.Millisecond})
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{{FormID: "a", Watermark: state.Watermark{CreatedAt: now}}}}, time.Second)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "formsync_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func TestHandlerServesExposition(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.ObserveRequest(formsapi.Event{FormID: "a", Status: 200, Duration: time.Millisecond})
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{{FormID: "a", Inserted: 1, Watermark: state.Watermark{CreatedAt: now}}}}, time.Second)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text exposition", ct)
	}
	for _, name := range []string{
		"formsync_api_requests_total", "formsync_api_rate_limited_total", "formsync_api_backoff_seconds_total",
		"formsync_api_request_duration_seconds_bucket", "formsync_runs_total", "formsync_rows_total",
		"formsync_pages_total", "formsync_commit_duration_seconds", "formsync_last_success_timestamp_seconds",
		"formsync_watermark_lag_seconds", "formsync_run_duration_seconds", "go_goroutines",
	} {
		if !strings.Contains(string(body), "\n"+name) {
			t.Errorf("exposition lacks %s", name)
		}
	}
}

type pushed struct {
	method, path, user, pass string
	body                     []byte
}

// pushgateway records what is pushed to it and answers status.
func pushgateway(t *testing.T, status int) (*httptest.Server, func() []pushed) {
	t.Helper()
	var mu sync.Mutex
	var got []pushed
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		user, pass, _ := r.BasicAuth()
		mu.Lock()
		got = append(got, pushed{method: r.Method, path: r.URL.Path, user: user, pass: pass, body: body})
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []pushed {
		mu.Lock()
		defer mu.Unlock()
		return append([]pushed(nil), got...)
	}
}

func TestPush(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{{FormID: "a", Inserted: 7}}}, time.Second)
	srv, got := pushgateway(t, http.StatusOK)

	if err := m.Push(t.Context(), srv.URL, "formsync"); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if err := m.PushGrouped(t.Context(), srv.URL, "formsync", map[string]string{"shard": "3"}); err != nil {
		t.Fatalf("PushGrouped: %v", err)
	}
	reqs := got()
	if len(reqs) != 2 {
		t.Fatalf("pushgateway got %d requests, want 2", len(reqs))
	}
	for i, wantPath := range []string{"/metrics/job/formsync", "/metrics/job/formsync/shard/3"} {
		r := reqs[i]
		if r.method != http.MethodPut || r.path != wantPath {
			t.Errorf("push %d: %s %s, want PUT %s", i, r.method, r.path, wantPath)
		}
		for _, name := range []string{"formsync_rows_total", "formsync_runs_total"} {
			if !strings.Contains(string(r.body), name) {
				t.Errorf("push %d body lacks %s", i, name)
			}
		}
	}
}

func TestPushErrors(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	srv, got := pushgateway(t, http.StatusInternalServerError)
	withAuth := strings.Replace(srv.URL, "http://", "http://pusher:s3cret@", 1)

	err := m.Push(t.Context(), withAuth, "formsync")
	if err == nil {
		t.Fatal("Push succeeded against a failing pushgateway")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error reveals the password: %v", err)
	}
	if reqs := got(); len(reqs) != 1 || reqs[0].user != "pusher" || reqs[0].pass != "s3cret" {
		t.Errorf("pushgateway saw %+v, want one request with basic auth pusher", reqs)
	}

	for _, bad := range []string{"://pusher:s3cret@host", "pushgateway:9091"} {
		err := m.Push(t.Context(), bad, "formsync")
		if err == nil {
			t.Errorf("Push(%q) succeeded", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Push(%q) error reveals the password: %v", bad, err)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// An incomplete form shows how many submissions it misses; a complete one
// shows 0; a form not read to the end leaves the gauge alone.
func TestMissingRowsAndConflicts(t *testing.T) {
	t.Parallel()
	m := New()
	m.ObserveRun(&worker.Report{Conflicts: 2, Forms: []worker.FormReport{
		{FormID: "short", Total: 12, Missing: 2, Checked: true, Err: &worker.IncompleteError{FormID: "short", Total: 12, Stored: 10, Missing: 2}},
		{FormID: "whole", Total: 5, Checked: true},
		{FormID: "failed", Total: -1, Err: errors.New("form not found")},
	}}, 0)
	for form, want := range map[string]float64{"short": 2, "whole": 0} {
		if got := testutil.ToFloat64(m.missingRows.WithLabelValues(form)); got != want {
			t.Errorf("missing rows of %s = %g, want %g", form, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.Registry(), "formsync_form_missing_rows"); n != 2 {
		t.Errorf("%d missing-rows series, want 2 (none for a form not read to the end)", n)
	}
	if got := testutil.ToFloat64(m.conflicts); got != 2 {
		t.Errorf("commit conflicts = %g, want 2", got)
	}
}

// A run that read a form to the end but could not commit it, or whose
// read a reconcile refused, never compared the sink's rows with the API's
// total: the form's missing rows stay as the last comparison left them
// rather than dropping to 0, which would clear an alert on an incomplete
// form for as long as commits fail.
func TestMissingRowsOutliveAFailedComparison(t *testing.T) {
	t.Parallel()
	m := New()
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{
		{FormID: "short", Total: 12, Missing: 2, Checked: true, Err: &worker.IncompleteError{FormID: "short", Total: 12, Stored: 10, Missing: 2}},
		{FormID: "refused", Total: 7, Missing: 1, Checked: true, Err: &worker.IncompleteError{FormID: "refused", Total: 7, Stored: 6, Missing: 1}},
		{FormID: "stopped", Total: 9, Missing: 3, Checked: true, Err: &worker.IncompleteError{FormID: "stopped", Total: 9, Stored: 6, Missing: 3}},
	}}, 0)
	// A shutdown skips the completeness check: the form committed, nothing
	// compared.
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{{FormID: "stopped", Total: 9}}}, 0)
	m.ObserveRun(&worker.Report{
		CommitErr: errors.New("committing 2 forms: boom"),
		Forms:     []worker.FormReport{{FormID: "short", Total: 12}, {FormID: "refused", Total: 7}},
	}, 0)
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{
		{FormID: "refused", Total: 7, Err: errors.New("form refused: not reconciled: the read saw 6 submissions where the API counts 7")},
	}}, 0)
	for form, want := range map[string]float64{"short": 2, "refused": 1, "stopped": 3} {
		if got := testutil.ToFloat64(m.missingRows.WithLabelValues(form)); got != want {
			t.Errorf("missing rows of %s = %g, want %g", form, got, want)
		}
	}
}

// Rows committed in parts while a form was read (Config.PartRows) are in
// the table even when the form then fails, is interrupted, or the run's
// final commit fails; the report counts only those for such a form, and
// the next run finds them stored, not new: they are counted now or never.
func TestRowsCommittedInPartsOfAFailedForm(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{
		{FormID: "a", Parts: 2, Inserted: 80, Updated: 3, Err: fmt.Errorf("form a: %w", context.Canceled)},
		{FormID: "b", Err: errors.New("form b: HTTP 404")},
	}}, time.Second)
	m.ObserveRun(&worker.Report{
		CommitErr: errors.New("committing 1 forms: boom"),
		Forms:     []worker.FormReport{{FormID: "a", Parts: 1, Inserted: 40}},
	}, time.Second)
	for _, c := range []struct {
		form, kind string
		want       float64
	}{{"a", "inserted", 120}, {"a", "updated", 3}} {
		if got := testutil.ToFloat64(m.rows.WithLabelValues(c.form, c.kind)); got != c.want {
			t.Errorf("rows %s of %s = %g, want %g", c.kind, c.form, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.Registry(), "formsync_rows_total"); n != 2 {
		t.Errorf("%d rows series, want 2 (none for a form that committed nothing)", n)
	}
}

// TestFilesMetrics: a run's files are counted by form and reason, and the
// pending gauge leaves once nothing is pending or done.
func TestFilesMetrics(t *testing.T) {
	t.Parallel()
	m := New()
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{{FormID: "f", Files: worker.FileCounts{
		Stored: 3, Bytes: 300, New: 2, Pending: 1, NotStored: map[string]int64{"expired": 2},
	}}}}, 0)
	want := `
# HELP formsync_files_not_stored_total Files a sync recorded as not kept, by form and reason: expired (the service had deleted it), too_large, refused (an address or scheme formsync does not fetch from), dropped (the field policy drops its input), failed (tried again next sync).
# TYPE formsync_files_not_stored_total counter
formsync_files_not_stored_total{form="f",reason="expired"} 2
# HELP formsync_files_pending Files of the form's stored submissions left to fetch after the last sync (the next sync fetches them, oldest first).
# TYPE formsync_files_pending gauge
formsync_files_pending{form="f"} 1
# HELP formsync_files_stored_bytes_total Bytes of the files a sync kept in the files store, by form.
# TYPE formsync_files_stored_bytes_total counter
formsync_files_stored_bytes_total{form="f"} 300
# HELP formsync_files_stored_total Files a sync kept in the files store (FORMSYNC_FILES_STORE), by form: new objects and files whose bytes the store held already.
# TYPE formsync_files_stored_total counter
formsync_files_stored_total{form="f"} 3
`
	names := []string{"formsync_files_not_stored_total", "formsync_files_pending", "formsync_files_stored_bytes_total", "formsync_files_stored_total"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	m.ObserveRun(&worker.Report{Forms: []worker.FormReport{{FormID: "f"}}}, 0)
	if n := testutil.CollectAndCount(m.Registry(), "formsync_files_pending"); n != 0 {
		t.Errorf("%d pending series after a run with nothing to fetch, want none", n)
	}
}
