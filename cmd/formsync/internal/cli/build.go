package cli

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"net/http"

	"github.com/formsync/formsync/internal/testkit/memsink"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
)

// pipeline is the API client, the sink and the engine, wired together
// from the configuration: what sync, run, backfill and demo share.
type pipeline struct {
	engine  *worker.Engine
	sink    sink.Sink
	metrics *metrics.Metrics
	forms   []string
}

// Close closes the sink.
func (p *pipeline) Close() error { return p.sink.Close() }

// errConfig marks a wiring failure caused by the configuration (exit 2)
// rather than by the world (exit 1).
var errConfig = errors.New("configuration")

// wire builds the pipeline for forms from e.cfg. Every request the client
// makes is observed by m. A failure is either configuration (errors.Is
// errConfig) or opening the sink.
func wire(ctx context.Context, e *env, forms []string, m *metrics.Metrics) (*pipeline, error) {
	return wireSink(ctx, e, forms, m, openSink)
}

// wireSink is wire with the sink opened by open.
func wireSink(ctx context.Context, e *env, forms []string, m *metrics.Metrics, open func(context.Context, Config) (sink.Sink, error)) (*pipeline, error) {
	client, err := newClient(e.cfg, func(ev formsapi.Event) {
		m.ObserveRequest(ev)
		logRetry(e.log, ev)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	for _, w := range e.cfg.warnings() {
		e.log.Warn(w)
	}
	cfg := engineConfig(e, forms)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	dst, err := open(ctx, e.cfg)
	if err != nil {
		return nil, err
	}
	// The sink says how it is best written to (SQLite: in parts, rows
	// keyed by content sorted); BigQuery, whose every commit spends its
	// tables' daily quotas, says nothing and gets one commit per run.
	eng, err := worker.New(client, dst, cfg.TunedFor(dst))
	if err != nil {
		dst.Close()
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	return &pipeline{engine: eng, sink: dst, metrics: m, forms: forms}, nil
}

// logRetry says when a failed API request is about to be tried again, so
// that an API that is down shows in the log while the worker waits on it,
// not only when a form gives up minutes later. A 429 is said at debug
// level: the rate limit is expected and its count is in every form's
// summary (rate_limited). The attempt that gives up is said by the form's
// failure.
func logRetry(log *slog.Logger, ev formsapi.Event) {
	if ev.Err == nil || ev.Wait == 0 {
		return
	}
	attrs := []any{
		slog.String("form", ev.FormID), slog.Int("page", ev.Page), slog.Int("attempt", ev.Attempt),
		slog.Int("status", ev.Status), slog.Float64("retry_in_seconds", ev.Wait.Seconds()), slog.String("error", ev.Err.Error()),
	}
	if ev.Status == http.StatusTooManyRequests {
		log.Debug("rate limited by the API; retrying", attrs...)
		return
	}
	log.Warn("API request failed; retrying", attrs...)
}

// wireFailed reports a wire error on the one channel failures take (the
// logger) and returns the exit code it deserves.
func wireFailed(e *env, err error) int {
	if errors.Is(err, errConfig) {
		e.log.Error("invalid configuration", "error", err.Error())
		return exitUsage
	}
	e.log.Error("cannot open the sink", "error", err.Error())
	return exitFailed
}

// openSink opens the configured sink, creating its tables if missing.
func openSink(ctx context.Context, cfg Config) (sink.Sink, error) {
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

// openDryRunSink opens the sink for a backfill --dry-run, which reads the
// form's state and writes nothing: it creates and migrates nothing (see
// openStatusSink), and a store no sync has created reads as empty, as it
// would be once created.
func openDryRunSink(ctx context.Context, cfg Config) (sink.Sink, error) {
	s, err := openStatusSink(ctx, cfg)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, bigquery.ErrNotFound) {
		return memsink.New(), nil
	}
	return s, err
}

// newClient builds the API client; observe receives every request attempt.
func newClient(cfg Config, observe func(formsapi.Event)) (*formsapi.Client, error) {
	token, err := cfg.Token()
	if err != nil {
		return nil, err
	}
	return formsapi.New(cfg.clientConfig(token, observe))
}

// engineConfig is the engine's share of the configuration.
func engineConfig(e *env, forms []string) worker.Config {
	cfg := e.cfg.engineConfig(forms, e.log)
	if e.progress != nil {
		cfg.Progress = e.progress.update
	}
	return cfg
}

// shardForms is this pod's share of the configured forms.
func shardForms(cfg Config) []string {
	return worker.Shard(cfg.Forms, cfg.ShardIndex, cfg.ShardCount)
}
