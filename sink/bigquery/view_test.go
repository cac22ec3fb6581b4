package bigquery

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// readView reads a form's view through the fake (SELECT * is a shape the
// fake accepts for tests), one map per row, sorted by submission_key.
func readView(t *testing.T, b *bundle, form string) []map[string]bq.Value {
	t.Helper()
	q := b.sink.query("SELECT * FROM " + ref(b.cfg.Project, b.cfg.Dataset, sqlname.ViewName(form)))
	it, err := q.Read(t.Context())
	if err != nil {
		t.Fatalf("reading view: %v", err)
	}
	var out []map[string]bq.Value
	for {
		row := map[string]bq.Value{}
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j]["submission_key"].(string) < out[j-1]["submission_key"].(string); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func googleErr(code int, reason string) error {
	e := &googleapi.Error{Code: code, Message: "boom"}
	if reason != "" {
		e.Errors = []googleapi.ErrorItem{{Reason: reason, Message: "boom"}}
	}
	return e
}

// TestViewOfAFailedCommitIsMadeAgain: two processes commit a new form at
// once, each making the form's view (DDL, outside the transaction) before
// its transaction. The one whose view comes last loses the transaction; its
// retry, merged with what the other stored, has the stored field names,
// and the view must be made again all the same: it shows the names of the
// commit that failed.
func TestViewOfAFailedCommitIsMadeAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	other := b.second(t)
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	var views atomic.Int32
	otherView, ourView, otherDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	remove := b.fake.OnStatement(func(kind string) {
		if kind != "CREATE_VIEW" {
			return
		}
		switch views.Add(1) {
		case 1: // the other process's view: hold its commit until ours made its view
			close(otherView)
			<-ourView
		case 2: // ours: let the other commit first
			close(ourView)
			<-otherDone
		}
	})
	go func() {
		defer close(otherDone)
		if _, err := other.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0, Forms: []sink.FormCommit{{State: formState("f", nil, "email", "n")}}}); err != nil {
			t.Errorf("other commit: %v", err)
		}
	}()
	<-otherView
	_, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(time.Hour), Forms: []sink.FormCommit{{State: formState("f", rows, "email"), Rows: sinktest.Spool(t, rows...)}}})
	remove()
	if !errors.Is(err, sink.ErrStateConflict) {
		t.Fatalf("err = %v, want a state conflict", err)
	}
	// Merged with the stored state, as the engine merges: the names stored.
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{state: formState("f", rows, "email", "n"), rows: rows})
	view := readView(t, b, "f")
	if len(view) != 1 {
		t.Fatalf("view rows: %v", view)
	}
	if _, ok := view[0]["n"]; !ok {
		t.Errorf("the view has no column n, a field name stored: %v", view[0])
	}
}

// TestViewLeftByAnotherProcessIsRepaired: a process made a form's view for
// field names its commit then failed to store, and exited (a CronJob pod
// does not retry). The next process's first commit of the form finds the
// view's description does not match the stored names and makes the view
// again; after that, and in a process that finds the view right, commits
// read no view metadata and make no view.
func TestViewLeftByAnotherProcessIsRepaired(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	view := "formsync_test." + sqlname.ViewName("v")
	rows := []sink.Row{b.row(t, "v", 1, 1, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("v", rows, "email"), rows})

	failed := b.second(t)
	wrong := viewSQL(b.cfg.Project, b.cfg.Dataset, "v", []string{"email", "secret"})
	if err := failed.createView(t.Context(), "v", wrong); err != nil {
		t.Fatal(err)
	}
	if _, ok := readView(t, b, "v")[0]["secret"]; !ok {
		t.Fatal("setup: the failed process's view has no column secret")
	}

	next := b.second(t)
	commit := func(s *Sink, at time.Duration) bqfake.Stats {
		t.Helper()
		b.fake.ResetStats()
		st := formState("v", rows, "email")
		if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(at), Forms: []sink.FormCommit{{State: withRevision(st, revisionOf(t, b, "v"))}}}); err != nil {
			t.Fatal(err)
		}
		return b.fake.Stats()
	}
	if st := commit(next, 2*time.Hour); st.TableGets[view] != 1 || st.DDL[view] != 1 {
		t.Errorf("first commit after the failed process: %d view reads, %d view DDL; want 1 and 1", st.TableGets[view], st.DDL[view])
	}
	got := readView(t, b, "v")
	if _, ok := got[0]["secret"]; ok || got[0]["email"] != "user1@example.com" {
		t.Errorf("view after the repair: %v", got[0])
	}
	if st := commit(next, 3*time.Hour); st.TableGets[view] != 0 || st.DDL[view] != 0 {
		t.Errorf("second commit of the process: %d view reads, %d view DDL; want none", st.TableGets[view], st.DDL[view])
	}
	if st := commit(b.second(t), 4*time.Hour); st.TableGets[view] != 1 || st.DDL[view] != 0 {
		t.Errorf("a new process, view in place: %d view reads, %d view DDL; want 1 and 0", st.TableGets[view], st.DDL[view])
	}

	// A long-running process trusts what it knows for viewRecheck, then
	// reads the view again and repairs it.
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	cfg := b.cfg
	cfg.Now = func() time.Time { return *now.Load() }
	long, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Close()
	commit(long, 4*time.Hour+time.Minute)
	if err := failed.createView(t.Context(), "v", wrong); err != nil {
		t.Fatal(err)
	}
	if st := commit(long, 4*time.Hour+2*time.Minute); st.TableGets[view] != 0 || st.DDL[view] != 0 {
		t.Errorf("within viewRecheck: %d view reads, %d view DDL; want none", st.TableGets[view], st.DDL[view])
	}
	later := start.Add(viewRecheck)
	now.Store(&later)
	if st := commit(long, 4*time.Hour+3*time.Minute); st.TableGets[view] != 1 || st.DDL[view] != 1 {
		t.Errorf("after viewRecheck: %d view reads, %d view DDL; want 1 and 1", st.TableGets[view], st.DDL[view])
	}
	if _, ok := readView(t, b, "v")[0]["secret"]; ok {
		t.Error("the long-running process left the other view in place")
	}

	// A view made before views carried a description (or edited by hand)
	// is made again once.
	ddl := viewSQL(b.cfg.Project, b.cfg.Dataset, "v", []string{"email"})
	head, rest, _ := strings.Cut(ddl, "\n")
	_, rest, _ = strings.Cut(rest, "\n")
	if err := b.sink.runDDL(t.Context(), "old view", "view", head+" AS\n"+rest); err != nil {
		t.Fatal(err)
	}
	if st := commit(b.second(t), 5*time.Hour); st.DDL[view] != 1 {
		t.Errorf("a view without description: %d view DDL, want 1", st.DDL[view])
	}
}

// revisionOf reads form's stored revision.
func revisionOf(t *testing.T, b *bundle, form string) int64 {
	t.Helper()
	return readState(t, b.sink, form)[form].Revision
}

// TestTableInTheViewsPlace: someone made a table under the name of a
// form's view. The view cannot be made, but the form's rows are committed
// all the same (the view is derived from them), and the commit says so in
// the form's counts; once the table is gone, the next commit makes the view.
func TestTableInTheViewsPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	client, err := bq.NewClient(t.Context(), b.cfg.Project, clientOptions(b.fake)...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	table := client.Dataset(b.cfg.Dataset).Table(sqlname.ViewName("f"))
	if err := table.Create(t.Context(), &bq.TableMetadata{Schema: bq.Schema{{Name: "note", Type: bq.StringFieldType}}}); err != nil {
		t.Fatal(err)
	}

	rows := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
	other := []sink.Row{b.row(t, "g", 1, 1, false)}
	res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows, "email"), rows}, formRows{formState("g", other, "email"), other})
	if res["f"].Inserted != 2 || res["g"].Inserted != 1 {
		t.Errorf("counts %+v", res)
	}
	checkRows(t, b.sink, "f", rows)
	if got := readState(t, b.sink, "f")["f"]; got.Revision != 1 {
		t.Errorf("state of f %+v, want revision 1", got)
	}
	if len(readView(t, b, "g")) != 1 {
		t.Error("the other form's view was not made")
	}
	wantViewTaken(t, res["f"])
	if res["g"].View != nil {
		t.Errorf("the other form's view: %v", res["g"].View)
	}

	// The table stays: every commit tries again, and says so again.
	res = b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{state: formState("f", rows, "email")})
	wantViewTaken(t, res["f"])

	if err := table.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	res = b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{state: formState("f", rows, "email")})
	if v := readView(t, b, "f"); len(v) != 2 || v[0]["email"] != "user1@example.com" {
		t.Errorf("view after the table went: %v", v)
	}
	if res["f"].View != nil {
		t.Errorf("view made, yet the commit says %v", res["f"].View)
	}
}

// wantViewTaken checks that a commit reported form f's view as not made,
// in words that name the view and say what to do, and that do not call
// an expected situation a bug to report.
func wantViewTaken(t *testing.T, c sink.Counts) {
	t.Helper()
	var verr *viewError
	if !errors.As(c.View, &verr) {
		t.Fatalf("the commit's View = %v, want the view reported as not made", c.View)
	}
	msg := c.View.Error()
	for _, want := range []string{sqlname.ViewName("f"), "rename it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "report it") {
		t.Errorf("%q calls an expected situation a bug to report", msg)
	}
}
