package cli

import (
	"context"
	"errors"
)

func openBigQuery(ctx context.Context, cfg Config) (store, error) {
	return nil, errors.New("the BigQuery sink is not built yet")
}
