// Package bigquery is formsync's BigQuery destination, a sink.Sink.
//
//	db, err := bigquery.Open(ctx, bigquery.Config{Project: "my-project", Dataset: "formsync", Location: "US"})
//	res, err := db.Commit(ctx, commit)
//
// [Open] creates what is missing (the dataset, the submissions table
// partitioned by day of created_at and clustered by form_id, sync_state,
// and a staging dataset whose tables expire) and adds the columns added
// since; once everything exists it only reads metadata. Config.Endpoint
// points the client at another server (an emulator, or the fake in
// testkit/bqfake), without credentials.
//
// A [Sink.Commit] is one load job, of every form's spool into a staging
// table of the commit's own, then one multi-statement transaction that
// checks each form's revision, MERGEs the rows into submissions and the
// states into sync_state. A transaction cancelled by a concurrent one is
// retried; a moved revision is a *sink.ConflictError. Every failure is an
// [*Error]; errors.Is tells [ErrRetryable] from the others.
//
// The sink is a sink.FileKeeper: [Sink.RecordFiles] appends where each
// file of a stored row stands to submission_file_copies with one load job
// (free), after one query checks which of the copies' rows are stored;
// readers take the newest record of each (form_id, submission_key, url)
// of a stored row. A commit that forgets rows deletes their copies in its
// transaction, Remove with Rows the form's, and the submission_files view
// shows each file's copy.
//
// The commit's plan, its upsert rules, exact numbers, job ids and retries,
// and how the SQL is tested are described in docs/bigquery.md.
package bigquery
