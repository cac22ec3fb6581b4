// Package sqlite is formsync's embedded destination: one SQLite file (pure
// Go driver modernc.org/sqlite) holding the submissions table, the sync_state
// table and one view per form.
//
// Data flows like this: Open creates or migrates the schema (PRAGMA
// user_version, inside a transaction; PRAGMA application_id marks the file
// as formsync's). The worker reads each form's watermark with ReadState,
// stages a run's rows in sink.Spools and hands them to Commit, which applies
// the whole sink.Commit in ONE SQL transaction: every form's rows are
// streamed from its spool and upserted on (form_id, submission_key), every
// form's sync_state row is written, and each form's view is made again when
// its definition (stored in sqlite_schema) is not the one the form's field
// names call for. Either all of it lands or none of it does, so a
// watermark never runs ahead of the data and a retried run only repeats
// upserts that change nothing.
//
// Rows first loaded from the older API response form (no id, keyed by a
// content hash) are re-keyed in place when the form later answers with ids,
// so a form that moves from the older form to the newer one gets no
// duplicates. The reverse move (ids first, then no ids) is not detected.
// A spool of nothing but such rows is read in key order (sink.Spool's
// RowsByKey), and a spool read newest first with ids descending is read
// backwards, so that the table grows at one edge rather than everywhere.
//
// Rows are never deleted because the API stopped serving them. A commit
// marked sink.FormCommit.Reconcile stages every submission the API serves;
// the sink records their keys (after re-keying) in a temporary table of its
// connection and, after the upserts, sets deleted_at (sink.TimeLayout text,
// NULL while the submission is served) to the commit's synced_at on every
// other row of the form that has none. A row staged again, by any commit,
// has its deleted_at cleared: row by row when the form holds marked rows,
// in one statement over the temporary table in a reconcile; outside a
// reconcile, a form without marked rows pays nothing for this.
// The table keeps marked rows; the per-form views leave them out (a file
// migrated from an older schema has its views created again).
//
// Forgetting (erasure) does delete: sink.FormCommit.Forget lists keys whose
// rows are removed before the staged rows are applied, and a staged row
// whose submission key or content key has a tombstone in the state's
// state.Forgotten is skipped (checked while the spool is read ahead, off the
// statements' path), so that no later commit stores it again. Find, which
// selects the rows such a request names (by key, or by a field holding a
// given string), reads marked rows too. The pages as they were before such
// a commit, the removed rows' bytes in them, stay in the file and its
// write-ahead log until a checkpoint copies the new ones over them; Purge
// runs it to its end (secure_delete zeroes what the new pages no longer
// hold, and the overflow pages of long rows that the removal freed), or
// says that a reader of an older snapshot holds it up.
//
// sync_state's row_count counts a form's rows not marked deleted and
// deleted_count the rows marked. The sink keeps both from the stored values
// and what each commit did (rows inserted, restored, marked, forgotten,
// content-keyed twins removed), never from the committed state, and never
// by counting the table, so that a commit with nothing new reads a few
// pages however large the form. last_reconcile_at, field_policy,
// forgotten (state.Forgotten as JSON, NULL when nil) and copies
// (state.Form.Copies as a JSON object, NULL when empty) are stored as the
// commit's state gives them, and last_commit is what the commit did to the
// form's rows (its counts as a JSON object); the columns have BigQuery's
// names, so that one query reads either sink's state.
//
// Writers are serialised inside a Sink (a mutex and BEGIN IMMEDIATE), so
// callers never see SQLITE_BUSY from each other; readers run concurrently
// thanks to WAL. Times are stored as sink.TimeLayout text (UTC, exactly six
// fractional digits) so that text order is time order.
//
// Per-form views (named by sqlname.ViewName) expose one column per field name
// (named by sqlname.ColumnNames). Field names and form ids are user data: they
// only ever enter SQL as double-quoted sanitised identifiers or as escaped
// string literals. A view carries at most sqlname.MaxViewFields field columns
// (SQLite limits a view to 2000 columns); further fields stay reachable
// through the fields JSON column. A view whose name something of the user's
// holds (a table, an index) is left out: the commit succeeds without it, and
// says so in the form's sink.Counts.View, naming the view and the file, each
// time until the name is free.
package sqlite
