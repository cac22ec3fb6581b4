// Package worker is formsync's sync engine: it reads what is new in each
// configured form from the Forms API (a Source, in practice
// *formsapi.Client) and commits it, with every form's new watermark, to a
// Sink in one atomic commit. It also re-reads a form or a window of it on
// demand (Backfill). It declares the two-method Sink it needs; the sinks
// themselves live under sink/.
//
// # A run
//
//  1. Read every form's stored state (watermark, detected order, the total
//     seen last time, the revision the commit will assert).
//  2. Read the forms, Config.Concurrency at once, each under its own time
//     budget (Config.FormTimeout): everything a form waits on, requests,
//     retries and the rate limiter, counts against it, so one form that
//     never ends cannot hold back the others. Each form's new rows are
//     staged to its own spool on disk. With Config.PartRows set, every
//     PartRows rows of a form are handed to a goroutine that commits them
//     (a part: rows and field names, no watermark) while the form is read
//     on, one part at a time in the order handed over; a form whose part
//     is not committed fails, watermark kept. With Config.SortContentKeys
//     set, a spool of rows keyed by content keeps them sorted by key, a
//     MiB at a time (sink.Spool.SortContentKeys).
//  3. Commit every form's rows (those not committed in parts) and new
//     state at once. A form that failed records its error and keeps its
//     watermark; the others commit. When the sink refuses the commit
//     because another process committed some of its forms since their
//     state was read (sink.ErrStateConflict), the engine re-reads those
//     states, merges (a watermark never moves back, a backfill's resume
//     point is kept) and commits again.
//  4. Check completeness: the rows now stored for each form against the
//     API's total. A form short of it is read again in full, once; still
//     short, it is reported incomplete (FormReport.Missing, an error that
//     fails the run), never a silent success. Forgotten submissions and
//     copies (submissions served twice with nothing to tell them apart,
//     state.Form.Copies; copies.go) count as held.
//
// A 401 from the API ends the run at once: the token is wrong for every
// form, so no further request is made.
//
// # The page walker
//
// Sync, lookback and backfill read pages with one walker, package
// worker/pager, which knows nothing of the engine: it is given a function
// that fetches a page and one that decodes a submission, and yields the
// submissions to stage, in order, with what it learnt (the order, the
// total, the re-reads). The API has no "since" filter and does not say how
// it sorts, so the walker:
//
//   - Detects the order from page 1 (created_at of its first and last
//     submission), or, when page 1 cannot tell, from the stored order or
//     the last page.
//   - Reads in the direction in which a page moving under the reader
//     repeats a submission rather than skipping one. New submissions arrive
//     at the head of a newest-first form and push later pages down: reading
//     from page 1 on sees the pushed ones twice, which is harmless. In an
//     oldest-first form they arrive at the tail, where they move nothing,
//     while a deletion pulls every later page up: reading from the last
//     page backwards sees the pulled ones twice. So newest-first forms are
//     read forwards and oldest-first forms backwards.
//   - De-duplicates every submission against the page read just before.
//   - Detects the one case left, a deletion in a newest-first form while it
//     is read forwards: it pulls every later submission up by one, so the
//     first submission of the next page lands on the page just read and
//     would be skipped. The total dropping between two pages shows it; the
//     walker then reads the page before again (where the pulled
//     submissions now are) before going on, and the pages before that as
//     long as their first submission is one it has not read, as deep as
//     the total's fall can pull (more deletions than a page holds pull
//     submissions further up). Additions at the head push submissions the
//     other way, which only repeats them; but one that comes while the
//     pulled ones are read again pushes them back onto a page read before
//     it came. The total rising then says so, and the walker reads the
//     next page again, then those pages, until it reads them while the
//     form holds still or shrinks.
//   - Remembers, in the watermark's boundary, both the id and the content
//     key of the submissions at the watermark's millisecond, so that a form
//     answering in the older response form next time does not store them
//     again under their content keys.
//   - Checks that paging adds up on every page: the client refuses a page
//     whose current_page is not the page asked for, or whose total_pages
//     does not match ⌈total / per_page⌉; the walker refuses a page identical
//     to the one before it (a server ignoring page). Either fails the form
//     for this run, watermark kept.
//   - Yields every submission it keeps; the read stages what it yields and
//     advances the watermark over it (walk.go, read.go).
//
// A sync reads, newest-first, from page 1 until the first submission
// already loaded (older than the watermark, or in its boundary: the keys
// loaded at the watermark's millisecond, so ties are exact); oldest-first,
// from the last page back to the first page that starts with a loaded
// submission. A lookback lowers that threshold by Config.Lookback. When
// fewer new submissions turn up than the total grew by (a submission
// inserted behind the watermark), the form is read in full once.
//
// A backfill locates its window's pages by bisection on created_at, then
// walks them the same way, newest to oldest in both orders, committing
// every BackfillOptions.CheckpointRows rows with its progress (a cursor:
// the oldest created_at reached), so that an interrupted backfill resumes
// there. By default, checkpoints of rows keyed by content into a sink that
// takes them in key order hold CheckpointInterval of reading each
// (DefaultCheckpointRows). A whole-form backfill that read a form holding
// still moves the watermark forward, never back.
//
// # What is not trusted
//
// A created_at more than a day in the future is stored but does not move
// the watermark (it would hide every later submission); a submission nested
// deeper than a sink can query (sink.ErrTooDeep) is stored with empty
// fields and its raw object; a submission with no fields member is stored
// with its raw object. Each is counted in the form's report and logged.
//
// # Deletions and personal data
//
// The API has no feed of deletions. Reconcile (and a sync of a form due
// under Config.ReconcileEvery) reads every page with the same walker, then
// commits with sink.FormCommit.Reconcile: in that one transaction the sink
// upserts what was read and marks every other stored row of the form
// deleted (deleted_at), clearing the mark of rows served again. A read that
// saw fewer submissions than the API counts (copies and forgotten
// submissions counted as seen) marks nothing: the rows it missed would be
// marked by mistake. That count can add up over a skipped submission when
// submissions read were deleted during the read, so a newest-first form
// whose total fell while it was read is read a second time, and only the
// rows neither read served are marked. The completeness check counts rows
// not marked.
//
// Forget finds the rows a sink.Match selects, adds tombstones for their
// submission and content keys to the form's state (state.Forgotten, keyed
// hashes) and removes them, in one commit retried on a conflict; their
// copies are counted with the tombstones and leave state.Form.Copies. Every later
// read skips a tombstoned submission before staging it (it still moves the
// watermark: it is handled), and every sink skips one staged before the
// forget, so a commit merged after a concurrent forget stores nothing of it.
// A sink that keeps old copies of rewritten pages for a while (SQLite's
// write-ahead log) is then asked to erase them, and ForgetReport.Purge says
// when it could not yet; a forget with nothing left to remove asks again.
//
// Config.FieldPolicy rewrites each row's fields and raw object as the page
// is decoded, after the content key is computed, so that nothing it drops or
// hashes is ever staged. Its identity is stored per form: a sync refuses a
// form stored under another policy (PolicyChangedError); a reconcile or a
// whole-form backfill rewrites every row served and records the new one.
package worker
