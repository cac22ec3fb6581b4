package bigquery

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
)

func TestCommitInsertThenNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	var a, c []sink.Row
	for i := range 5 {
		a = append(a, b.row(t, "alpha", int64(100+i), i, false))
	}
	for i := range 3 {
		c = append(c, b.row(t, "beta", int64(200+i), i, i == 1))
	}
	res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("alpha", a), a}, formRows{formState("beta", c), c})
	if res["alpha"] != (sink.Counts{Inserted: 5}) || res["beta"] != (sink.Counts{Inserted: 3}) {
		t.Errorf("first commit: %+v", res)
	}
	checkRows(t, b.sink, "alpha", a)
	checkRows(t, b.sink, "beta", c)
	st := readState(t, b.sink)
	if st["alpha"].Rows != 5 || st["beta"].Rows != 3 {
		t.Errorf("rows in state: alpha %d beta %d", st["alpha"].Rows, st["beta"].Rows)
	}
	if !st["alpha"].Watermark.CreatedAt.Equal(a[4].CreatedAt) || st["alpha"].Order != state.OrderNewestFirst {
		t.Errorf("state alpha = %+v", st["alpha"])
	}

	// The same rows again (and duplicates inside the batch): nothing
	// changes and nothing is counted.
	b.fake.ResetStats()
	dup := append(append([]sink.Row{}, a...), a[0], a[1])
	res = b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("alpha", a), dup}, formRows{formState("beta", c), c})
	if res["alpha"] != (sink.Counts{}) || res["beta"] != (sink.Counts{}) {
		t.Errorf("re-commit counted %+v", res)
	}
	checkRows(t, b.sink, "alpha", a)
	if got := readState(t, b.sink, "alpha")["alpha"].Rows; got != 5 {
		t.Errorf("rows after re-commit = %d, want 5", got)
	}
	if st := b.fake.Stats(); st.LoadJobs != 1 || st.DML["formsync_test.submissions"] != 1 {
		t.Errorf("re-commit stats: %+v", st)
	}
}

func TestCommitCountsUpdates(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	rows := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false), b.row(t, "f", 3, 3, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	changed := append([]sink.Row{}, rows...)
	changed[1].IsSpam = true
	changed = append(changed, b.row(t, "f", 4, 4, false))
	res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("f", changed), changed})
	if res["f"] != (sink.Counts{Inserted: 1, Updated: 1}) {
		t.Errorf("counts %+v, want 1 inserted 1 updated", res["f"])
	}
	checkRows(t, b.sink, "f", changed)
	if got := readState(t, b.sink, "f")["f"].Rows; got != 4 {
		t.Errorf("rows = %d, want 4", got)
	}
}

func TestRekeyOlderToNewer(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	var older, newer []sink.Row
	for i := range 6 {
		older = append(older, b.row(t, "m", -1, i, false))
		newer = append(newer, b.row(t, "m", int64(50+i), i, false))
	}
	if res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("m", older), older}); res["m"].Inserted != 6 {
		t.Fatalf("older: %+v", res)
	}
	// The newer form reads 4 of them (and one new row): re-keyed, not
	// duplicated.
	batch := append(append([]sink.Row{}, newer[:4]...), b.row(t, "m", 99, 99, false))
	res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("m", batch), batch})
	if res["m"] != (sink.Counts{Inserted: 1, Updated: 4}) {
		t.Errorf("re-key counts %+v, want 1 inserted, 4 updated", res["m"])
	}
	want := []sink.Row{}
	for i, r := range newer[:4] {
		r.CreatedAt = older[i].CreatedAt // a re-keyed row keeps its microseconds
		want = append(want, r)
	}
	want = append(want, older[4], older[5], batch[4])
	checkRows(t, b.sink, "m", want)
	if got := readState(t, b.sink, "m")["m"].Rows; got != 7 {
		t.Errorf("rows = %d, want 7", got)
	}
	// Again: nothing changes.
	if res := b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("m", batch), batch}); res["m"] != (sink.Counts{}) {
		t.Errorf("second newer read counted %+v", res["m"])
	}
	checkRows(t, b.sink, "m", want)
}

func TestLegacyTwinOfStoredIDIsRemoved(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	withID := b.row(t, "x", 7, 1, false)
	legacy := b.row(t, "x", -1, 1, false)
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("x", nil), []sink.Row{withID}})
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("x", nil), []sink.Row{legacy}})
	res := b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("x", nil), []sink.Row{withID}})
	if res["x"] != (sink.Counts{}) {
		t.Errorf("counts %+v", res["x"])
	}
	checkRows(t, b.sink, "x", []sink.Row{withID})
	if got := readState(t, b.sink, "x")["x"].Rows; got != 1 {
		t.Errorf("rows = %d, want 1", got)
	}
}

func TestOneLoadJobPerCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	var forms []formRows
	for i, f := range []string{"a", "b", "c", "d", "e"} {
		rows := []sink.Row{b.row(t, f, int64(i*10), i, false), b.row(t, f, int64(i*10+1), i+1, false)}
		forms = append(forms, formRows{formState(f, rows), rows})
	}
	b.fake.ResetStats()
	b.mustCommit(t, b.t0.Add(time.Hour), forms...)
	st := b.fake.Stats()
	if st.LoadJobs != 1 || st.MultipartUploads != 1 {
		t.Errorf("5 forms: %d load jobs, %d uploads, want 1", st.LoadJobs, st.MultipartUploads)
	}
	if st.DML["formsync_test.submissions"] != 1 || st.DML["formsync_test.sync_state"] != 1 {
		t.Errorf("DML %v", st.DML)
	}

	// No rows, a changed state: no load job, one DML on sync_state.
	b.fake.ResetStats()
	failed := forms[0].state
	failed.LastError, failed.LastErrorAt = "form gone", b.t0.Add(2*time.Hour)
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{failed, nil})
	st = b.fake.Stats()
	if st.LoadJobs != 0 || st.DML["formsync_test.submissions"] != 0 || st.DML["formsync_test.sync_state"] != 1 {
		t.Errorf("state-only commit: %+v", st)
	}
	if got := readState(t, b.sink, "a")["a"]; got.LastError != "form gone" || got.Rows != 2 {
		t.Errorf("state-only commit wrote %+v", got)
	}

	// No rows, nothing changed but LastSuccessAt: no load job, no
	// submissions DML; the state is written all the same (its revision
	// is the concurrency token every commit moves on).
	b.fake.ResetStats()
	var same []formRows
	for _, f := range forms[1:] {
		s := f.state
		s.LastSuccessAt = b.t0.Add(3 * time.Hour)
		same = append(same, formRows{s, []sink.Row{}})
	}
	res := b.mustCommit(t, b.t0.Add(3*time.Hour), same...)
	st = b.fake.Stats()
	// The lock row's UPDATE is the transaction's first statement.
	if st.LoadJobs != 0 || len(st.DML) != 2 || st.DML["formsync_test.sync_state"] != 1 || st.DML["formsync_test.sync_lock"] != 1 || len(st.DDL) != 0 {
		t.Errorf("idle commit: %+v", st)
	}
	if len(res) != 4 {
		t.Errorf("result has %d forms, want 4", len(res))
	}
}

func TestNoDDLInSteadyState(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	st := b.fake.Stats()
	for _, tbl := range []string{"formsync_test", "formsync_test_staging", "formsync_test.submissions", "formsync_test.sync_state"} {
		if st.DDL[tbl] != 1 {
			t.Errorf("first Open: DDL on %s = %d, want 1", tbl, st.DDL[tbl])
		}
	}
	b.fake.ResetStats()
	b.second(t)
	if st := b.fake.Stats(); len(st.DDL) != 0 || st.QueryJobs != 0 || st.LoadJobs != 0 {
		t.Errorf("second Open did more than read metadata: %+v", st)
	}
}

func TestViewsOnlyWhenFieldNamesChange(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	view := "formsync_test." + sqlname.ViewName("v")
	rows := []sink.Row{b.row(t, "v", 1, 1, false)}
	b.fake.ResetStats()
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("v", rows, "email", "message"), rows})
	if got := b.fake.Stats().DDL[view]; got != 1 {
		t.Errorf("new form: %d view DDL, want 1", got)
	}
	b.fake.ResetStats()
	rows2 := []sink.Row{b.row(t, "v", 2, 2, false)}
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("v", rows2, "email", "message"), rows2})
	if got := b.fake.Stats().DDL[view]; got != 0 {
		t.Errorf("same field names: %d view DDL, want 0", got)
	}
	b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("v", rows2, "email", "message", "n"), rows2})
	if got := b.fake.Stats().DDL[view]; got != 1 {
		t.Errorf("new field: %d view DDL, want 1", got)
	}
	got := readView(t, b, "v")
	if len(got) != 2 || got[0]["email"] != "user1@example.com" || got[1]["n"] != "2" || got[0]["message"] != "hello <1>" {
		t.Errorf("view rows %v", got)
	}
}

func TestFaultsLeaveExactTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		op        bqfake.Op
		status    int
		reason    string
		loadJobs  int
		wantError error
	}{
		{"upload 503", bqfake.OpUpload, http.StatusServiceUnavailable, "backendError", 1, nil},
		{"upload response lost, 409 on retry", bqfake.OpUploadLost, http.StatusBadGateway, "backendError", 1, nil},
		{"load job backendError", bqfake.OpLoadJob, http.StatusInternalServerError, "backendError", 2, nil},
		{"load job invalid", bqfake.OpLoadJob, http.StatusBadRequest, "invalid", 1, ErrInvalid},
		{"transaction fails mid-script", bqfake.OpScript, http.StatusInternalServerError, "backendError", 1, nil},
		{"transaction rate limited mid-script", bqfake.OpScript, http.StatusForbidden, "rateLimitExceeded", 1, nil},
		{"transaction invalid mid-script", bqfake.OpScript, http.StatusBadRequest, "invalidQuery", 1, ErrInvalid},
		{"upload access denied", bqfake.OpUpload, http.StatusForbidden, "accessDenied", 0, ErrAccessDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, bqfake.Options{PendingPolls: 1})
			first := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
			b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", first), first})
			before := readState(t, b.sink, "f")["f"]

			next := append(append([]sink.Row{}, first...), b.row(t, "f", 3, 3, false), b.row(t, "f", 4, 4, true))
			next[0].IsSpam = true
			b.fake.ResetStats()
			b.fake.FailNext(tt.op, tt.status, tt.reason)
			res, err := b.commit(t, b.t0.Add(2*time.Hour), formRows{formState("f", next), next})
			if got := b.fake.Stats().LoadJobs; got != tt.loadJobs {
				t.Errorf("%d load jobs, want %d", got, tt.loadJobs)
			}
			if tt.wantError != nil {
				if !errors.Is(err, tt.wantError) {
					t.Fatalf("err = %v, want %v", err, tt.wantError)
				}
				var be *Error
				if !errors.As(err, &be) || be.Hint == "" || !strings.Contains(err.Error(), "test-project") && !strings.Contains(err.Error(), "job") {
					t.Errorf("error without context or hint: %v", err)
				}
				checkRows(t, b.sink, "f", first)
				after := readState(t, b.sink, "f")["f"]
				if !after.Watermark.CreatedAt.Equal(before.Watermark.CreatedAt) || after.Rows != 2 {
					t.Errorf("a failed commit changed the state: %+v", after)
				}
				// The next run commits the same rows.
				res = b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("f", next), next})
			} else if err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if res["f"] != (sink.Counts{Inserted: 2, Updated: 1}) {
				t.Errorf("counts %+v, want 2 inserted 1 updated", res["f"])
			}
			checkRows(t, b.sink, "f", next)
			if got := readState(t, b.sink, "f")["f"].Rows; got != 4 {
				t.Errorf("rows = %d, want 4", got)
			}
		})
	}
}

func TestStaleRevisionWritesNothing(t *testing.T) {
	t.Parallel()
	// A commit carrying a revision that is no longer the stored one (another
	// process committed the form since) writes nothing, rows or state, and
	// says which forms conflicted.
	b := setup(t, bqfake.Options{})
	a := []sink.Row{b.row(t, "a", 1, 1, false)}
	c := []sink.Row{b.row(t, "c", 2, 2, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("a", a), a}, formRows{formState("c", c), c})
	if got := readState(t, b.sink, "a")["a"].Revision; got != 1 {
		t.Fatalf("revision after the first commit = %d, want 1", got)
	}
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("a", a), a})
	if got := readState(t, b.sink, "a", "c"); got["a"].Revision != 2 || got["c"].Revision != 1 {
		t.Fatalf("revisions a=%d c=%d, want 2 and 1", got["a"].Revision, got["c"].Revision)
	}

	for _, rows := range [][]sink.Row{nil, {b.row(t, "a", 3, 3, false), b.row(t, "c", 4, 4, false)}} {
		stale := formState("a", a)
		stale.Revision = 1 // read before the second commit
		stale.LastError = "must not be stored"
		fresh := formState("c", c)
		fresh.Revision = 1
		commit := &sink.Commit{SyncedAt: b.t0.Add(3 * time.Hour), Forms: []sink.FormCommit{{State: stale}, {State: fresh}}}
		if rows != nil {
			commit.Forms[0].Rows = sinktest.Spool(t, rows[0])
			commit.Forms[1].Rows = sinktest.Spool(t, rows[1])
		}
		b.fake.ResetStats()
		_, err := b.sink.Commit(t.Context(), commit)
		var ce *sink.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, sink.ErrStateConflict) || !slices.Equal(ce.Forms, []string{"a"}) {
			t.Fatalf("stale commit: err = %v, want a ConflictError on form a", err)
		}
		if st := b.fake.Stats(); len(st.DML) != 0 {
			t.Errorf("stale commit ran DML: %+v", st.DML)
		}
		checkRows(t, b.sink, "a", a)
		checkRows(t, b.sink, "c", c)
		got := readState(t, b.sink, "a", "c")
		if got["a"].Revision != 2 || got["a"].LastError != "" || got["c"].Revision != 1 {
			t.Errorf("stale commit changed the state: %+v", got)
		}
	}
}

// TestStaleRevisionInsideTransaction checks the transaction's own check:
// the revision moves between the sink's early read and its transaction
// (another process commits in between), and the transaction writes
// nothing.
func TestStaleRevisionInsideTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	other := b.second(t)
	a := []sink.Row{b.row(t, "a", 1, 1, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("a", a), a})

	st := formState("a", a)
	st.Revision = 1
	late := []sink.Row{b.row(t, "a", 2, 2, false)}
	// The view of a form seen for the first time is created before the
	// transaction; a new field name makes this commit create one, and the
	// other process commits while that happens. (The other process finds
	// the view being made for names it does not have, and makes its own:
	// only the first view runs the hook.)
	st.FieldNames = []string{"new"}
	var hooked atomic.Bool
	hook := b.fake.OnStatement(func(kind string) {
		if kind == "CREATE_VIEW" && hooked.CompareAndSwap(false, true) {
			if _, err := other.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(2 * time.Hour), Forms: []sink.FormCommit{{State: withRevision(formState("a", a), 1)}}}); err != nil {
				t.Errorf("other commit: %v", err)
			}
		}
	})
	_, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(3 * time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, late...)}}})
	hook()
	var ce *sink.ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Forms, []string{"a"}) {
		t.Fatalf("err = %v, want a ConflictError on form a", err)
	}
	checkRows(t, b.sink, "a", a)
	if got := readState(t, b.sink, "a")["a"]; got.Revision != 2 || len(got.FieldNames) != 0 {
		t.Errorf("state after the refused commit: %+v", got)
	}
}

func withRevision(f state.Form, rev int64) state.Form {
	f.Revision = rev
	return f
}

func TestResumableUploadAndPagedReads(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PageRows: 7}, func(c *Config) { c.UploadChunkSize = 256 << 10 })
	var rows []sink.Row
	pad := strings.Repeat("x", 400)
	for i := range 1200 {
		r := b.row(t, "big", int64(i), i, false)
		r.Fields = `{"pad":"` + pad + `"}`
		r.ContentKey = sink.ContentKey(r.CreatedAt, r.Fields, r.Files)
		rows = append(rows, r)
	}
	res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("big", rows), rows})
	if res["big"].Inserted != 1200 {
		t.Errorf("inserted %d", res["big"].Inserted)
	}
	if st := b.fake.Stats(); st.ResumableUploads != 1 || st.MultipartUploads != 0 {
		t.Errorf("uploads: %+v, want one resumable", st)
	}
	checkRows(t, b.sink, "big", rows)
}

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	sc := errorScope{Project: "p", Dataset: "d"}
	tests := []struct {
		reason string
		code   int
		kind   error
		hint   string
	}{
		{"backendError", 500, ErrRetryable, "transient"},
		{"internalError", 500, ErrRetryable, "transient"},
		{"rateLimitExceeded", 403, ErrRetryable, "transient"},
		{"", 503, ErrRetryable, "transient"},
		{"invalid", 400, ErrInvalid, "report"},
		{"invalidQuery", 400, ErrInvalid, "report"},
		// Not a bug to report: a commit too large for BigQuery's
		// resources, which smaller commits avoid.
		{"resourcesExceeded", 400, ErrInvalid, "--checkpoint-rows"},
		{"quotaExceeded", 403, ErrQuotaExceeded, "quota"},
		{"accessDenied", 403, ErrAccessDenied, "roles/bigquery.dataEditor on dataset d and roles/bigquery.jobUser on project p"},
		{"notFound", 404, ErrNotFound, "FORMSYNC_BQ_DATASET"},
		{"duplicate", 409, ErrDuplicate, "exists"},
		// A job cancelled (by a person or by BigQuery) or timed out is
		// neither a bad request nor formsync's: running it again is what
		// BigQuery's error table says to do.
		{"stopped", 200, ErrRetryable, "transient"},
		{"timeout", 400, ErrRetryable, "transient"},
	}
	for _, tt := range tests {
		err := sc.classify("loading", "table p.d.t", googleErr(tt.code, tt.reason))
		if !errors.Is(err, tt.kind) {
			t.Errorf("%s/%d: %v is not %v", tt.reason, tt.code, err, tt.kind)
		}
		if Retryable(err) != (tt.kind == ErrRetryable) {
			t.Errorf("%s: Retryable = %v", tt.reason, Retryable(err))
		}
		if !strings.Contains(err.Error(), tt.hint) || !strings.Contains(err.Error(), "table p.d.t") {
			t.Errorf("%s: message %q lacks %q or the table", tt.reason, err, tt.hint)
		}
		if tt.hint != "report" && strings.Contains(err.Error(), "formsync bug") {
			t.Errorf("%s: message %q calls it a formsync bug", tt.reason, err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{},
		{Project: "UPPER"},
		{Project: "p`; DROP", Dataset: "d"},
		{Project: "p", Dataset: "d-x"},
		{Project: "p", Dataset: "d`x"},
		{Project: "p", StagingTable: "submissions"},
		{Project: "p", Endpoint: "ftp://x"},
		{Project: "p", Location: "u s"},
		{Project: "p", Location: "us-central1;"},
	} {
		if _, err := Open(t.Context(), c); err == nil {
			t.Errorf("Open(%+v) accepted", c)
		}
	}
	// Every problem, each under its field; the staging dataset named after
	// the bad dataset is not a second one.
	err := Config{Project: "Bad", Dataset: "bad-ds"}.Validate()
	var fields []string
	if joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			var fe *config.FieldError
			if errors.As(e, &fe) {
				fields = append(fields, fe.Field)
			}
		}
	}
	if !slices.Equal(fields, []string{"Project", "Dataset"}) {
		t.Errorf("Validate: problems of %v (%v), want Project and Dataset", fields, err)
	}
	if err := (Config{Project: "example.com:my-proj"}).Validate(); err != nil {
		t.Errorf("domain-scoped project refused: %v", err)
	}
	for _, loc := range []string{"US", "EU", "us-central1", "europe-west2", "northamerica-northeast1"} {
		if err := (Config{Project: "p", Location: loc}).Validate(); err != nil {
			t.Errorf("location %s refused: %v", loc, err)
		}
	}
}

// oneRowSpool stages one row of form f in a spool of its own and returns
// it, the row, and the spool's file.
func oneRowSpool(t *testing.T, b *bundle) (*sink.Spool, []sink.Row, string) {
	t.Helper()
	dir := t.TempDir()
	sp, err := sink.NewSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	if err := sp.Append(rows[0]); err != nil {
		t.Fatal(err)
	}
	if err := sp.Finish(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("spool files %v: %v", files, err)
	}
	return sp, rows, files[0]
}

// TestFailedLoadNamesTheBadRows: BigQuery's error for a load that refused
// rows only counts them and says to look into the job's errors[]; the
// sink's error names what errors[] says, which the job's error alone does
// not, so that the message asked to be reported carries the cause.
func TestFailedLoadNamesTheBadRows(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	sp, rows, file := oneRowSpool(t, b)
	// A staged line the staging table does not take (a spool written by
	// another version, say).
	if err := os.WriteFile(file, []byte(`{"form_id":"f","bogus":1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0, Forms: []sink.FormCommit{{State: formState("f", rows), Rows: sp}}})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), "No such field: bogus") {
		t.Errorf("err = %v, want it to name the bad field", err)
	}
}

// TestUnreadableSpoolIsNotABigQueryFailure: a staged file that cannot be
// opened or read (removed by a temp cleaner, a disk error) is a local
// failure: reported as such, not retried, and not blamed on BigQuery. An
// OS error satisfies net.Error, so it passed for a transport failure.
func TestUnreadableSpoolIsNotABigQueryFailure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		break_ func(path string) error
	}{
		{"removed", os.Remove},
		{"a directory", func(path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.Mkdir(path, 0o700)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, bqfake.Options{})
			sp, rows, file := oneRowSpool(t, b)
			if err := tt.break_(file); err != nil {
				t.Fatal(err)
			}
			_, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0, Forms: []sink.FormCommit{{State: formState("f", rows), Rows: sp}}})
			if err == nil {
				t.Fatal("commit of an unreadable spool succeeded")
			}
			var be *Error
			if msg := err.Error(); Retryable(err) || errors.As(err, &be) || strings.Contains(msg, "BigQuery failure") || strings.Contains(msg, "BigQuery refused") {
				t.Errorf("err = %v, want a local failure, not retried nor blamed on BigQuery", err)
			}
			if !strings.Contains(err.Error(), "reading the staged rows") {
				t.Errorf("err = %v, want it to say the staged rows could not be read", err)
			}
		})
	}
}

// TestDatasetReadRefusedSaysReading: a dataset formsync may not read (403
// on its metadata) is reported as a read refused, not as a dataset
// formsync failed to create: the fix is a role on it, not a create.
func TestDatasetReadRefusedSaysReading(t *testing.T) {
	t.Parallel()
	fake := bqfake.Start(t, bqfake.Options{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/datasets/formsync_test") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":403,"message":"Access Denied: Dataset test-project:formsync_test","errors":[{"reason":"accessDenied","message":"Access Denied"}]}}`)
			return
		}
		fake.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	cfg := testConfig(fake)
	cfg.Endpoint = front.URL
	_, err := Open(t.Context(), cfg)
	if !errors.Is(err, ErrAccessDenied) || !strings.Contains(err.Error(), "reading the dataset") || strings.Contains(err.Error(), "creating") {
		t.Errorf("Open = %v, want access denied while reading the dataset", err)
	}
}

// TestDatasetInAnotherLocationIsRefused: jobs run in Config.Location, and
// BigQuery answers a job that uses a dataset elsewhere with "Not found"
// after the pages were read. Open and OpenReadOnly refuse such a dataset
// at once, naming where it is; the location is compared without case.
func TestDatasetInAnotherLocationIsRefused(t *testing.T) {
	t.Parallel()
	fake := bqfake.Start(t, bqfake.Options{})
	eu := testConfig(fake)
	eu.Location = "EU"
	s, err := Open(t.Context(), eu)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	us := testConfig(fake) // the default location, US
	for name, open := range map[string]func(context.Context, Config) (*Sink, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		s, err := open(t.Context(), us)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the dataset is in EU, but jobs run in US") || !strings.Contains(err.Error(), "FORMSYNC_BQ_LOCATION=EU") {
			t.Errorf("%s in US of a dataset in EU = %v, want it refused naming EU", name, err)
		}
	}
	lower := testConfig(fake)
	lower.Location = "eu"
	s, err = Open(t.Context(), lower)
	if err != nil {
		t.Fatalf("Open with location eu of a dataset in EU: %v", err)
	}
	s.Close()

	// A staging dataset made elsewhere by hand is refused too: the
	// commit's MERGE reads it in the jobs' location.
	other := testConfig(fake)
	other.Dataset, other.StagingDataset = "formsync_other", "formsync_other_staging"
	staging := other
	staging.Dataset, staging.StagingDataset, staging.Location = other.StagingDataset, "", "EU"
	if s, err = Open(t.Context(), staging); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(t.Context(), other); err == nil {
		s.Close()
	}
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "formsync_other_staging") {
		t.Errorf("Open in US with the staging dataset in EU = %v, want it refused naming the staging dataset", err)
	}
	// Refused before anything is made: once the location is set right,
	// the main dataset is made there, not left behind in US.
	client, err := bq.NewClient(t.Context(), other.Project, clientOptions(fake)...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if meta, err := client.Dataset(other.Dataset).Metadata(t.Context()); err == nil {
		t.Errorf("the refused Open made dataset %s in %s", other.Dataset, meta.Location)
	}
}

// TestEndpointWithItsAPIPath: an endpoint given with the API's path (the
// form the Go client's own option takes) reaches the same server as the
// bare host, not /bigquery/v2/bigquery/v2/.
func TestEndpointWithItsAPIPath(t *testing.T) {
	t.Parallel()
	for _, suffix := range []string{"/bigquery/v2/", "/bigquery/v2", "/"} {
		t.Run(suffix, func(t *testing.T) {
			b := setup(t, bqfake.Options{}, func(c *Config) { c.Endpoint += suffix })
			rows := []sink.Row{b.row(t, "f", 1, 1, false)}
			b.mustCommit(t, b.t0, formRows{formState("f", rows, "email"), rows})
			checkRows(t, b.sink, "f", rows)
		})
	}
}
