// Package sink declares what a formsync destination is and what it
// receives. A Sink keeps submissions and every form's sync state and applies
// a Commit all at once or not at all, refusing one whose state it no longer
// holds (ConflictError). A Commit carries, per form, the new state.Form and
// the Spool that staged the run's rows on disk as NDJSON; each Row is a
// submission as stored.
//
// Data flows like this: the worker decodes a page of submissions, turns each
// into a Row (NewRow derives the submission key), appends it to the form's
// Spool (a temporary NDJSON file, so memory does not grow with the number of
// rows), and at the end of the run hands every form's Spool and new
// state.Form to the destination in one Commit. A destination either applies
// all of a Commit (rows upserted on form_id + submission_key, states written)
// or none of it.
//
// A Spool gives its rows back in the order they were staged, with one
// exception: asked to (SortContentKeys), while every row of a spool is
// keyed by content (the older response form), it writes them sorted by key
// a MiB at a time, and RowsByKey merges those runs into one key order, in
// which SQLite inserts them at one edge of its table. Rows under one key always keep the order
// they were staged in, which is all that upserts depend on.
//
// A Row's fields and files are canonical JSON (AppendCanonical: keys sorted,
// the bytes encoding/json's round trip would give), because the content key
// of a submission without an id hashes them. Both the canonical form and the
// spool's lines are written by hand for speed, and fuzz tests hold them to
// encoding/json byte for byte.
//
// The destinations live in sub-packages: sqlite (the embedded default),
// bigquery, and memsink (in memory, the reference the engine is tested on).
// sinktest holds the contract every one of them passes.
package sink
