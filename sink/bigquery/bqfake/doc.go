// Package bqfake is an in-process fake of the BigQuery REST API v2, served
// on loopback by httptest, for testing formsync's BigQuery sink through the
// real cloud.google.com/go/bigquery client (point it at
// option.WithEndpoint(URL()+"/bigquery/v2/") and option.WithoutAuthentication()).
//
// # What it covers
//
//   - datasets.get/insert/delete (deleteContents), tables.get/insert/delete,
//     tabledata.list (paged).
//   - Load jobs from uploads only: multipart (uploadType=multipart) and
//     resumable (uploadType=resumable, chunks with Content-Range, answered
//     with X-Http-Status-Code-Override: 308 until complete), NDJSON only,
//     WRITE_TRUNCATE / WRITE_APPEND / WRITE_EMPTY, CREATE_IF_NEEDED. Rows are
//     checked as BigQuery checks them: an unknown field ("No such field",
//     unless ignoreUnknownValues), a value of the wrong type or a missing
//     REQUIRED field fails the job (status DONE, errorResult reason
//     "invalid") and loads nothing. STRING columns accept JSON strings only.
//   - Query jobs: jobs.insert with configuration.query, jobs.query (first
//     page inline), jobs.get, jobs.getQueryResults (pageToken / startIndex /
//     maxResults; TIMESTAMP as int64 microseconds when the client asks for
//     formatOptions.useInt64Timestamp, else float seconds). A job id that
//     exists answers 409 reason "duplicate".
//   - Statements: only the fixed shapes the formsync sink sends
//     (shapes.go, generated from the sink's golden files), plus CREATE OR
//     REPLACE VIEW of the sink's view shape and `SELECT * FROM <table or
//     view>` for tests. A statement is recognised after collapsing
//     whitespace outside quotes and replacing each backquoted
//     project.dataset.table by `?`; string literals are decoded as GoogleSQL
//     decodes them. Each shape is executed with the same semantics on an
//     in-memory SQLite database (modernc.org/sqlite): the commit script's
//     plan, MERGE clauses evaluated on the snapshot of matches (with
//     BigQuery's "must match at most one source row" check), the state
//     MERGE, all in one SQLite transaction (all or nothing). Parameters are
//     bound from queryParameters, type-checked against what each shape
//     needs; ARRAY parameters (ARRAY<STRING>, ARRAY<STRUCT>) become temp
//     tables read by the translated UNNEST. Any other statement is refused:
//     HTTP 400, reason invalidQuery, "bqfake: unsupported statement: ...".
//   - Faults (FailNext): a failing upload, a lost upload response (the job
//     exists: the retry gets 409), a failed load job, a failing query
//     request, a transaction failing after its first DML (rolled back), a
//     failing jobs.get. Options.PendingPolls makes jobs look running for a
//     few polls.
//   - Counters (Stats): load and query jobs, multipart/resumable uploads,
//     DML statements and DDL (dataset/table creation, views) per table.
//
// # What it does not cover
//
// Authentication, IAM, quotas and rate limits (other than injected
// faults), locations (echoed, not enforced), partitioning and clustering
// (stored as metadata only), REPEATED/RECORD columns, types other than
// STRING, JSON, INT64, FLOAT64, BOOL and TIMESTAMP, CSV/Avro/Parquet,
// loads from GCS, the Storage Read API, streaming inserts, copy/extract
// jobs, table patch/update, job cancellation, sessions, dry runs and any
// SQL beyond the shapes above. JSON values are stored as the text the
// client sent (BigQuery normalises them). Every request is served under one
// lock.
package bqfake
