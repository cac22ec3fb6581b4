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
	s, err := bigquery.Open(ctx, cfg.bigQuery())
	if err != nil {
		return nil, fmt.Errorf("opening BigQuery sink %s.%s: %w", cfg.BQProject, cfg.BQDataset, err)
	}
	return s, nil
}

// bigQuery is the BigQuery sink's share of the configuration.
func (c Config) bigQuery() bigquery.Config {
	var cfg bigquery.Config
	c.setLibraryFields("bigquery", &cfg)
	return cfg
}
