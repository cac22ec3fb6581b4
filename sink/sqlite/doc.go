// Package sqlite is formsync's embedded destination, a sink.Sink: one
// SQLite file (the pure-Go driver modernc.org/sqlite) holding the
// submissions table, the sync_state table, one view per form (a typed
// column per field, docs/types.md), submission_files (a row per
// attached file, with where it stands in the user's files store) and
// submission_file_copies (sink.FileKeeper: where each file of a stored row
// was copied, removed with its row and carried to its new key by
// triggers).
//
//	db, err := sqlite.Open(ctx, "formsync.db")    // creates or migrates the schema
//	defer db.Close()
//	states, err := db.ReadState(ctx, nil)          // every form's state.Form
//	res, err := db.Commit(ctx, commit)             // one SQL transaction
//
// [Sink.Commit] applies a whole sink.Commit in one transaction: each
// form's rows are streamed from its spool and upserted on (form_id,
// submission_key), each form's sync_state row is written, and each form's
// view is made again when its field names or their types call for
// another. A commit
// carrying a stale state.Form.Revision is refused whole
// (sink.ErrStateConflict). [OpenReadOnly] opens a file for reading without
// creating, migrating or locking it (formsync status). [Sink.Purge] erases
// the old bytes of removed rows from the file and its write-ahead log.
//
// Rows re-keyed from content keys to ids, reconcile marks, forget, the
// counts it keeps and the views are described in docs/sqlite.md.
package sqlite
