package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
)

// openBigQuery opens the BigQuery sink. Every commit, whatever the process
// or shard, loads into a staging table of its own in <dataset>_staging (the
// sink's defaults), so concurrent pods never merge each other's rows.
func openBigQuery(ctx context.Context, cfg Config) (sink.Sink, error) {
	s, err := bigquery.Open(ctx, cfg.bigQuery())
	if err != nil {
		return nil, fmt.Errorf("opening BigQuery sink %s.%s: %w", cfg.BQProject, cfg.BQDataset, err)
	}
	return s, nil
}

// bigQuery is the BigQuery sink's share of the configuration.
func (c Config) bigQuery() bigquery.Config {
	return bigquery.Config{
		Project:    c.BQProject,
		Dataset:    c.BQDataset,
		Location:   c.BQLocation,
		Endpoint:   c.BQEndpoint,
		Timeout:    c.BQTimeout,
		JobTimeout: c.BQJobTimeout,
		PartRows:   c.BQPartRows,
		Observer:   c.bqObserve,
		Logger:     c.bqLogger,
	}
}

// logBigQueryRetry says each failed BigQuery request as it happens, as
// logRetry does the API's: a BigQuery that is down shows in the log while
// formsync waits on it (at most FORMSYNC_BQ_TIMEOUT), not only when the
// sync gives up.
func logBigQueryRetry(log *slog.Logger, ev bigquery.Event) {
	if ev.Left == 0 {
		return // not retried: the failure ends the step, and says so
	}
	log.Warn("BigQuery request failed; retrying",
		slog.String("endpoint", ev.Endpoint), slog.String("request", ev.Method+" "+ev.Path), slog.Int("status", ev.Status),
		slog.Float64("failing_for_seconds", ev.Down.Seconds()), slog.Float64("gives_up_in_seconds", ev.Left.Seconds()),
		slog.String("error", ev.Err.Error()))
}
