package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
	"github.com/formsync/formsync/worker/schedule"
	"github.com/formsync/formsync/worker/trigger"
)

// runScheduler is `formsync run`: sync on FORMSYNC_SCHEDULE until SIGTERM,
// serving health and metrics.
func runScheduler(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if err := e.cfg.Validate(needs("run")); err != nil {
		return configError(e, err)
	}
	defer prepareTmpDir(e)()
	m := metrics.New()
	forms := shardForms(e.cfg)
	if len(forms) == 0 {
		// As a one-shot sync of an empty shard succeeds, a pod of one
		// stays up, healthy, rather than exiting into a restart loop.
		e.log.Warn("no form falls in this shard: serving health and metrics, syncing nothing", "shard_index", e.cfg.ShardIndex, "shard_count", e.cfg.ShardCount)
		return idle(ctx, e, m)
	}
	// The port first: a busy or unusable address fails before the sink is
	// opened (and a SQLite file or BigQuery dataset made for nothing), and
	// a liveness probe is answered while a slow open or migration runs;
	// /readyz says not ready until the scheduler starts.
	var ready atomic.Bool
	srv, addr, ok := serveHealth(e, &ready, m)
	if !ok {
		return exitFailed
	}
	defer srv.Close()
	// The webhook endpoint's port too, for the same reason; it queues
	// triggers from the start, synced once the scheduler runs.
	hooks, err := newHooks(e, forms, m)
	if err != nil {
		e.log.Error("cannot serve the webhook endpoint", "addr", e.cfg.TriggerAddr, "error", err.Error())
		return exitFailed
	}
	defer hooks.close()
	e.progress = startProgress(e, "sync")
	p, err := wire(ctx, e, forms, m)
	if err != nil {
		return wireFailed(e, err)
	}
	defer p.Close()

	// A rejected token stops the process: the client refuses every later
	// request once the API answered 401, and the token is read at start, so
	// only a new process (Kubernetes restarts the pod) reads a rotated
	// Secret, or tries again after a passing refusal.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	s := &syncer{e: e, p: p, m: m, stop: stopRun}
	sched, err := schedule.New(schedule.Config{
		Spec: e.cfg.Schedule,
		Run:  func(ctx context.Context) { s.scheduled(ctx, "schedule") },
		OnSkip: func(t time.Time) {
			e.log.Warn("skipping a scheduled sync: the previous one is still running", "trigger", "schedule", "scheduled", t)
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
	var triggered sync.WaitGroup
	if hooks != nil {
		triggered.Go(func() { hooks.queue.Run(ctx, s.triggered) })
	}
	e.log.Info("formsync is running", "schedule", e.cfg.Schedule, "next", sched.Next(), "sync_at_start", e.cfg.SyncAtStart,
		"forms", len(p.forms), "http_addr", addr, "webhook_addr", hooks.addr())
	var atStart sync.WaitGroup
	if e.cfg.SyncAtStart {
		// A new or restarted pod would otherwise wait up to a whole
		// schedule period (15 minutes by default) before its first sync.
		e.log.Info("syncing now, at start (FORMSYNC_SYNC_AT_START=true); then on the schedule")
		atStart.Go(func() { s.scheduled(ctx, "start") })
	}

	<-ctx.Done()
	ready.Store(false)
	code := s.shutdown(sched, srv, &atStart, &triggered)
	e.log.Info("stopped", "exit_code", code)
	return code
}

// shutdown waits, bounded, for the running sync to commit what it read
// completely, then stops the servers; it returns the exit code. busy is
// held until the end: no sync starts while the process stops.
func (s *syncer) shutdown(sched *schedule.Scheduler, srv *http.Server, atStart, triggered *sync.WaitGroup) int {
	e := s.e
	if s.busy.TryLock() {
		e.log.Info("stopping: no sync is running")
	} else {
		e.log.Info("stopping: finishing the running sync, committing what was read completely", "bound", e.cfg.ShutdownTimeout.String())
	}
	// The engine bounds the commit after the signal by ShutdownTimeout;
	// stopMargin is for what comes around it (the reading noticing the
	// cancellation, closing the server).
	stopCtx, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownTimeout+stopMargin)
	defer cancel()
	code := exitOK
	if err := sched.Stop(stopCtx); err != nil {
		e.log.Error("the running sync did not stop in time", "error", err.Error())
		code = exitFailed
	}
	if !waitTimeout(stopCtx, atStart) {
		e.log.Error("the sync at start did not stop in time")
		code = exitFailed
	}
	if !waitTimeout(stopCtx, triggered) {
		e.log.Error("the triggered sync did not stop in time")
		code = exitFailed
	}
	srv.Shutdown(stopCtx)
	if s.rejected.Load() {
		code = exitFailed
	}
	return code
}

// syncer runs the syncs of `formsync run` one at a time: the schedule's,
// the one at start and the triggered ones. busy is held by the sync
// running; the scheduler skips a tick while its own run is going. A tick
// that comes while a triggered sync (of a few forms, short) runs waits for
// it rather than being skipped: the schedule is the safety net for the
// forms no webhook named.
type syncer struct {
	e    *env
	p    *pipeline
	m    *metrics.Metrics
	stop context.CancelCauseFunc // stops the process: the token was rejected

	busy           sync.Mutex
	triggerRunning atomic.Bool
	rejected       atomic.Bool
}

// scheduled is a sync of every form: on a tick, or at start.
func (s *syncer) scheduled(ctx context.Context, why string) {
	if !s.busy.TryLock() {
		if !s.triggerRunning.Load() {
			s.e.log.Warn("skipping a scheduled sync: the previous one is still running", "trigger", why)
			return
		}
		s.busy.Lock()
	}
	defer s.busy.Unlock()
	rep, err := s.p.engine.Sync(ctx)
	s.finish(ctx, rep, err)
}

// triggered is a sync of the forms webhooks named. It waits for a running
// sync: its trigger may have come after that one read the form.
func (s *syncer) triggered(ctx context.Context, forms []string) {
	s.busy.Lock()
	defer s.busy.Unlock()
	if ctx.Err() != nil {
		return
	}
	s.triggerRunning.Store(true)
	defer s.triggerRunning.Store(false)
	s.e.log.Info("syncing forms a webhook named", "forms", forms)
	rep, err := s.p.engine.SyncForms(ctx, forms...)
	s.finish(ctx, rep, err)
}

// finish records a sync's outcome: metrics, the interruption, rejected
// tokens.
func (s *syncer) finish(ctx context.Context, rep *worker.Report, err error) {
	e := s.e
	e.progress.done()
	if err != nil {
		e.log.Error("sync failed", "error", err.Error())
		s.m.ObserveRun(nil, 0)
		return
	}
	s.m.ObserveRun(rep, rep.CommitDuration)
	logInterrupted(ctx, e, rep, false)
	// A rejected account's token fails its own forms only: the process
	// goes on for the other accounts, and reads the account's token file
	// again for the next sync.
	s.p.renewRejected(e, rep.Rejected)
	if errors.Is(rep.Fatal, formsapi.ErrUnauthorized) {
		e.log.Error("the API rejected the token: stopping, so that a restart reads it again (FORMSYNC_API_TOKEN_FILE)", "error", rep.Fatal.Error())
		s.rejected.Store(true)
		s.stop(rep.Fatal)
	}
}

// idle serves health and metrics, ready, until ctx ends: `run` with no
// form to sync.
func idle(ctx context.Context, e *env, m *metrics.Metrics) int {
	var ready atomic.Bool
	ready.Store(true)
	srv, addr, ok := serveHealth(e, &ready, m)
	if !ok {
		return exitFailed
	}
	e.log.Info("formsync is running", "forms", 0, "http_addr", addr)
	<-ctx.Done()
	ready.Store(false)
	stopCtx, cancel := context.WithTimeout(context.Background(), stopMargin)
	defer cancel()
	srv.Shutdown(stopCtx)
	return exitOK
}

// serveHealth serves /healthz, /readyz (ready) and /metrics on
// FORMSYNC_HTTP_ADDR in the background and returns the server and the
// address it listens on; ok is false, the reason logged, when it cannot.
func serveHealth(e *env, ready *atomic.Bool, m *metrics.Metrics) (srv *http.Server, addr string, ok bool) {
	ln, err := net.Listen("tcp", e.cfg.HTTPAddr)
	if err != nil {
		e.log.Error("cannot serve health and metrics", "addr", e.cfg.HTTPAddr, "error", err.Error())
		return nil, "", false
	}
	srv = &http.Server{Handler: healthMux(ready, m.Handler()), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), true
}

// hooks is the webhook endpoint of `formsync run` (FORMSYNC_TRIGGER_*):
// a server on its own address and the queue of the forms it was asked to
// sync. A nil *hooks is none.
type hooks struct {
	srv   *http.Server
	ln    net.Listener
	queue *trigger.Queue
}

// newHooks listens on FORMSYNC_TRIGGER_ADDR and serves the endpoint for
// forms, when FORMSYNC_TRIGGER_SECRET_FILE is set; nil, nil when not.
func newHooks(e *env, forms []string, m *metrics.Metrics) (*hooks, error) {
	if e.cfg.TriggerSecretFile == "" {
		return nil, nil
	}
	q := trigger.NewQueue(trigger.QueueConfig{})
	h, err := trigger.NewHandler(trigger.Config{
		Secret:  string(e.cfg.triggerSecret),
		Forms:   forms,
		Queue:   q,
		Observe: func(o trigger.Outcome) { m.ObserveTrigger(string(o)) },
		Log:     e.log,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", e.cfg.TriggerAddr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(trigger.Prefix, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10}
	go srv.Serve(ln)
	return &hooks{srv: srv, ln: ln, queue: q}, nil
}

// addr is where the endpoint listens, "" when there is none.
func (h *hooks) addr() string {
	if h == nil {
		return ""
	}
	return h.ln.Addr().String()
}

func (h *hooks) close() {
	if h != nil {
		h.srv.Close()
	}
}

// stopMargin is how long `formsync run` waits for the running sync beyond
// FORMSYNC_SHUTDOWN_TIMEOUT (which bounds the engine's commit) before it
// gives up on it. The manifests' grace period leaves at least this much
// after the timeout (deploy's shutdownMargin), so the process exits on its
// own before Kubernetes sends SIGKILL.
const stopMargin = 5 * time.Second

// waitTimeout waits for wg, or for ctx; false when ctx came first.
func waitTimeout(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// logInterrupted says, after a sync stopped by SIGTERM or SIGINT, that the
// forms it did not finish are unchanged and will be retried: their errors
// above are the interruption, not a fault of the forms or the network. A
// reconcile (reconcile set) is retried by nothing: it says to run it again.
func logInterrupted(ctx context.Context, e *env, rep *worker.Report, reconcile bool) bool {
	if ctx.Err() == nil || rep == nil {
		return false
	}
	var stopped, notCommitted []string
	committed := 0
	var partRows int64 // rows of interrupted forms committed in parts: they stay
	for _, f := range rep.Forms {
		switch {
		case f.Err != nil && errors.Is(f.Err, context.Canceled):
			stopped = append(stopped, f.FormID)
			if f.Parts > 0 {
				partRows += f.Inserted + f.Updated
			}
		case f.Err == nil && rep.CommitErr == nil:
			committed++
		case f.Err == nil:
			notCommitted = append(notCommitted, f.FormID)
		}
	}
	attrs := []any{"committed", committed, "interrupted", len(stopped), "interrupted_forms", stopped}
	if rep.CommitErr != nil && !reconcile {
		// Read completely, then the commit failed or was cut short: these
		// forms keep their watermark as much as the interrupted ones.
		attrs = append(attrs, "read_not_committed", len(notCommitted), "read_not_committed_forms", notCommitted)
		e.log.Warn("sync interrupted by a shutdown signal, will be retried: the commit did not complete, so no form of this run was committed; every form keeps its watermark (and the rows it committed in parts, if any), and the next run reads them again",
			append(attrs, "commit_error", rep.CommitErr.Error())...)
		return true
	}
	if reconcile {
		e.log.Warn("reconcile interrupted by a shutdown signal: forms read completely were reconciled and committed, the others are unchanged; run the same command again to reconcile them", attrs...)
		return true
	}
	if partRows > 0 {
		e.log.Warn("sync interrupted by a shutdown signal, will be retried: forms read completely were committed; the others keep their watermark and the rows they committed in parts, and the next run reads them",
			append(attrs, "rows_committed_in_parts", partRows)...)
		return true
	}
	e.log.Warn("sync interrupted by a shutdown signal, will be retried: forms read completely were committed, the others are unchanged and the next run reads them", attrs...)
	return true
}

// healthMux serves /healthz (the process answers), /readyz (ready: the
// sink is open and the scheduler started, and no shutdown has begun; a sync
// that hangs does not change it) and /metrics.
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

// metricsPushTimeout bounds a one-shot command's metrics push.
const metricsPushTimeout = 10 * time.Second

// pushMetrics pushes a one-shot command's metrics when a Pushgateway is
// configured; a failed push is logged, it does not fail the sync. It takes
// at most metricsPushTimeout, after a shutdown too: the manifests' grace
// period counts it (deploy/manifests_test.go).
func pushMetrics(ctx context.Context, e *env, m *metrics.Metrics) {
	if e.cfg.PushgatewayURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsPushTimeout)
	defer cancel()
	grouping := map[string]string{"shard": fmt.Sprint(e.cfg.ShardIndex)}
	if err := m.PushGrouped(ctx, e.cfg.PushgatewayURL, "formsync", grouping); err != nil && !errors.Is(err, context.Canceled) {
		e.log.Warn("cannot push metrics", "error", err.Error())
	}
}
