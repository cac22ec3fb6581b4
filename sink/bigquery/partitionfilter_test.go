package bigquery

import (
	"strconv"
	"strings"
	"testing"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// TestWholeLifeOnATableRequiringAPartitionFilter runs everything formsync
// does to a dataset (sync, backfill, reconcile, forget, status) on a
// submissions table made with require_partition_filter = true, which the
// fake enforces as BigQuery does: a statement without a constant filter
// on created_at is refused, as the SELECT * at the start shows.
func TestWholeLifeOnATableRequiringAPartitionFilter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, cfg := openFilterRequired(t)

	_, err := s.query("SELECT * FROM " + s.t.Submissions).Read(ctx)
	if want := "without a filter over column(s) 'created_at' that can be used for partition elimination"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a query without a partition filter: err = %v, want BigQuery's refusal (%q)", err, want)
	}

	const form = "contact"
	h := enginetest.NewHarness(t, apisim.Options{Seed: 11, Variant: apisim.Newer, Forms: []string{form}, SubmissionsPerForm: 80}, s)
	h.MustSync(ctx)
	h.CheckTable(ctx, form, enginetest.Expected(t, h.Sim, form, apisim.Newer))

	if _, err := h.Engine().Backfill(ctx, form, worker.BackfillOptions{}); err != nil {
		t.Fatalf("backfill: %v", err)
	}
	h.Sim.Add(form, 5)
	h.MustSync(ctx)

	gone := h.Sim.Delete(form, 3)
	rep := h.MustReconcile(ctx, form)
	if fr := enginetest.FormReport(t, rep, form); fr.Deleted != int64(len(gone)) {
		t.Errorf("reconcile marked %d rows, want %d", fr.Deleted, len(gone))
	}

	keep := h.Sim.Submissions(form)
	key := strconv.FormatInt(keep[len(keep)/2].ID, 10)
	frep, err := h.Engine().Forget(ctx, form, sink.Match{Keys: []string{key}}, false)
	if err != nil || frep.Removed != 1 {
		t.Fatalf("forget: removed %v, %v; want 1 row", frep, err)
	}

	ro, err := OpenReadOnly(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	st, err := ro.ReadState(ctx, nil)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if got, want := st[form].Rows, int64(len(keep)-1); got != want || st[form].Deleted != int64(len(gone)) || !st[form].Forgotten.Has(key) {
		t.Errorf("status: %d rows, %d deleted, forgotten %v; want %d, %d, true", got, st[form].Deleted, st[form].Forgotten.Has(key), want, len(gone))
	}
	rows, err := ro.ReadRows(ctx, form)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(keep)-1+len(gone) {
		t.Errorf("%d rows stored, want %d (the served ones but the forgotten one, and the %d marked)", len(rows), len(keep)-1+len(gone), len(gone))
	}
}

// openFilterRequired opens the sink on a dataset whose submissions table
// was made with require_partition_filter = true, as a user may make it.
func openFilterRequired(t *testing.T) (*Sink, Config) {
	t.Helper()
	ctx := t.Context()
	_, cfg, ds := olderDataset(t, nil)
	if err := ds.Table(submissionsTable).Create(ctx, &bq.TableMetadata{
		Schema:                 submissionsSchema(),
		TimePartitioning:       &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"},
		Clustering:             &bq.Clustering{Fields: []string{"form_id"}},
		RequirePartitionFilter: true,
	}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, cfg
}
