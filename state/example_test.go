package state_test

import (
	"fmt"
	"time"

	"github.com/formsync/formsync/state"
)

// The watermark says which submissions are loaded. Two submissions share
// 10:05:00.000 here; the boundary keeps both keys, so a third one that
// arrives later in that same millisecond is still new.
func ExampleWatermark() {
	at := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	var w state.Watermark // zero: nothing loaded yet
	fmt.Println("empty:", w.IsZero())

	w = w.Advance(at.Add(-time.Minute), 40, "40")
	w = w.Advance(at, 41, "41")
	w = w.Advance(at, 42, "42")
	fmt.Println(w.CreatedAt.Format(time.TimeOnly), w.ID, w.Boundary)

	fmt.Println("41 new:", w.IsNew(at, "41"))                       // loaded, in the boundary
	fmt.Println("43 new:", w.IsNew(at, "43"))                       // same millisecond, not loaded
	fmt.Println("39 new:", w.IsNew(at.Add(-2*time.Minute), "39"))   // older
	fmt.Println("44 new:", w.IsNew(at.Add(time.Millisecond), "44")) // newer
	fmt.Println("older than the watermark:", w.IsOlder(at.Add(-time.Second)))
	// Output:
	// empty: true
	// 10:05:00 42 [41 42]
	// 41 new: false
	// 43 new: true
	// 39 new: false
	// 44 new: true
	// older than the watermark: true
}

// A run advances the watermark over every submission it stages with a
// builder, which stays linear when thousands of submissions share one
// millisecond (a bulk import). The watermark never moves back.
func ExampleWatermarkBuilder() {
	at := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	b := state.NewWatermarkBuilder(state.Watermark{})
	for id := int64(1); id <= 1000; id++ {
		b.Advance(at, id, fmt.Sprint(id))
	}
	b.Advance(at.Add(-time.Hour), 7, "7") // an older submission changes nothing
	w := b.Watermark()
	fmt.Println(w.CreatedAt.Format(time.TimeOnly), w.ID, len(w.Boundary))
	// Output:
	// 10:05:00 1000 1000
}

// Merge joins what two writers committed (a sync and a backfill): the
// newer watermark wins, and boundaries in one millisecond are joined.
func ExampleWatermark_Merge() {
	at := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	a := state.Watermark{}.Advance(at, 41, "41")
	b := state.Watermark{}.Advance(at, 42, "42")
	old := state.Watermark{}.Advance(at.Add(-time.Hour), 7, "7")
	fmt.Println(a.Merge(b).Boundary, a.Merge(old).Boundary)
	// Output:
	// [41 42] [41]
}
