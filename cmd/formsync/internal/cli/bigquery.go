package cli

import (
	"context"
	"fmt"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
)

// openBigQuery opens the BigQuery sink. Every commit, whatever the process
// or shard, loads into a staging table of its own in <dataset>_staging (the
// sink's defaults), so concurrent pods never merge each other's rows.
func openBigQuery(ctx context.Context, cfg Config) (sink.Sink, error) {
	s, err := bigquery.Open(ctx, bigquery.Config{
		Project:  cfg.BQProject,
		Dataset:  cfg.BQDataset,
		Location: cfg.BQLocation,
		Endpoint: cfg.BQEndpoint,
	})
	if err != nil {
		return nil, fmt.Errorf("opening BigQuery sink %s.%s: %w", cfg.BQProject, cfg.BQDataset, err)
	}
	return s, nil
}
