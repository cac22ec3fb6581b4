// Package bigquery is formsync's BigQuery destination, a sink.Sink.
//
// Open connects (Config.Endpoint points the client at an emulator or at
// bqfake; the client itself ignores BIGQUERY_EMULATOR_HOST) and creates what
// is missing: the dataset in Config.Location; `submissions` (partitioned by
// DAY on created_at, clustered by form_id); `sync_state` (one row per form;
// boundary, field_names and backfill as JSON); and the staging dataset
// (Config.StagingDataset, "<dataset>_staging" by default) with a default
// table expiration of Config.StagingExpiration (6 h). Tables created by an
// earlier formsync gain the nullable columns added since (submissions: raw,
// fields_text, files_text, deleted_at; sync_state: revision,
// deleted_count, last_reconcile_at, field_policy, forgotten, last_commit,
// copies) by one schema update each, made only while a column is missing:
// old rows read them as NULL (raw as "", revision and deleted_count as 0).
// When sync_state lacks the columns added with deleted_at, Open first
// recreates the view of every form in it (SELECT form_id, field_names, then
// one CREATE OR REPLACE VIEW each), because views created before then show
// rows deleted upstream; sync_state's schema update comes after, so an Open
// interrupted in between recreates them again. When everything exists Open
// only reads metadata: no DDL in the steady state.
//
// # Deletions upstream and erasure
//
// A row's deleted_at (TIMESTAMP, NULL while the API serves the
// submission) is set by a reconcile (FormCommit.Reconcile: the commit
// stages every submission the API serves): every stored row of the form
// whose key was not staged (after re-keying) and is not marked yet gets
// deleted_at = the commit's time. Rows are never deleted by it, and a
// row staged again has its deleted_at cleared (Counts.Restored). Forget
// (FormCommit.Forget) removes stored rows by key; the tombstones that
// keep them out (State.Forgotten: keyed hashes of submission and content
// keys) are checked in Go while the spools are uploaded: a staged row
// whose submission key or content key has one is not loaded, whatever the
// commit's age (a retried commit, or one merged with a newer state,
// carries the tombstones of that state). Only the spools of forms with
// tombstones are read line by line for it. row_count counts a form's rows
// not marked deleted and deleted_count the marked ones; the sink keeps
// both from its own plan, never from the commit's state. Each form's view
// leaves out marked rows (AND deleted_at IS NULL). Find reads rows by key
// or by a field holding a JSON string, marked rows included; the value is
// not sent (BigQuery's job history keeps a query's parameters): the query
// compares SHA-256 digests of the stored values under a random salt of the
// call with the value's. A commit that forgets rows remembers them, and
// Purge (which the worker calls after each forget) deletes them from every
// staging table formsync holds (<StagingTable>_*, one DELETE each): the
// staging tables of earlier commits hold a copy of what they loaded until
// they expire.
//
// # How a commit flows
//
//  1. One SELECT reads the stored state of the commit's forms. A form whose
//     stored revision is not the one its State carries (another process
//     committed it since it was read; a form never stored is at 0) makes
//     the commit a *sink.ConflictError at once, before any job. A form
//     listed twice keeps its last state; its rows, the keys it forgets and
//     its reconcile all count.
//  2. CREATE OR REPLACE VIEW `form_<id>` for each form that is new or whose
//     field names changed (views are DDL, rate-limited, and cannot be part
//     of a transaction; they run before it). Each view's description ends
//     with a digest of its query. A Sink trusts a form's view for an hour
//     after it made it for a commit that succeeded, or read its metadata
//     (one tables.get, when it commits the form and the hour is over or
//     the form new to it) and found the description the stored field
//     names call for; otherwise it makes the view again.
//     So a view replaced by a process whose commit then failed (another
//     process may have committed other names meanwhile) is repaired by that
//     process's retry, or by the next process to commit the form, as is a
//     view without that description (made before views carried one, or
//     replaced by hand). Only the description is compared. A view that
//     cannot be made (a table of the user's under its name) does not stop
//     the commit: the form's rows are committed without it, the form's
//     sink.Counts.View says why, and the next commit tries again.
//  3. All forms' spools, concatenated and numbered line by line (a `seq`
//     column, so the commit's row order survives the load), go into ONE
//     load job into a staging table of this commit's own,
//     <StagingTable>_<commit id>, which the job creates (CREATE_IF_NEEDED)
//     and the staging dataset's default expiration deletes: nothing one
//     process loads can be merged by another (a shard, a backfill, a
//     retried commit), and no DDL is issued for it.
//  4. ONE multi-statement transaction:
//     - check that every form's stored revision is still the one read: a
//     SELECT that calls ERROR otherwise (an ASSERT would do, but the
//     transactions page lists SELECT and DML as the statements a
//     transaction takes, and ASSERT is not among them). It fails with
//     the message formsync_state_conflict, which the sink
//     turns into a *sink.ConflictError naming the forms whose revision
//     moved, after re-reading them);
//     - when a form forgets or reconciles: a temp table
//     `_formsync_forgotten` counting, per form, the stored rows the
//     @forget keys name (live and marked apart), then their DELETE;
//     - a temp table `_formsync_plan` with one row per staged key: its
//     last version (highest seq), the number of changes between its
//     versions in this commit, whether the stored row (or the
//     content-keyed twin) is marked deleted, and the action against the
//     stored row (insert, update, rekey from a content-keyed twin,
//     restore: identical but marked, none), so that counts equal the
//     SQLite sink's row-by-row apply;
//     - the submissions MERGE, whose source has ONE match key per row: the
//     row's own key, plus, through UNION ALL, a second row keyed by the
//     content-keyed twin to re-key or delete. The ON clause is therefore
//     form_id and key equality, which BigQuery runs as a join on equality
//     (the former `key = k OR key = legacy_key` left it only form_id).
//     Every row it writes gets deleted_at = NULL; a restore writes only
//     that (and synced_at);
//     - when a form forgets or reconciles: a temp table
//     `_formsync_reconciled` counting, per reconciling form, its stored
//     rows not marked and whose key is not in the plan (NOT EXISTS), then
//     the UPDATE setting their deleted_at = @synced_at (same condition, same
//     snapshot: the count is the rows it marks); and `_formsync_counts`,
//     the plan's per-form counts with the forgotten and reconciled ones;
//     - the sync_state MERGE from the @states parameter, row_count =
//     previous + inserted + restored - live rows forgotten, marked or
//     removed as twins, deleted_count = previous + marked - restored -
//     marked rows forgotten or removed as twins, revision = the revision
//     read + 1, last_commit = the commit id and the form's counts;
//     - COMMIT, then a SELECT of the per-form counts (inserted, updated,
//     restored, deleted, forgotten) from the plan, or from
//     `_formsync_counts`.
//
// BigQuery may end the job in error after the COMMIT (the SELECT failed),
// and runJob then reruns the script, whose revision check fails on the revisions
// the first run moved; or the job's results may be unreadable. Either way
// the states carry the answer: a failed commit reads the forms'
// last_commit, and when it names this commit (its id is unique, see
// commitID), the commit is done and its counts are there.
//
// A commit with no rows runs no load job and no submissions MERGE: only a
// transaction with the revision check and the sync_state MERGE, and, when a form
// forgets or reconciles, the statements above without the plan (a
// reconcile that stages nothing marks every row of its form). The
// forget and reconcile statements are rendered only into commits that
// forget or reconcile: a plain sync runs the statements it always ran.
// Every commit writes its forms' states, even when only LastSuccessAt
// changed: the revision is the token the next commit (this process's or
// another's) is checked against.
//
// What each commit reads of `submissions`: the wide columns (fields,
// files, raw) only in the partitions of the batch's created_at range,
// widened to whole milliseconds; the key columns of the commit's forms
// (clustering prunes to them) outside it, because a later version of a
// submission may move its created_at anywhere, and a stored row of a staged
// key found outside the range has by definition changed its created_at's
// millisecond: it is updated without comparing its values. The MERGE's ON
// clause and WHEN clauses reference only narrow target columns (form_id,
// submission_key, submission_id, created_at); a staged raw replaces the
// stored one through a clause of its own rather than COALESCE(p.raw,
// t.raw), which would read every stored raw of the forms.
//
// # Upsert rules (the same as the SQLite sink's)
//
// Rows are keyed by (form_id, submission_key). A staged row identical to its
// stored twin changes nothing, unless the stored row is marked deleted
// upstream: then only its deleted_at is cleared (counted in Restored, not in
// Updated). A later version (is_spam, fields, files, raw or created_at's
// millisecond differ) replaces every column, created_at included, and clears
// deleted_at; within one millisecond the stored created_at is kept, because
// the newer response form prints milliseconds where a row loaded from the
// older one has microseconds. A row with an id whose content-keyed twin
// (stored from the older response form: submission_id NULL, submission_key =
// its ContentKey) exists is re-keyed to the id (keeping the twin's
// created_at), counted in Updated, never duplicated; if the id key is stored
// too, the twin is deleted. A submission staged in several versions (edited
// while its pages were read) is re-keyed from the twin of its first
// version when one is stored, as the SQLite sink's row-by-row apply finds
// it; else its first version is inserted and the twin of its last is
// deleted (the plan's claim_key, later_twin), as SQLite deletes the twin
// of a later version once the id is stored; of two submissions claiming
// one twin, the one staged first takes it. The twin may be staged in the same commit: a
// row without an id staged before a row with an id and the same ContentKey
// is taken over by it (the plan marks it superseded), so the submission is
// stored once, under its id, with the twin's created_at, and counted as the
// SQLite sink counts it (inserted, then re-keyed); staged after it, the row
// without an id is a twin of its own, and a stored twin that the row with
// an id removed (its id key stored) is the stored row again: upserted as
// any row, counted only when it changed or was marked, never as inserted.
// Versions of one submission within a commit apply in the commit's order:
// the last one is stored, and each change between them counts as an
// update.
//
// # Exact values
//
// `raw`, the submission object exactly as the API sent it, is a STRING
// column: BigQuery's JSON type holds a number as an INT64, a UINT64 or a
// FLOAT64, so a JSON column could not keep `123456789012345678901234567890`
// or `1.000000000000000000001` as sent, and raw exists to keep everything
// as sent. `fields` and `files` stay JSON (analysts query them with JSON
// functions and the views read them), stored with SAFE.PARSE_JSON(...,
// wide_number_mode => 'round'), which is NULL where a number is beyond
// FLOAT64's range (1e400): 'round' fails on it, and one such value would
// fail every commit that carries it. Where SAFE.PARSE_JSON(..., 'exact') fails,
// i.e. a number that JSON cannot hold exactly, the exact text goes to
// fields_text / files_text (NULL otherwise), and ReadRows, and every
// comparison, read COALESCE(fields_text, TO_JSON_STRING(fields)). Ids travel
// as strings in the NDJSON (sink.Spool writes them so), so the loader never
// rounds an id beyond 2^53. The views' JSON_VALUE reads the JSON column: a
// field holding such a wide number shows its rounded value there.
//
// # Concurrency and retries
//
// BigQuery cancels a transaction that mutates a table another running
// transaction mutates ("Transaction is aborted due to concurrent update
// against table ...", or, for conflicting mutating DML, "Could not
// serialize access to table ... due to concurrent update"; reason
// invalidQuery: the reason is shared with real query errors, so the
// messages' fixed fragments tell them apart). Shards
// and a backfill committing together hit this. The sink waits (exponential
// backoff with jitter), re-reads the revisions (a moved one ends the commit
// with a *sink.ConflictError: the caller re-reads its state and merges) and
// runs the transaction again under a new job id; the plan is built inside
// the transaction from the tables as they are then. Config.
// MaxConcurrentRetries bounds it; after that the error is
// ErrConcurrentUpdate.
//
// Job ids are the commit id (a digest of the commit plus a random part, so
// no other call can hold them) and a suffix per step and attempt. The
// client never retries an upload from a reader, and retries a query job's
// insert by itself on 5xx; either way a 409 duplicate on one of these ids
// answers a job this commit created, and the sink attaches to it
// (JobFromIDLocation) instead of starting another. A job that ran and
// failed transiently is retried under the next id. A job whose status
// cannot be read (jobs.get failing beyond its retries) is never replaced:
// it may still be running, and a second identical transaction must not
// start beside it; the commit fails saying so. A job still running after
// Config.JobTimeout is cancelled (jobs.cancel) before the commit fails:
// left running, a transaction would have every later commit of its forms
// cancelled for a concurrent update until it ended. A commit whose caller
// gives up (its context ends) leaves its job running: it may yet commit.
// Job.Wait returns nil for a failed job, so the sink polls the status
// itself and checks its error.
//
// # An unreachable BigQuery
//
// The client retries refused connections and 5xx without end and leaves an
// unanswered request waiting for ever. So the sink sends every request
// through a transport of its own (credentials included, against Google's
// endpoint) that bounds the dial and the wait for a response's headers by
// Config.Timeout (the wait starts once the request is sent: a large upload
// is not cut off while it goes out), and runs every operation (Open,
// OpenReadOnly, ReadState, ReadRows, Find, Commit) under a watchdog: once
// the operation's requests have only failed for Config.Timeout, it ends
// with an error naming the endpoint that is ErrUnavailable and
// ErrRetryable. A long job does not trip it: its polls are answered. Each
// failed request is told to Config.Observer (formsync logs it as a retry).
// A commit so ended is all or nothing like any other: a transaction that
// BigQuery started before the outage may still commit, and the next
// run's revision check sees it.
//
// # Statements
//
// All SQL lives in sql.go; only identifiers validated at Open or sanitised
// by sqlname.ViewName / sqlname.ColumnNames enter the text. Values are query
// parameters, except in views (which cannot take parameters): there the
// form id and field names are printable-ASCII string literals with every
// other character escaped, and fields are read with the JSON subscript
// operator (JSON_VALUE(fields['name'])), so no character of a name is ever
// parsed as JSON path syntax; Find's field name is a parameter of that
// operator (fields[@field]). The @states ARRAY<STRUCT> parameter has no
// NULL member (how BigQuery passes one was never checked against the
// service): a missing time travels as 0001-01-01 00:00:00 UTC, BigQuery's
// smallest TIMESTAMP, and no backfill or no tombstones as "", both turned
// back into NULL by NULLIF in the statements.
//
// testdata/*.sql are the golden renderings (go test -run 'Golden|Shapes'
// -update rewrites them and bqfake/shapes.go, the fake's copy).
// TestZetaSQLAcceptsEverySQLText has Google's ZetaSQL analyzer (npm
// @fivetrandevelopers/zetasql, run by testdata/zetasql/analyze.js) analyze
// each of them, statement by statement, and views of hostile names, with
// BigQuery's column and parameter types.
//
// # Errors
//
// Every BigQuery failure is an *Error naming the table or job and saying
// what to do; errors.Is tells ErrRetryable (backendError, internalError,
// rateLimitExceeded, 5xx, transport) from ErrInvalid, ErrQuotaExceeded,
// ErrAccessDenied, ErrNotFound, ErrDuplicate and ErrConcurrentUpdate. A
// refused revision is a *sink.ConflictError (errors.Is
// sink.ErrStateConflict). Retries are bounded (Config.MaxRetries,
// Config.MaxConcurrentRetries) and respect ctx.
//
// # Testing
//
// Tests run through bqfake, an in-process REST fake of BigQuery, along the
// production path; realbq_test.go runs the same checks and the sinktest
// contract against real BigQuery when FORMSYNC_TEST_BQ_PROJECT is set.
package bigquery
