package bigquery

import (
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/internal/testkit/bqfake"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
)

// TestRemoveRowsDropsTheView: a form removed with its rows loses its
// view, after the transaction; removed without them, it keeps it. A dry
// run only reads.
func TestRemoveRowsDropsTheView(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	f := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
	g := []sink.Row{b.row(t, "g", 1, 1, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", f, "email"), f}, formRows{formState("g", g, "email"), g})
	client, err := bq.NewClient(t.Context(), b.cfg.Project, clientOptions(b.fake)...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	hasView := func(id string) bool {
		t.Helper()
		_, err := client.Dataset(b.cfg.Dataset).Table(sqlname.ViewName(id)).Metadata(t.Context())
		if err != nil && !isNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !hasView("f") || !hasView("g") {
		t.Fatal("setup: the commit made no view")
	}
	b.fake.ResetStats()
	got, err := b.sink.Remove(t.Context(), sink.Removal{FormID: "f", Revision: 1, Rows: true, DryRun: true})
	if err != nil || got.Rows != 2 || !got.State {
		t.Fatalf("dry run: %+v, %v", got, err)
	}
	// Two reads: the state and the count.
	if st := b.fake.Stats(); st.QueryJobs != 2 || len(st.DML) != 0 {
		t.Errorf("a dry run ran %d query jobs and DML %v; want 2 and none", st.QueryJobs, st.DML)
	}
	for _, r := range []sink.Removal{{FormID: "f", Revision: 1, Rows: true}, {FormID: "g", Revision: 1}} {
		got, err := b.sink.Remove(t.Context(), r)
		if err != nil || got.View != nil {
			t.Fatalf("remove %+v: %+v, %v", r, got, err)
		}
	}
	if hasView("f") {
		t.Errorf("the view of a form removed with its rows is still there")
	}
	if !hasView("g") {
		t.Errorf("the view of a form whose rows stay is gone")
	}
	checkRows(t, b.sink, "f", nil)
	checkRows(t, b.sink, "g", g)
}
