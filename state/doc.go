// Package state holds the per-form sync state that formsync keeps beside
// the data: the [Watermark] that says which submissions are already
// loaded, the sort order detected for the form, the total seen last time,
// the outcome of the last run, and the tombstones of forgotten
// submissions ([Forgotten]).
//
// A watermark is the (created_at, id) of the newest loaded submission plus
// the keys of every loaded submission in that millisecond (the boundary),
// so ties and forms without ids are exact:
//
//	w := state.Watermark{}.Advance(createdAt, id, key)
//	if w.IsNew(s.CreatedAt, s.Key) { ... }   // not loaded yet
//	if w.IsOlder(s.CreatedAt) { ... }        // loaded, and so is all behind it
//
// A run advances it with a [WatermarkBuilder]; two writers' watermarks
// join with [Watermark.Merge]. A sink writes the [Form] state in the same
// transaction as the rows it describes, so a watermark never runs ahead of
// the data. docs/design.md explains the rules.
package state
