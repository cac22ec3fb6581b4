package bigquery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/sinktest"

	bq "cloud.google.com/go/bigquery"
)

// realConfig returns a configuration for real BigQuery (Application
// Default Credentials), or skips the test.
func realConfig(t *testing.T) Config {
	t.Helper()
	project := os.Getenv("FORMSYNC_TEST_BQ_PROJECT")
	if project == "" {
		t.Skip("FORMSYNC_TEST_BQ_PROJECT is not set: skipping the real-BigQuery suite")
	}
	return Config{
		Project:      project,
		Dataset:      os.Getenv("FORMSYNC_TEST_BQ_DATASET"),
		Location:     os.Getenv("FORMSYNC_TEST_BQ_LOCATION"),
		PollInterval: 500 * time.Millisecond,
	}
}

// openReal opens a sink on a dataset of its own (deleted at the end)
// unless FORMSYNC_TEST_BQ_DATASET names one.
func openReal(t *testing.T, cfg Config) *Sink {
	t.Helper()
	own := cfg.Dataset == ""
	if own {
		cfg.Dataset = fmt.Sprintf("formsync_test_%d", time.Now().UnixNano())
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if own {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.client.Dataset(cfg.Dataset).DeleteWithContents(ctx); err != nil {
				t.Errorf("deleting dataset %s: %v", cfg.Dataset, err)
			}
		}
		s.Close()
	})
	return s
}

func TestRealBigQuery(t *testing.T) {
	t.Parallel()
	cfg := realConfig(t)
	s := openReal(t, cfg)
	b := &bundle{sink: s, cfg: s.cfg, t0: time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)}

	var older, newer []sink.Row
	for i := range 4 {
		older = append(older, b.row(t, "real", -1, i, false))
		newer = append(newer, b.row(t, "real", int64(10+i), i, i == 2))
	}
	if res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("real", older, "email"), older}); res["real"].Inserted != 4 {
		t.Fatalf("insert: %+v", res)
	}
	if res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("real", older, "email"), older}); res["real"] != (sink.Counts{}) {
		t.Errorf("re-commit counted %+v", res)
	}
	res := b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("real", newer, "email", "message"), newer})
	if res["real"] != (sink.Counts{Updated: 4}) {
		t.Errorf("re-key: %+v, want 4 updated", res["real"])
	}
	want := make([]sink.Row, len(newer))
	for i, r := range newer {
		r.CreatedAt = older[i].CreatedAt
		want[i] = r
	}
	checkRows(t, s, "real", want)
	if got := readState(t, s, "real")["real"].Rows; got != 4 {
		t.Errorf("rows = %d, want 4", got)
	}
}

func TestRealBigQueryContract(t *testing.T) {
	t.Parallel()
	cfg := realConfig(t)
	// Every contract test needs an empty sink: a dataset of its own.
	cfg.Dataset = ""
	sinktest.Run(t, func(t *testing.T) sinktest.Sink { return openReal(t, cfg) }, sinktest.Tunes, sinktest.Purges, sinktest.ChecksViews, sinktest.KeepsFiles)
}

// TestRealBigQueryConcurrentFirstCommits commits the first rows of a new
// form from two processes at once. Both see no state and pass the
// transaction's revision check; the design relies on BigQuery cancelling
// one of two transactions that MERGE into the same tables, whereupon the cancelled one
// re-reads the state and is refused. The fake cannot say whether BigQuery
// does so when the MERGE of a new form only inserts: this checks it.
func TestRealBigQueryConcurrentFirstCommits(t *testing.T) {
	t.Parallel()
	cfg := realConfig(t)
	s := openReal(t, cfg)
	b := &bundle{sink: s, cfg: s.cfg, t0: time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)}
	other := b.second(t)
	for round := range 3 {
		form := fmt.Sprintf("race%d", round)
		var rows []sink.Row
		for i := range 5 {
			rows = append(rows, b.row(t, form, int64(i+1), i, false))
		}
		errs := make(chan error, 2)
		for _, sk := range []*Sink{s, other} {
			go func() {
				_, err := sk.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(time.Hour), Forms: []sink.FormCommit{{State: formState(form, rows, "email"), Rows: sinktest.Spool(t, rows...)}}})
				errs <- err
			}()
		}
		committed := 0
		for range 2 {
			if err := <-errs; err == nil {
				committed++
			} else if !errors.Is(err, sink.ErrStateConflict) && !errors.Is(err, ErrConcurrentUpdate) {
				t.Errorf("%s: %v", form, err)
			}
		}
		if committed != 1 {
			t.Errorf("%s: %d of two concurrent first commits committed, want 1", form, committed)
		}
		q := s.query(fmt.Sprintf("SELECT (SELECT COUNT(*) FROM %s WHERE form_id = @form), COUNT(*), COUNT(DISTINCT submission_key) FROM %s WHERE form_id = @form",
			ref(s.cfg.Project, s.cfg.Dataset, stateTable), ref(s.cfg.Project, s.cfg.Dataset, submissionsTable)),
			bq.QueryParameter{Name: "form", Value: form})
		it, err := q.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var row []bq.Value
		if err := it.Next(&row); err != nil {
			t.Fatal(err)
		}
		states, keys, distinct := row[0].(int64), row[1].(int64), row[2].(int64)
		if states != 1 || keys != 5 || distinct != 5 {
			t.Errorf("%s: %d state rows, %d rows, %d keys; want 1, 5, 5", form, states, keys, distinct)
		}
	}
}
