// Package bqfake is an in-process fake of the BigQuery REST API v2, for
// testing formsync's BigQuery sink through the real
// cloud.google.com/go/bigquery client.
//
// Start makes a fake for a test, served on a loopback port by httptest
// and closed when the test ends: point the client at
// option.WithEndpoint(URL()+"/bigquery/v2/") with
// option.WithoutAuthentication(). New makes one that opens no listener,
// for a caller that serves its Handler itself (cmd/bqfake, or a test
// that puts a handler of its own in front of it).
//
// # What it covers
//
//   - datasets.get/insert/delete (deleteContents), tables.list (one page),
//     tables.get/insert/delete,
//     tabledata.list (paged), tables.patch for appending NULLABLE columns
//     to a schema (with the etag as If-Match; any other patch is refused).
//   - Load jobs from uploads only: multipart (uploadType=multipart) and
//     resumable (uploadType=resumable, chunks with Content-Range, answered
//     with X-Http-Status-Code-Override: 308 until complete), NDJSON only,
//     WRITE_TRUNCATE / WRITE_APPEND / WRITE_EMPTY, CREATE_IF_NEEDED. Rows are
//     checked as BigQuery checks them: an unknown field ("No such field",
//     unless ignoreUnknownValues), a value of the wrong type or a missing
//     REQUIRED field fails the job (status DONE, errorResult reason
//     "invalid") and loads nothing. As in BigQuery, the errorResult only
//     counts the bad rows and says to look into errors[], which names the
//     first few problems. STRING columns accept JSON strings only.
//   - Query jobs: jobs.insert with configuration.query, jobs.query (first
//     page inline), jobs.get, jobs.getQueryResults (pageToken / startIndex /
//     maxResults; TIMESTAMP as int64 microseconds when the client asks for
//     formatOptions.useInt64Timestamp, else float seconds). A job id that
//     exists answers 409 reason "duplicate".
//   - Statements: only the fixed shapes the formsync sink sends
//     (shapes.go, generated from the sink's golden files), plus CREATE OR
//     REPLACE VIEW of the sink's view shape (its OPTIONS(description) kept
//     as the view's description, which tables.get returns) and `SELECT *
//     FROM <table or view>` for tests. A statement is recognised after
//     collapsing whitespace outside quotes and replacing each backquoted
//     project.dataset.table by `?`; string literals are decoded as GoogleSQL
//     decodes them. Each shape is executed with the same semantics on an
//     in-memory SQLite database (modernc.org/sqlite): the scripts' check of
//     the revisions (failing with its message, reason invalidQuery), the
//     commit script's plan (window functions as BigQuery's), the MERGE
//     clauses evaluated on the snapshot of matches (with BigQuery's "must
//     match at most one source row" check; Stats.MergePlan keeps SQLite's
//     EXPLAIN QUERY PLAN of the match join), the forget DELETE and the
//     reconcile UPDATE with the temp tables that count them (in the
//     variants of the commit and state scripts that have them), the state
//     MERGE, all in one SQLite transaction (all or nothing). Find's
//     JSON_TYPE(fields[@field]) = 'string' AND TO_HEX(SHA256(CONCAT(@salt,
//     JSON_VALUE(fields[@field])))) = @value_sha256 is a match on the
//     member named exactly @field (json_each) whose string has that digest
//     (computed in Go), the staging DELETE of forgotten rows deletes them,
//     and a view leaves out rows whose deleted_at is set. PARSE_JSON's wide_number_mode is
//     honoured: 'exact' fails (SAFE.: NULL) on a number no INT64, UINT64 or
//     FLOAT64 holds exactly, 'round' stores the nearest FLOAT64 and fails
//     (SAFE.: NULL) on a number beyond FLOAT64's range. Parameters
//     are bound from queryParameters, type-checked against what each shape
//     needs; ARRAY parameters (ARRAY<STRING>, ARRAY<STRUCT>) become temp
//     tables read by the translated UNNEST, and a NULL member inside a
//     STRUCT of an ARRAY is refused (never checked against the service).
//     Any other statement is refused: HTTP 400, reason invalidQuery,
//     "bqfake: unsupported statement: ...".
//   - Transactions overlap: a transaction script is registered as running
//     when its job is inserted and does its work when a poll finds it done
//     (after Options.PendingPolls polls), while other jobs come and go. A
//     transaction inserted while another running one mutates one of its
//     tables is cancelled at once with BigQuery's error ("Transaction is
//     aborted due to concurrent update against table p:d.t. Transaction ID:
//     ...", reason invalidQuery); Stats.Aborted counts them. Work is
//     applied atomically when the transaction finishes, so the outcome is
//     the serial one BigQuery's snapshot isolation gives.
//   - Faults (FailNext): a failing upload, a lost upload response (the job
//     exists: the retry gets 409), a failed load job, a failing query
//     request, a transaction failing after its first DML (rolled back), a
//     transaction's job failing after it committed (the work stays in), a
//     failing jobs.get, a failing jobs.getQueryResults, a lost jobs.insert
//     response (the job exists: the client's retry gets 409), a
//     transaction cancelled for a concurrent update, in either of
//     BigQuery's wordings ("Transaction is aborted due to concurrent
//     update ..." or "Could not serialize access to table ... due to
//     concurrent update").
//     Options.PendingPolls (SetPendingPolls) makes jobs look running for
//     a few polls.
//   - Cancellation (jobs.cancel): a running job ends DONE with reason
//     "stopped"; a transaction's work is never applied. Stats.Cancelled
//     counts them.
//     OnStatement lets a test act between a client's steps.
//   - A Front (StartFront) is a loopback server before a fake that can be
//     made to refuse connections (its port closed), accept requests and
//     never answer, or answer 503 to everything, from the start or from a
//     given request on (SetWhen); it records every request as sent, for
//     tests of what leaves the client.
//   - Counters (Stats): load and query jobs, multipart/resumable uploads,
//     DML statements (each MERGE, DELETE and UPDATE of a script, even one
//     that changes no row) and DDL (dataset/table creation, views) per
//     table, and tables.get requests (404s included) per table.
//
// # What it does not cover
//
// Authentication, IAM, quotas and rate limits (other than injected
// faults), locations (echoed, not enforced), partitioning and clustering
// (stored as metadata only), dataset default table expiration (stored, not
// enforced: tables never expire), REPEATED/RECORD columns, types other than
// STRING, JSON, INT64, FLOAT64, BOOL and TIMESTAMP, CSV/Avro/Parquet,
// loads from GCS, the Storage Read API, streaming inserts, copy/extract
// jobs, table patches other than appended columns,
// sessions, dry runs and any SQL beyond the shapes above. JSON values keep
// the text of exact numbers (BigQuery may print them differently); object
// keys are sorted. Every request is served under one lock; the lock is not
// what orders transactions (see above). A transaction whose client never
// polls it again stays running and cancels every later transaction on its
// tables, until jobs.cancel stops it. A cancelled load job's rows stay in
// its table (the fake loads when the job is created).
package bqfake
