// Package pager walks the pages of one form of the Forms API and yields
// its submissions in the order a reader must stage them. It knows nothing
// of where they go: its input is a Fetch (read page n) and a Decode (the
// key and created_at of a submission, and what the reader makes of it);
// its output is a sequence of Events (iter.Seq2) and, for a Scan, Facts.
//
// The API has no "since" filter and does not say how it sorts, so:
//
//   - Detect tells the order from page 1 (created_at of its first and last
//     submission), or, when page 1 cannot tell, from the stored order or
//     the last page.
//   - A Walk reads in the direction in which a page moving under the
//     reader repeats a submission rather than skipping one: newest-first
//     forms forwards from page 1, oldest-first forms backwards from a high
//     page, both from newer to older submissions, until a page reaches
//     past its Bounds. It dedupes every submission against the page read
//     just before, reads pages again when the total falls under a
//     newest-first reader (a deletion pulled submissions onto pages read),
//     reads a page again while a created_at tie split at its border is
//     short of members, and refuses a page identical to the one before it
//     (a server ignoring page) or whose pagination does not add up (Check).
//   - A Scan makes the passes of a sync or a reconcile: what is new since
//     the watermark (the last page first, for an oldest-first form, whose
//     walk ends on the first page that starts with a loaded submission:
//     the overlap confirms the jump), then the whole form once more when
//     the total grew by more than the new submissions read (one was
//     inserted behind the watermark) or, for a reconcile, fell while a form
//     not oldest-first was read.
//
// Every re-read is an Event (Reread), so that the reader counts them; a
// reader that stops ranging stops the walk, and no further page is read.
package pager
