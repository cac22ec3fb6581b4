// Package bqfake is an in-process fake of the BigQuery REST API v2, for
// testing formsync's BigQuery sink through the real
// cloud.google.com/go/bigquery client.
//
//	fake := bqfake.Start(t, bqfake.Options{})
//	db, err := bigquery.Open(ctx, bigquery.Config{Project: "p", Endpoint: fake.URL()})
//	fake.FailNext(bqfake.OpQuery, 503, "backendError")   // inject a fault
//	st := fake.Stats()                                   // load jobs, DML, DDL per table
//
// It serves datasets, tables, uploads (multipart and resumable), load and
// query jobs, and runs only the statements the sink sends (and SELECT *
// of a whole table or view) on an in-memory SQLite database, with
// BigQuery's semantics; any other statement is refused. Overlapping
// transactions are cancelled as BigQuery cancels them. cmd/bqfake serves
// it on loopback. docs/testing.md lists what it covers and what it does
// not.
package bqfake
