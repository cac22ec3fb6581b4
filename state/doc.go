// Package state holds the per-form sync state that formsync keeps beside the
// data: the watermark that says which submissions are already loaded, the sort
// order detected for the form, the total seen last time, and the outcome of the
// last run.
//
// # Watermark
//
// The API has no "since" filter and does not state its sort order, so the only
// way to find new submissions is to page and compare each one against the
// watermark. A watermark is the pair (created_at, id) of the newest submission
// loaded, plus the keys of every loaded submission that shares its
// created_at (the boundary). The boundary is what makes ties safe: several
// submissions can carry one timestamp, and the older response form has no id
// to order them by, so "newer than the watermark" means
//
//	created_at > watermark, or
//	created_at = watermark and the submission's key is not in the boundary.
//
// Timestamps are compared at millisecond precision because the two response
// forms print created_at with 6 and 3 fractional digits: a form whose base URL
// moves from the older to the newer form must still find its place.
//
// The state is written by a sink in the same transaction as the rows it
// describes, so a watermark never runs ahead of the data.
package state
