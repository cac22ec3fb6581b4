package bigquery

import (
	"encoding/json"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/testkit/bqfake"
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

// TestRemoveRowsOfAFormSpreadOverYears: a form whose rows fall on more
// days than one BigQuery job may write partitions (4,000) is removed with
// its rows all the same: its older days in DELETEs of PartDays days
// each, the rest in the removal's transaction. In one transaction, the
// fake refuses it, as BigQuery does.
func TestRemoveRowsOfAFormSpreadOverYears(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	const days = 4_200
	start := time.Date(2010, 1, 1, 12, 0, 0, 0, time.UTC)
	for from := 0; from < days; from += PartDays {
		var rows []sink.Row
		for i := from; i < min(from+PartDays, days); i++ {
			id := int64(i + 1)
			r, err := sink.NewRow("old", &id, start.AddDate(0, 0, i), false, json.RawMessage(`{"n":"x"}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		b.mustCommit(t, start.AddDate(0, 0, days), formRows{formState("old", rows, "n"), rows})
	}
	rev := readState(t, b.sink, "old")["old"].Revision
	got, err := b.sink.Remove(t.Context(), sink.Removal{FormID: "old", Revision: rev, Rows: true})
	if err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if got.Rows != days {
		t.Errorf("removed %d rows, want %d", got.Rows, days)
	}
	checkRows(t, b.sink, "old", nil)
	if st, ok := readState(t, b.sink, "old")["old"]; ok {
		t.Errorf("state left: %+v", st)
	}
}
