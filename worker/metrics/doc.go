// Package metrics exposes formsync's Prometheus metrics.
//
// Everything lives on the Metrics' own registry, never the global one, so
// that tests and several workers in one process do not collide. Data flows
// in from two places:
//
//   - ObserveRequest takes every API attempt from the formsapi client, as
//     its Observer (usually through worker.NewRequestStats(m.ObserveRequest)),
//     retries and 429s included: request counts by status, rate limiting,
//     backoff waited and request latency.
//   - ObserveRun takes the worker.Report of each sync: runs by result, rows
//     inserted and updated, pages, failures, last success and watermark lag
//     per form, run and commit durations.
//
// and out through two: Handler serves the registry for scraping in the
// long-running mode; Push sends it to a Pushgateway at the end of a one-shot
// run (Kubernetes CronJob), which lives too briefly to be scraped.
//
// Label cardinality stays bounded: form takes the configured form ids only,
// status the HTTP status codes the API answers plus "error" for attempts
// that got no response.
package metrics
