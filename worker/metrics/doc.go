// Package metrics exposes formsync's Prometheus metrics, on a registry of
// its own (never the global one).
//
//	m := metrics.New()
//	client, _ := formsapi.New(formsapi.Config{..., Observer: m.ObserveRequest})
//	m.ObserveRun(report, commitDuration)       // after each sync
//	http.Handle("/metrics", m.Handler())       // formsync run
//	m.PushGrouped(ctx, pushgatewayURL, "formsync", map[string]string{"shard": "0"}) // or once, at the end of a one-shot run
//
// ObserveRequest takes every API attempt (requests by status, 429s,
// backoff, latency); ObserveRun takes each worker.Report (runs, rows,
// pages, failures, last success and watermark lag per form, durations).
// Labels stay bounded: form takes the configured form ids only, status the
// HTTP statuses plus "error". docs/operations.md lists every metric.
package metrics
