package cli

import (
	"context"
	"flag"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/metrics"
)

func runSync(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if err := e.cfg.Validate(needs("sync")); err != nil {
		return configError(e, err)
	}
	e.progress = startProgress(e, "sync")
	m := metrics.New()
	_, code := syncOnce(ctx, e, m)
	pushMetrics(ctx, e, m)
	return code
}

// syncOnce wires the pipeline for this shard's forms, runs one sync and
// records it in m. The exit code says how it went.
func syncOnce(ctx context.Context, e *env, m *metrics.Metrics) (*worker.Report, int) {
	forms := shardForms(e.cfg)
	if len(forms) == 0 {
		e.log.Warn("no form falls in this shard", "shard_index", e.cfg.ShardIndex, "shard_count", e.cfg.ShardCount)
		return nil, exitOK
	}
	defer prepareTmpDir(e)()
	p, err := wire(ctx, e, forms, m)
	if err != nil {
		m.ObserveRun(nil, 0)
		return nil, wireFailed(e, err)
	}
	defer p.Close()
	rep, err := p.engine.Sync(ctx)
	e.progress.done()
	if err != nil {
		e.log.Error("sync failed", "error", err.Error())
		m.ObserveRun(nil, 0)
		return nil, exitFailed
	}
	m.ObserveRun(rep, rep.CommitDuration)
	if logInterrupted(ctx, e, rep, false) {
		return rep, exitFailed // not completed: the next run (or the Job's retry) finishes it
	}
	if rep.Failed() > 0 {
		return rep, exitFailed
	}
	return rep, exitOK
}
