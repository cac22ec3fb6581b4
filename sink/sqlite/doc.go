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
// form's sync_state row is written, and a form's view is re-created when its
// field names changed. Either all of it lands or none of it does, so a
// watermark never runs ahead of the data and a retried run only repeats
// upserts that change nothing.
//
// Rows first loaded from the older API response form (no id, keyed by a
// content hash) are re-keyed in place when the form later answers with ids,
// so a form that moves from the older form to the newer one gets no
// duplicates. The reverse move (ids first, then no ids) is not detected.
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
// through the fields JSON column.
package sqlite
