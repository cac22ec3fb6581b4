package bigquery

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestDeletionsMatchReference runs random sequences of commits (rows by id
// and by content key, several versions of a submission in one commit,
// reconciles, forgets with their tombstones, forms committed together)
// against the sink and the reference sink (sink/memory), and requires the same
// counts, rows (deleted_at included) and row_count / deleted_count after
// every commit. Seeds 0 and 1 by default, 0 to 5 with FORMSYNC_SLOW_TESTS=1.
func TestDeletionsMatchReference(t *testing.T) {
	t.Parallel()
	seeds := 2
	if enginetest.SlowTests() {
		seeds = 6
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			b := setup(t, bqfake.Options{})
			ref := memory.New()
			rnd := rand.New(rand.NewPCG(uint64(seed), 7))
			forms := []string{"a", "b"}
			at := b.t0.Add(time.Hour)
			for step := range 14 {
				at = at.Add(time.Minute)
				var fcs, refFcs []sink.FormCommit
				for _, form := range forms {
					if rnd.IntN(3) == 0 {
						continue
					}
					fc, refFc := randomFormCommit(t, b, ref, rnd, form)
					fcs, refFcs = append(fcs, fc), append(refFcs, refFc)
				}
				if len(fcs) == 0 {
					continue
				}
				for _, fc := range fcs {
					var rs []sink.Row
					for r := range fc.Rows.Rows() {
						rs = append(rs, r)
					}
					t.Logf("step %d: form %s reconcile=%v forget=%v rows %s", step, fc.State.FormID, fc.Reconcile, fc.Forget, brief(rs))
				}
				want, err := ref.Commit(t.Context(), &sink.Commit{SyncedAt: at, Forms: refFcs})
				if err != nil {
					t.Fatalf("step %d: reference: %v", step, err)
				}
				got, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: at, Forms: fcs})
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: counts %v, reference %v", step, got, want)
				}
				for _, form := range forms {
					compareForm(t, step, b.sink, ref, form)
				}
			}
		})
	}
}

// randomFormCommit stages random versions of a form's submissions, and
// sometimes a reconcile or a forget, for the sink and for the reference
// (each from its own stored state).
func randomFormCommit(t *testing.T, b *bundle, ref *memory.Sink, rnd *rand.Rand, form string) (sink.FormCommit, sink.FormCommit) {
	t.Helper()
	st := readState(t, b.sink, form)[form]
	refSt, err := ref.ReadState(t.Context(), []string{form})
	if err != nil {
		t.Fatal(err)
	}
	if st.FormID == "" {
		st = state.New(form)
	}
	rst := refSt[form]
	if rst.FormID == "" {
		rst = state.New(form)
	}
	var rows []sink.Row
	// Within one commit a submission is staged with its id or without
	// it, not both, and its versions differ in is_spam only: the sink's
	// plan settles these cases (which have nothing to do with deletions)
	// otherwise than a row-by-row apply does.
	v := map[int]int{}
	withID := map[int]bool{}
	for range rnd.IntN(7) {
		n := 1 + rnd.IntN(6)
		at := b.t0.Add(time.Duration(n)*time.Second + 123*time.Microsecond)
		if _, ok := withID[n]; !ok {
			withID[n] = rnd.IntN(3) > 0
		}
		var id *int64
		if withID[n] {
			v := int64(n)
			id = &v
			at = at.Truncate(time.Millisecond)
		}
		if _, ok := v[n]; !ok {
			v[n] = rnd.IntN(2)
		}
		fields := fmt.Sprintf(`{"n":"%d","v":"%d"}`, n, v[n])
		rows = append(rows, sinktest.Row(t, form, id, at, rnd.IntN(4) == 0, fields))
	}
	fc := sink.FormCommit{State: st, Rows: sinktest.Spool(t, rows...), Reconcile: rnd.IntN(3) == 0}
	if rnd.IntN(4) == 0 {
		stored, err := b.sink.ReadRows(t.Context(), form)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) > 0 {
			r := stored[rnd.IntN(len(stored))]
			fc.Forget = []string{r.SubmissionKey, "no-such-key"}
			fg := st.Forgotten
			if fg == nil {
				if fg, err = state.NewForgotten(); err != nil {
					t.Fatal(err)
				}
			}
			fc.State.Forgotten = fg.With(1, r.SubmissionKey, r.ContentKey)
		}
	}
	refFc := fc
	refFc.State.Revision = rst.Revision
	refFc.Rows = sinktest.Spool(t, rows...)
	return fc, refFc
}

func compareForm(t *testing.T, step int, s *Sink, ref *memory.Sink, form string) {
	t.Helper()
	got, err := s.ReadRows(t.Context(), form)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.ReadRows(t.Context(), form)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, sameRow) {
		t.Fatalf("step %d: form %s rows:\n got  %s\n want %s", step, form, brief(got), brief(want))
	}
	st := readState(t, s, form)[form]
	refSt, err := ref.ReadState(t.Context(), []string{form})
	if err != nil {
		t.Fatal(err)
	}
	if w := refSt[form]; st.Rows != w.Rows || st.Deleted != w.Deleted {
		t.Fatalf("step %d: form %s: row_count %d deleted_count %d, reference %d and %d", step, form, st.Rows, st.Deleted, w.Rows, w.Deleted)
	}
}

func sameRow(a, b sink.Row) bool {
	return a.FormID == b.FormID && a.SubmissionKey == b.SubmissionKey && a.ContentKey == b.ContentKey &&
		a.CreatedAt.Equal(b.CreatedAt) && a.IsSpam == b.IsSpam && a.Fields == b.Fields && a.Files == b.Files &&
		a.Raw == b.Raw && a.DeletedAt.Equal(b.DeletedAt) &&
		(a.SubmissionID == nil) == (b.SubmissionID == nil) && (a.SubmissionID == nil || *a.SubmissionID == *b.SubmissionID)
}

func brief(rows []sink.Row) string {
	var b []string
	for _, r := range rows {
		id := "-"
		if r.SubmissionID != nil {
			id = fmt.Sprint(*r.SubmissionID)
		}
		d := ""
		if !r.DeletedAt.IsZero() {
			d = " deleted"
		}
		b = append(b, fmt.Sprintf("\n   %.8s id=%s %s spam=%v %s%s", r.SubmissionKey, id, r.CreatedAt.Format("05.000000"), r.IsSpam, r.Fields, d))
	}
	return fmt.Sprint(b)
}

// TestReconcileWithoutRows: a reconcile that stages nothing (the API
// serves no submission any more) runs no load job, marks every row, and
// the view leaves the marked rows out; Find still finds them.
func TestReconcileWithoutRows(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	rows := []sink.Row{b.row(t, "r", 1, 1, false), b.row(t, "r", 2, 2, false), b.row(t, "r", 3, 3, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("r", rows, "email"), rows})
	st := readState(t, b.sink, "r")["r"]
	b.fake.ResetStats()
	at := b.t0.Add(2 * time.Hour)
	res, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: at, Forms: []sink.FormCommit{{State: st, Reconcile: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if res["r"] != (sink.Counts{Deleted: 3}) {
		t.Errorf("counts %+v, want 3 deleted", res["r"])
	}
	if s := b.fake.Stats(); s.LoadJobs != 0 || s.QueryJobs != 2 || len(s.DDL) != 0 {
		t.Errorf("a reconcile without rows: %+v, want no load job, the state read and one transaction", s)
	}
	if got := readState(t, b.sink, "r")["r"]; got.Rows != 0 || got.Deleted != 3 {
		t.Errorf("row_count %d deleted_count %d, want 0 and 3", got.Rows, got.Deleted)
	}
	if got := readView(t, b, "r"); len(got) != 0 {
		t.Errorf("the view shows %d rows deleted upstream", len(got))
	}
	found, err := b.sink.Find(t.Context(), "r", sink.Match{Field: "email", Value: "user2@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].SubmissionKey != "2" || !found[0].DeletedAt.Equal(at) {
		t.Errorf("Find: %+v, want row 2 deleted at %s", found, at)
	}

	// Served again: restored, and back in the view.
	res = b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("r", rows[:1], "email"), rows[:1]})
	if res["r"] != (sink.Counts{Restored: 1}) {
		t.Errorf("counts %+v, want 1 restored", res["r"])
	}
	if got := readView(t, b, "r"); len(got) != 1 || got[0]["submission_key"] != "1" {
		t.Errorf("view after a restore: %v", got)
	}
}

// TestFindTakesNamesAndValuesAsParameters finds rows by field names and
// values full of SQL and JSON path syntax.
func TestFindTakesNamesAndValuesAsParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	names := append([]string{"a.b", "$", "$.a", "[0]", "a[0]", `"q"`, "*"}, hostile...)
	var rows []sink.Row
	for i, name := range names {
		fields, err := json.Marshal(map[string]any{name: names[len(names)-1-i], "other": name, "n": i})
		if err != nil {
			t.Fatal(err)
		}
		id := int64(i + 1)
		r, err := sink.NewRow("h", &id, b.t0.Add(time.Duration(i)*time.Second), false, fields, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("h", rows), rows})
	for i, name := range names {
		got, err := b.sink.Find(t.Context(), "h", sink.Match{Field: name, Value: names[len(names)-1-i]})
		if err != nil {
			t.Fatalf("field %q: %v", name, err)
		}
		if len(got) != 1 || got[0].SubmissionKey != rows[i].SubmissionKey {
			t.Errorf("field %q: found %d rows, want row %s", name, len(got), rows[i].SubmissionKey)
		}
		if got, err := b.sink.Find(t.Context(), "h", sink.Match{Field: name, Value: name + "x"}); err != nil || len(got) != 0 {
			t.Errorf("field %q with another value: %d rows, %v", name, len(got), err)
		}
	}
	got, err := b.sink.Find(t.Context(), "h", sink.Match{Keys: []string{"2", "'; --"}})
	if err != nil || len(got) != 1 || got[0].SubmissionKey != "2" {
		t.Errorf("by key: %+v, %v", got, err)
	}
	if got, err := b.sink.Find(t.Context(), "h", sink.Match{Field: "n", Value: "1"}); err != nil || len(got) != 0 {
		t.Errorf("a number is not a string: %d rows, %v", len(got), err)
	}
}

// TestTombstonesFilterTheUpload checks the filter on its own: lines longer
// than its buffer pass whole, tombstoned keys (submission or content) are
// dropped, and a line that is not JSON fails the upload.
func TestTombstonesFilterTheUpload(t *testing.T) {
	t.Parallel()
	fg, err := state.NewForgotten()
	if err != nil {
		t.Fatal(err)
	}
	fg = fg.With(1, "gone", "gone-content")
	long := strings.Repeat("x", 200<<10)
	in := `{"submission_key":"1","content_key":"c1","fields":"` + long + `"}` + "\n" +
		`{"submission_key":"gone","content_key":"c2"}` + "\n" +
		`{"submission_key":"3","content_key":"gone-content","fields":"` + long + `"}` + "\n" +
		`{"submission_key":"4","content_key":"c4"}` + "\n"
	want := `{"submission_key":"1","content_key":"c1","fields":"` + long + `"}` + "\n" + `{"submission_key":"4","content_key":"c4"}` + "\n"
	for name, r := range map[string]io.Reader{
		"whole":     strings.NewReader(in),
		"byte/byte": iotest.OneByteReader(strings.NewReader(in)),
	} {
		got, err := io.ReadAll(iotest.HalfReader(&tombstoneFilter{r: bufio.NewReaderSize(r, 64<<10), forgotten: fg}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != want {
			t.Errorf("%s: got %d bytes %.60q..., want %d bytes", name, len(got), got, len(want))
		}
	}
	bad := `{"submission_key":"1","content_key":"c1"}` + "\n" + "{\"form_id\": 17, this is not a row\n"
	if _, err := io.ReadAll(&tombstoneFilter{r: bufio.NewReader(strings.NewReader(bad)), forgotten: fg}); err == nil {
		t.Error("a line that is not JSON passed")
	}
}

// TestMigrationRecreatesViews opens the sink on a dataset of the release
// before deleted_at whose migration was interrupted after submissions
// gained deleted_at: Open recreates every form's view (they must leave
// out rows deleted upstream) before sync_state gains its columns, whose
// presence then says the views were recreated: the next Open does nothing.
func TestMigrationRecreatesViews(t *testing.T) {
	t.Parallel()
	subs, st := submissionsSchema(), stateSchema()
	if subs[len(subs)-1].Name != "deleted_at" || st[13].Name != "revision" {
		t.Fatal("the schemas changed: update this test")
	}
	fake, cfg, ds := olderDataset(t, map[string]bq.Schema{"submissions": subs, "sync_state": st[:14]})
	loadNDJSON(t, ds.Table("sync_state"), st[:14],
		`{"form_id":"v1","row_count":"2","field_names":["a"],"updated_at":"2026-03-04T06:00:00Z","revision":"3"}`,
		`{"form_id":"v2","row_count":"0","updated_at":"2026-03-04T06:00:00Z","revision":"1"}`)
	loadNDJSON(t, ds.Table("submissions"), subs,
		`{"form_id":"v1","submission_id":"1","submission_key":"1","created_at":"2026-03-04T05:06:07.123000Z","is_spam":false,"fields":{"a":"x"},"files":[],"synced_at":"2026-03-04T06:00:00Z"}`,
		`{"form_id":"v1","submission_id":"2","submission_key":"2","created_at":"2026-03-04T05:06:08.123000Z","is_spam":false,"fields":{"a":"y"},"files":[],"synced_at":"2026-03-04T06:00:00Z","deleted_at":"2026-03-04T06:30:00Z"}`)

	fake.ResetStats()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stats := fake.Stats()
	for _, v := range []string{"v1", "v2"} {
		if n := stats.DDL["formsync_test."+sqlname.ViewName(v)]; n != 1 {
			t.Errorf("view of form %s: %d DDL, want 1", v, n)
		}
	}
	if stats.DDL["formsync_test.sync_state"] != 1 || stats.DDL["formsync_test.submissions"] != 0 {
		t.Errorf("schema updates: %v, want one on sync_state only", stats.DDL)
	}
	b := &bundle{fake: fake, sink: s, cfg: cfg}
	if got := readView(t, b, "v1"); len(got) != 1 || got[0]["submission_key"] != "1" || got[0]["a"] != "x" {
		t.Errorf("view of v1: %v, want row 1 only", got)
	}
	got := readState(t, s, "v1")["v1"]
	if got.Rows != 2 || got.Deleted != 0 || got.Forgotten != nil || got.FieldPolicy != "" || !got.LastReconcileAt.IsZero() || got.Revision != 3 {
		t.Errorf("state read from the migrated table: %+v", got)
	}

	fake.ResetStats()
	s2, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if stats := fake.Stats(); len(stats.DDL) != 0 || stats.QueryJobs != 0 {
		t.Errorf("the next Open: %+v, want no DDL and no query", stats)
	}
}
