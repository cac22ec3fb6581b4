package bigquery

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sinktest"
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
	cfg := realConfig(t)
	// Every contract test needs an empty sink: a dataset of its own.
	cfg.Dataset = ""
	sinktest.Run(t, func(t *testing.T) sinktest.Sink { return openReal(t, cfg) })
}
