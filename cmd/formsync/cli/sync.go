package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/metrics"
)

func runSync(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if err := e.cfg.Validate(Need{API: true, Sink: true}); err != nil {
		return configError(e, err)
	}
	m := metrics.New()
	rep, code := syncOnce(ctx, e, m)
	if rep != nil {
		m.ObserveRun(rep, rep.CommitDuration)
	} else if code == exitFailed {
		m.ObserveRun(nil, 0)
	}
	pushMetrics(ctx, e, m)
	if rep != nil && rep.Failed() > 0 {
		return exitFailed
	}
	return code
}

// syncOnce builds everything from the configuration and runs one sync.
func syncOnce(ctx context.Context, e *env, m *metrics.Metrics) (*worker.Report, int) {
	cfg := engineConfig(e, worker.NewRequestStats(m.ObserveRequest))
	if len(cfg.Forms) == 0 {
		e.log.Warn("no form falls in this shard", "shard_index", e.cfg.ShardIndex, "shard_count", e.cfg.ShardCount)
		return nil, exitOK
	}
	client, err := newClient(e.cfg, cfg.Requests.Observe)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync: %v\n", err)
		return nil, exitUsage
	}
	dst, err := openSink(ctx, e.cfg)
	if err != nil {
		e.log.Error("cannot open the sink", "error", err.Error())
		return nil, exitFailed
	}
	defer dst.Close()
	eng, err := worker.New(client, dst, cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync: %v\n", err)
		return nil, exitUsage
	}
	rep, err := eng.Sync(ctx)
	if err != nil {
		e.log.Error("sync failed", "error", err.Error())
		return nil, exitFailed
	}
	return rep, exitOK
}
