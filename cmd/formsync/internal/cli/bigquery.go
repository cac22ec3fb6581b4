package cli

import (
	"context"
	"fmt"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
)

// openBigQuery opens the BigQuery sink. Each shard of a sharded run loads
// into its own staging table, so concurrent pods never overwrite each
// other's staged rows.
func openBigQuery(ctx context.Context, cfg Config) (sink.Sink, error) {
	staging := "_formsync_staging"
	if cfg.ShardCount > 1 {
		staging = fmt.Sprintf("%s_%d", staging, cfg.ShardIndex)
	}
	s, err := bigquery.Open(ctx, bigquery.Config{
		Project:      cfg.BQProject,
		Dataset:      cfg.BQDataset,
		Location:     cfg.BQLocation,
		Endpoint:     cfg.BQEndpoint,
		StagingTable: staging,
	})
	if err != nil {
		return nil, fmt.Errorf("opening BigQuery sink %s.%s: %w", cfg.BQProject, cfg.BQDataset, err)
	}
	return s, nil
}
