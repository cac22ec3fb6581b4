package bigquery

import (
	"errors"
	"testing"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/testkit/enginetest"
)

// TestViewsOnATableRequiringAPartitionFilter: on a submissions table made
// with require_partition_filter = true, the query an analyst starts with,
// SELECT * of a form's view and of submission_files, answers. BigQuery
// checks a view's query against the table it reads, and so does the fake:
// the views filter created_at over all of time.
func TestViewsOnATableRequiringAPartitionFilter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, cfg := openFilterRequired(t)

	const form = "contact"
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{form}, SubmissionsPerForm: 30}, s)
	h.MustSync(ctx)

	count := func(view string) int {
		t.Helper()
		it, err := s.query("SELECT * FROM " + ref(cfg.Project, cfg.Dataset, view)).Read(ctx)
		if err != nil {
			t.Fatalf("SELECT * FROM %s: %v", view, err)
		}
		n := 0
		for {
			var row map[string]bq.Value
			err := it.Next(&row)
			if errors.Is(err, iterator.Done) {
				return n
			}
			if err != nil {
				t.Fatalf("reading %s: %v", view, err)
			}
			n++
		}
	}
	if got := count(sqlname.ViewName(form)); got != 30 {
		t.Errorf("SELECT * FROM %s: %d rows, want 30", sqlname.ViewName(form), got)
	}
	count(filesView) // answers; how many files the simulator attached is its own
}
