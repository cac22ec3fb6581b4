package metrics_test

import (
	"context"
	"net/http"
	"time"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
)

// Wiring in the long-running mode: every API attempt reaches the metrics
// through the client's observer, every run through ObserveRun, and
// Prometheus scrapes the handler.
func Example() {
	m := metrics.New()
	_ = formsapi.Config{Observer: m.ObserveRequest}

	http.Handle("/metrics", m.Handler())

	var eng *worker.Engine // built with the config above
	sync := func(ctx context.Context) {
		rep, err := eng.Sync(ctx)
		if err != nil {
			rep = nil // failed before reporting: counted as a failed run
		}
		m.ObserveRun(rep, 0)
	}
	_ = sync

	// A one-shot run pushes once at the end instead.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.Push(ctx, "http://pushgateway:9091", "formsync")
}
