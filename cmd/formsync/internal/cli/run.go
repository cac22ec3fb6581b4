package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/formsync/formsync/worker/metrics"
	"github.com/formsync/formsync/worker/schedule"
)

// runScheduler is `formsync run`: sync on FORMSYNC_SCHEDULE until SIGTERM,
// serving health and metrics.
func runScheduler(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if err := e.cfg.Validate(Need{API: true, Forms: true, Sink: true, Sched: true}); err != nil {
		return configError(e, err)
	}
	m := metrics.New()
	p, err := wire(ctx, e, shardForms(e.cfg), m)
	if err != nil {
		return wireFailed(e, err)
	}
	defer p.Close()

	var ready atomic.Bool
	ln, err := net.Listen("tcp", e.cfg.HTTPAddr)
	if err != nil {
		e.log.Error("cannot serve health and metrics", "addr", e.cfg.HTTPAddr, "error", err.Error())
		return exitFailed
	}
	srv := &http.Server{Handler: healthMux(&ready, m.Handler()), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)

	sched, err := schedule.New(schedule.Config{
		Spec: e.cfg.Schedule,
		Run: func(ctx context.Context) {
			rep, err := p.engine.Sync(ctx)
			if err != nil {
				e.log.Error("sync failed", "error", err.Error())
				m.ObserveRun(nil, 0)
				return
			}
			m.ObserveRun(rep, rep.CommitDuration)
		},
		OnSkip: func(t time.Time) {
			e.log.Warn("skipping a scheduled sync: the previous one is still running", "scheduled", t)
		},
	})
	if err != nil {
		return configError(e, &ConfigError{Problems: []string{err.Error()}})
	}
	if err := sched.Start(ctx); err != nil {
		e.log.Error("cannot start the scheduler", "error", err.Error())
		return exitFailed
	}
	ready.Store(true)
	e.log.Info("formsync is running", "schedule", e.cfg.Schedule, "next", sched.Next(), "forms", len(p.forms), "http_addr", ln.Addr().String())

	<-ctx.Done()
	ready.Store(false)
	e.log.Info("stopping: finishing the running sync, committing what was read completely", "bound", e.cfg.ShutdownTimeout.String())
	stopCtx, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownTimeout+5*time.Second)
	defer cancel()
	code := exitOK
	if err := sched.Stop(stopCtx); err != nil {
		e.log.Error("the running sync did not stop in time", "error", err.Error())
		code = exitFailed
	}
	srv.Shutdown(stopCtx)
	return code
}

// healthMux serves /healthz (the process answers), /readyz (the sink is
// open and the scheduler is taking ticks) and /metrics.
func healthMux(ready *atomic.Bool, metricsHandler http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", metricsHandler)
	return mux
}

// pushMetrics pushes a one-shot command's metrics when a Pushgateway is
// configured; a failed push is logged, it does not fail the sync.
func pushMetrics(ctx context.Context, e *env, m *metrics.Metrics) {
	if e.cfg.PushgatewayURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	grouping := map[string]string{"shard": fmt.Sprint(e.cfg.ShardIndex)}
	if err := m.PushGrouped(ctx, e.cfg.PushgatewayURL, "formsync", grouping); err != nil && !errors.Is(err, context.Canceled) {
		e.log.Warn("cannot push metrics", "error", err.Error())
	}
}
