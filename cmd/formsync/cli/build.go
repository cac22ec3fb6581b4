package cli

import (
	"context"
	"fmt"

	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// store is a sink as the commands use it.
type store interface {
	worker.Sink
	Close() error
}

// openSink opens the configured sink, creating its tables if missing.
func openSink(ctx context.Context, cfg Config) (store, error) {
	switch cfg.Sink {
	case "sqlite":
		s, err := sqlite.Open(ctx, cfg.SQLitePath)
		if err != nil {
			return nil, fmt.Errorf("opening SQLite sink %s: %w", cfg.SQLitePath, err)
		}
		return s, nil
	case "bigquery":
		return openBigQuery(ctx, cfg)
	}
	return nil, fmt.Errorf("unknown sink %q", cfg.Sink)
}

// newClient builds the API client; observe receives every request attempt.
func newClient(cfg Config, observe func(formsapi.Event)) (*formsapi.Client, error) {
	token, err := cfg.Token()
	if err != nil {
		return nil, err
	}
	return formsapi.New(formsapi.Config{
		BaseURL:        cfg.APIBaseURL,
		Token:          token,
		RequestTimeout: cfg.RequestTimeout,
		RateLimit:      cfg.RateLimit,
		MaxWait:        cfg.MaxWait,
		MaxRetryAfter:  cfg.MaxRetryAfter,
		InitialBackoff: cfg.BackoffInitial,
		MaxBackoff:     cfg.BackoffMax,
		Observer:       observe,
	})
}

// engineConfig is the engine's share of the configuration, for this shard.
func engineConfig(e *env, stats *worker.RequestStats) worker.Config {
	c := e.cfg
	return worker.Config{
		Forms:         worker.Shard(c.Forms, c.ShardIndex, c.ShardCount),
		PageSize:      c.PageSize,
		Concurrency:   c.Concurrency,
		Lookback:      c.Lookback,
		TmpDir:        c.TmpDir,
		ShutdownGrace: c.ShutdownTimeout,
		Requests:      stats,
		Logger:        e.log,
	}
}
