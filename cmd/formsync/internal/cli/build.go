package cli

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/files"
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
	// accounts is the source when the forms are read through several
	// accounts (FORMSYNC_API_TOKEN_DIR), with the observer of its clients
	// and the token each uses: renewRejected replaces a rejected one.
	accounts *worker.Accounts
	observe  func(account string, ev formsapi.Event)
	tokens   map[string]formsapi.Secret
	// files is the files store (FORMSYNC_FILES_STORE); nil when unset.
	files *files.Store
}

// Close closes the sink and the files store.
func (p *pipeline) Close() error {
	err := p.sink.Close()
	if p.files != nil {
		err = errors.Join(err, p.files.Close())
	}
	return err
}

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
	observe := func(account string, ev formsapi.Event) {
		m.ObserveRequest(ev)
		if account != "" {
			m.ObserveAccountRequest(account, ev)
		}
		logRetry(e.log, account, ev)
	}
	client, err := newSource(e.cfg, observe)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	for _, w := range e.cfg.warnings() {
		e.log.Warn(w)
	}
	// The command's Validate checked these settings, with every other
	// problem; worker.New checks them again before use.
	cfg := engineConfig(e, forms)
	dst, err := open(ctx, e.cfg)
	if err != nil {
		return nil, err
	}
	warnUnseenPins(ctx, e.log, dst, e.cfg.pins, forms)
	fk, store, err := openFiles(ctx, e.cfg)
	if err != nil {
		dst.Close()
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	cfg.Files = fk
	// The sink says how it is best written to: SQLite in parts, rows
	// keyed by content sorted; BigQuery, whose every commit spends its
	// tables' daily quotas, in parts only for a large read
	// (FORMSYNC_BQ_PART_ROWS), one commit per run otherwise.
	eng, err := worker.New(client, dst, cfg.TunedFor(dst))
	if err != nil {
		dst.Close()
		if store != nil {
			store.Close()
		}
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	p := &pipeline{engine: eng, sink: dst, metrics: m, forms: forms, observe: observe, files: store}
	if acc, ok := client.(*worker.Accounts); ok {
		p.accounts, p.tokens = acc, maps.Clone(e.cfg.accountTokens)
	}
	return p, nil
}

// renewRejected gives each account whose token the API rejected a new
// client when its token file now holds another token (a rotated Secret;
// the kubelet updates a mounted Secret's files in place). An account whose
// file is unchanged keeps its client, which fails the account's forms at
// once without a request: the token is known to be refused.
func (p *pipeline) renewRejected(e *env, rejected map[string]error) {
	if p.accounts == nil || len(rejected) == 0 {
		return
	}
	tokens, err := readTokenDir(e.cfg.APITokenDir)
	for _, name := range slices.Sorted(maps.Keys(rejected)) {
		tok, ok := tokens[name]
		switch {
		case !ok || tok == p.tokens[name]:
			e.log.Error("the API rejected the account's token and its token file holds no other: its forms fail until the file (the Secret's key) holds a valid token; the other accounts sync on",
				"account", name, "file", filepath.Join(e.cfg.APITokenDir, name), "error", errors.Join(rejected[name], err).Error())
			continue
		}
		if e.redactor != nil {
			e.redactor.Add(tok) // before anything can log it
		}
		client, cerr := formsapi.New(e.cfg.clientConfig(tok, func(ev formsapi.Event) { p.observe(name, ev) }))
		if cerr == nil {
			cerr = p.accounts.Replace(name, client)
		}
		if cerr != nil {
			e.log.Error("cannot use the account's new token", "account", name, "error", cerr.Error())
			continue
		}
		p.tokens[name] = tok
		e.log.Info("the account's token file holds a new token: the next sync uses it", "account", name)
	}
}

// warnUnseenPins warns of the pins (FORMSYNC_FIELD_TYPES) of forms for
// fields the form's stored state has never had, ignoring case as pins do:
// a misspelt field name. Such a pin is kept, and applies once a field of
// that name arrives. A form never read has no field names to compare, and
// is not warned of; the store is read only when forms have pins, and a
// failure to read it is left to the run, which reads it again.
func warnUnseenPins(ctx context.Context, log *slog.Logger, dst sink.Sink, pins map[string]fieldtype.Set, forms []string) {
	pinned := slices.DeleteFunc(slices.Clone(forms), func(f string) bool { return len(pins[f]) == 0 })
	if len(pinned) == 0 {
		return
	}
	states, err := dst.ReadState(ctx, pinned)
	if err != nil {
		return
	}
	for _, form := range pinned {
		st, ok := states[form]
		if !ok || len(st.FieldNames) == 0 {
			continue
		}
		var unseen []string
		for _, field := range slices.Sorted(maps.Keys(pins[form])) {
			if !slices.ContainsFunc(st.FieldNames, func(n string) bool { return strings.EqualFold(n, field) }) {
				unseen = append(unseen, field)
			}
		}
		if len(unseen) > 0 {
			log.Warn("FORMSYNC_FIELD_TYPES pins fields this form has never had: check their names (a pin applies, ignoring case, once a field of that name arrives)",
				"form", form, "fields", unseen)
		}
	}
}

// logRetry says when a failed API request is about to be tried again, so
// that an API that is down shows in the log while the worker waits on it,
// not only when a form gives up minutes later. A 429 is said at debug
// level: the rate limit is expected and its count is in every form's
// summary (rate_limited). The attempt that gives up is said by the form's
// failure.
func logRetry(log *slog.Logger, account string, ev formsapi.Event) {
	if ev.Err == nil || ev.Wait == 0 {
		return
	}
	attrs := []any{slog.String("form", ev.FormID)}
	if account != "" {
		attrs = append(attrs, slog.String("account", account))
	}
	attrs = append(attrs,
		slog.Int("page", ev.Page), slog.Int("attempt", ev.Attempt),
		slog.Int("status", ev.Status), slog.Float64("retry_in_seconds", ev.Wait.Seconds()), slog.String("error", ev.Err.Error()),
	)
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
		return memory.New(), nil
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
