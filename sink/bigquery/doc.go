// Package bigquery is formsync's BigQuery destination.
//
// Open connects (Config.Endpoint points the client at an emulator or at
// bqfake; the client itself ignores BIGQUERY_EMULATOR_HOST) and creates what
// is missing: the dataset in Config.Location, `submissions` (partitioned by
// DAY on created_at, clustered by form_id, JSON fields/files), `sync_state`
// (one row per form; boundary, field_names and backfill as JSON) and the
// staging table (the schema of one sink.Spool NDJSON line; sharded runs use
// one staging table per shard). When everything exists Open only reads
// metadata: no DDL in the steady state.
//
// # How a commit flows
//
//  1. One SELECT reads the stored state of the commit's forms.
//  2. CREATE OR REPLACE VIEW `form_<id>` for each form that is new or whose
//     field names changed (views are DDL, rate-limited, and cannot be part
//     of a transaction; they run before it, so a failed commit only means
//     the view is refreshed again next time).
//  3. All forms' spools, concatenated, go into ONE load job (NDJSON,
//     WRITE_TRUNCATE into the staging table) with a job id derived from the
//     commit. The client never retries an upload from a reader, so the sink
//     does, with bounded exponential backoff: the same id while it is
//     unknown whether the job was created (a 409 duplicate then means it
//     was: the sink waits for that job), the next id once a job ran and
//     failed. A 409 on an id the commit has not sent yet means an earlier
//     call used it; the staging table may have been overwritten since, so
//     the rows are loaded again under a fresh id. Job.Wait returns nil for a
//     failed job, so the sink polls the status itself and checks its error.
//  4. ONE multi-statement transaction: a temp table `_formsync_plan`
//     classifies every (deduplicated) staged row against the stored rows
//     (insert, update, rekey, none, plus a content-keyed twin to delete),
//     the submissions MERGE applies the plan, the sync_state MERGE writes
//     the states from the @states ARRAY<STRUCT> parameter with row_count =
//     previous + inserted - twins removed, then COMMIT, then a final SELECT
//     returns the per-form counts from the same plan. The counts are computed
//     inside the transaction, from the very rows the MERGE applies, so they
//     are exact and consistent with it by construction (a SELECT run before
//     the transaction could disagree with it if anything changed between
//     the two). The plan is pruned to the batch's created_at range (widened
//     by 1 ms: a row loaded from the older response form keeps microseconds
//     the newer form does not print).
//
// A commit with no rows runs no load job and no submissions MERGE: only the
// sync_state MERGE, and only when some form's state changed in something
// other than LastSuccessAt. A run with no new rows therefore runs no load
// job and no DML at all (LastSuccessAt is then not advanced in storage).
//
// # Upsert rules (the same as the SQLite sink's)
//
// Rows are keyed by (form_id, submission_key). A staged row whose stored
// twin is identical changes nothing; one whose is_spam, fields or files
// differ is updated (synced_at = the commit's SyncedAt) and counted in
// Updated. A row with an id whose content-keyed twin (stored from the older
// response form: submission_id NULL, submission_key = its ContentKey) exists
// is re-keyed to the id, counted in Updated, never duplicated; if the id key
// is stored too, the twin is deleted. Duplicates inside a batch are
// harmless: one row per key is kept (deterministically: spam first, then the
// smallest fields/files text, since NDJSON loading keeps no line order).
//
// # Statements
//
// All SQL lives in sql.go; only identifiers validated at Open or sanitised
// by sqlname.ViewName / sqlname.ColumnNames enter the text. Values are query
// parameters, except in views (which cannot take parameters): there the
// form id and field names are printable-ASCII string literals with every
// other character escaped, and fields are read with the JSON subscript
// operator (JSON_VALUE(fields['name'])), so no character of a name is ever
// parsed as JSON path syntax. testdata/*.sql are the golden renderings
// (go test -run 'Golden|Shapes' -update rewrites them and bqfake/shapes.go,
// the fake's copy).
//
// # Errors
//
// Every BigQuery failure is an *Error naming the table or job and saying
// what to do; errors.Is tells ErrRetryable (backendError, internalError,
// rateLimitExceeded, 5xx, transport) from ErrInvalid, ErrQuotaExceeded,
// ErrAccessDenied, ErrNotFound and ErrDuplicate. Retries are bounded
// (Config.MaxRetries) and respect ctx.
//
// # Testing
//
// Tests run through bqfake, an in-process REST fake of BigQuery, along the
// production path; realbq_test.go runs the same checks and the sinktest
// contract against real BigQuery when FORMSYNC_TEST_BQ_PROJECT is set.
package bigquery
