package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func at(ms int, us int) time.Time {
	return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(ms)*time.Millisecond + time.Duration(us)*time.Microsecond)
}

func TestWatermarkCompare(t *testing.T) {
	t.Parallel()
	var zero Watermark
	if !zero.IsNew(at(0, 0), "a") || zero.IsOlder(at(0, 0)) {
		t.Fatal("the zero watermark must find everything new")
	}
	w := zero.Advance(at(10, 250), 7, "7").Advance(at(10, 900), 9, "9")
	tests := []struct {
		name string
		at   time.Time
		key  string
		want int
	}{
		{"newer millisecond", at(11, 0), "x", 1},
		{"same millisecond, loaded", at(10, 0), "7", 0},
		{"same millisecond, loaded (other digits)", at(10, 999), "9", 0},
		{"same millisecond, not loaded: a tie", at(10, 250), "8", 1},
		{"older millisecond", at(9, 999), "1", -1},
	}
	for _, tt := range tests {
		if got := w.Compare(tt.at, tt.key); got != tt.want {
			t.Errorf("%s: Compare = %d, want %d", tt.name, got, tt.want)
		}
	}
	if !w.IsOlder(at(9, 999)) || w.IsOlder(at(10, 0)) {
		t.Error("IsOlder must compare milliseconds")
	}
	if w.ID != 9 || !w.CreatedAt.Equal(at(10, 900)) || !slices.Equal(w.Boundary, []string{"7", "9"}) {
		t.Errorf("watermark = %+v", w)
	}
}

func TestWatermarkNeverMovesBack(t *testing.T) {
	t.Parallel()
	w := Watermark{}.Advance(at(50, 0), 5, "5")
	if got := w.Advance(at(40, 0), 4, "4"); !got.CreatedAt.Equal(w.CreatedAt) || len(got.Boundary) != 1 {
		t.Errorf("an older submission moved the watermark: %+v", got)
	}
	if got := w.Merge(Watermark{}.Advance(at(1, 0), 1, "1")); !got.CreatedAt.Equal(w.CreatedAt) {
		t.Errorf("Merge with an older watermark moved it back: %+v", got)
	}
	newer := w.Advance(at(51, 0), 6, "6")
	if !slices.Equal(newer.Boundary, []string{"6"}) {
		t.Errorf("a newer millisecond must start a new boundary: %v", newer.Boundary)
	}
	same := w.Merge(Watermark{}.Advance(at(50, 3), 8, "8"))
	if !slices.Equal(same.Boundary, []string{"5", "8"}) || same.ID != 8 {
		t.Errorf("Merge in one millisecond must join boundaries: %+v", same)
	}
	if w.Merge(Watermark{}).CreatedAt != w.CreatedAt || (Watermark{}).Merge(w).CreatedAt != w.CreatedAt {
		t.Error("Merge with zero must be the identity")
	}
}

// Boundary keys from the older response form (content hashes) do not match
// the ids the newer form gives: the same submissions count as new, and the
// sink re-keys them instead of duplicating.
func TestWatermarkAcrossResponseForms(t *testing.T) {
	t.Parallel()
	older := Watermark{}.Advance(at(10, 123), 0, "hash-a")
	newerPrecision := at(10, 0) // the newer form prints milliseconds only
	if older.IsOlder(newerPrecision) {
		t.Fatal("a submission of the watermark's millisecond printed with 3 digits must not count as older")
	}
	if !older.IsNew(newerPrecision, "41") {
		t.Fatal("an id-keyed submission in the boundary millisecond must be read again")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := New("f").Validate(); err != nil {
		t.Fatal(err)
	}
	bad := New("f")
	bad.Order = "sideways"
	if bad.Validate() == nil {
		t.Error("unknown order accepted")
	}
	bad = New("f")
	bad.Watermark.Boundary = []string{"b", "a"}
	if bad.Validate() == nil {
		t.Error("unsorted boundary accepted")
	}
	if (Form{}).Validate() == nil {
		t.Error("empty form id accepted")
	}
	// A sink looks states up by form id as text: one that is not UTF-8
	// would be stored and never found again.
	for _, id := range []string{"a\xffb", "\xc3", "caf\xe9"} {
		err := New(id).Validate()
		if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("form id %q: Validate = %v, want it refused as not UTF-8", id, err)
		}
	}
	if err := New("café").Validate(); err != nil {
		t.Errorf("UTF-8 form id refused: %v", err)
	}
	for _, c := range []Copies{{"": 1}, {"k": 0}, {"k": -1}} {
		bad = New("f")
		bad.Copies = c
		if bad.Validate() == nil {
			t.Errorf("copies %v accepted", c)
		}
	}
}

func TestCopies(t *testing.T) {
	t.Parallel()
	a := Copies{"x": 1, "y": 2}
	b := Copies{"y": 1, "z": 3}
	got := a.Merge(b)
	if want := (Copies{"x": 1, "y": 2, "z": 3}); !maps.Equal(got, want) {
		t.Errorf("Merge = %v, want %v (the larger count of each key, not the sum)", got, want)
	}
	got["x"] = 9
	if a["x"] != 1 {
		t.Error("Merge returned its receiver")
	}
	if Copies(nil).Merge(Copies{}) != nil {
		t.Error("Merge of nothing is not nil")
	}
	if n := got.Count(); n != 14 {
		t.Errorf("Count = %d, want 14", n)
	}
}

func TestBackfillJSONRoundTrip(t *testing.T) {
	t.Parallel()
	whole := Backfill{Cursor: at(3, 4), StartedAt: at(5, 6), Total: 1200,
		Watermark: Watermark{CreatedAt: at(8, 9), ID: 77, Boundary: []string{"76", "77"}}}
	for _, b := range []Backfill{{}, {Since: at(1, 2), Cursor: at(3, 4), StartedAt: at(5, 6), FieldPolicy: "0123456789abcdef0123456789abcdef"}, {Until: at(7, 0)}, whole} {
		j, err := b.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var got Backfill
		if err := got.UnmarshalJSON(j); err != nil {
			t.Fatal(err)
		}
		if !got.Since.Equal(b.Since) || !got.Until.Equal(b.Until) || !got.Cursor.Equal(b.Cursor) || !got.StartedAt.Equal(b.StartedAt) || got.FieldPolicy != b.FieldPolicy ||
			got.Total != b.Total || !got.Watermark.CreatedAt.Equal(b.Watermark.CreatedAt) || got.Watermark.ID != b.Watermark.ID || !slices.Equal(got.Watermark.Boundary, b.Watermark.Boundary) {
			t.Errorf("%s: got %+v, want %+v", j, got, b)
		}
	}
	var b Backfill
	if b.UnmarshalJSON([]byte(`{"since":"yesterday"}`)) == nil {
		t.Error("a bad time was accepted")
	}
}

func TestForgottenPending(t *testing.T) {
	t.Parallel()
	fg, err := NewForgotten()
	if err != nil {
		t.Fatal(err)
	}
	fg = fg.With(1, "stored").WithUnstored("typo", "later", "stored")
	if fg.Count != 1 || len(fg.Pending) != 2 || !fg.IsPending("typo") || !fg.IsPending("later") || fg.IsPending("stored") {
		t.Fatalf("after forget: count %d, pending %d", fg.Count, len(fg.Pending))
	}
	if !fg.Has("typo") || !fg.Has("later") {
		t.Error("a pending key has no tombstone")
	}
	if err := (Form{FormID: "f", Forgotten: fg}).Validate(); err != nil {
		t.Error(err)
	}
	// A read meets "later" (twice: a page read again): counted once.
	met := fg.Met("later", "not-forgotten").Met("later")
	if met.Count != 2 || met.IsPending("later") || !met.IsPending("typo") {
		t.Errorf("after a read met one: count %d, pending %d", met.Count, len(met.Pending))
	}
	if fg.Count != 1 || !fg.IsPending("later") {
		t.Error("Met changed its receiver")
	}
	// Stored by another writer meanwhile: what this one met is counted
	// there, once, whichever merges.
	if m := fg.MergedWith(met); m.Count != 2 || m.IsPending("later") || !m.IsPending("typo") {
		t.Errorf("merged: count %d, pending %d", m.Count, len(m.Pending))
	}
	if m := met.MergedWith(met); m.Count != 2 {
		t.Errorf("merged with itself: count %d, want 2", m.Count)
	}
	// A key forgotten after the writer read the state is not its to count.
	newer := fg.WithUnstored("newer")
	if m := newer.MergedWith(met); m.Count != 2 || !m.IsPending("newer") {
		t.Errorf("merged over a newer forget: count %d, pending newer %v", m.Count, m.IsPending("newer"))
	}
	bad := fg.Clone()
	bad.Pending = append(bad.Pending, "ff")
	if err := (Form{FormID: "f", Forgotten: bad}).Validate(); err == nil {
		t.Error("a pending tombstone that is not a tombstone was accepted")
	}
}

// advanceByCopy is the watermark's rule written plainly, as Advance once
// was, one submission at a time, copying the boundary to insert a key: the
// model the builder is held to, and the quadratic cost it avoids.
func advanceByCopy(w Watermark, createdAt time.Time, id int64, key string) Watermark {
	createdAt = createdAt.UTC().Truncate(time.Microsecond)
	if w.IsZero() {
		return Watermark{CreatedAt: createdAt, ID: id, Boundary: []string{key}}
	}
	a, b := createdAt.Truncate(Precision), w.CreatedAt.Truncate(Precision)
	switch {
	case a.After(b):
		return Watermark{CreatedAt: createdAt, ID: id, Boundary: []string{key}}
	case a.Before(b):
		return w
	}
	out := Watermark{CreatedAt: w.CreatedAt, ID: max(w.ID, id), Boundary: w.Boundary}
	if createdAt.After(out.CreatedAt) {
		out.CreatedAt = createdAt
	}
	if i, found := slices.BinarySearch(out.Boundary, key); !found {
		out.Boundary = slices.Insert(slices.Clone(out.Boundary), i, key)
	}
	return out
}

// TestWatermarkBuilderIsAdvance: the builder, and Advance (one builder
// step), give at every point the watermark of the plain rule
// (advanceByCopy), and what they returned earlier does not change when
// they go on.
func TestWatermarkBuilderIsAdvance(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var start Watermark
		if seed%2 == 1 {
			start = Watermark{}.Advance(at(3, 5), 40, "40").Advance(at(3, 1), 41, "41")
		}
		want, stepped, b := start, start, NewWatermarkBuilder(start)
		var got, steps, wants []Watermark
		for range 300 {
			ms := rng.IntN(6) // few milliseconds: many ties, some older
			k := strconv.Itoa(rng.IntN(60))
			id := int64(rng.IntN(100))
			when := at(ms, rng.IntN(1000))
			want = advanceByCopy(want, when, id, k)
			stepped = stepped.Advance(when, id, k)
			b.Advance(when, id, k)
			if rng.IntN(10) == 0 {
				got, steps, wants = append(got, b.Watermark()), append(steps, stepped), append(wants, want)
			}
		}
		got, steps, wants = append(got, b.Watermark()), append(steps, stepped), append(wants, want)
		for i := range got {
			if !reflect.DeepEqual(got[i], wants[i]) || !reflect.DeepEqual(steps[i], wants[i]) {
				t.Fatalf("seed %d, snapshot %d: builder %+v, Advance %+v, the rule %+v", seed, i, got[i], steps[i], wants[i])
			}
		}
	}
}

// BenchmarkWatermarkTies: n submissions in one millisecond, newest first
// (keys falling), as a bulk import serves them.
func BenchmarkWatermarkTies(b *testing.B) {
	t0 := at(0, 0)
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("Copy/%d", n), func(b *testing.B) {
			if n > 10_000 {
				b.Skip("quadratic: 22 s at 50,000")
			}
			for b.Loop() {
				var w Watermark
				for k := n; k > 0; k-- {
					w = advanceByCopy(w, t0, int64(k), strconv.Itoa(k))
				}
			}
		})
		b.Run(fmt.Sprintf("Builder/%d", n), func(b *testing.B) {
			for b.Loop() {
				w := NewWatermarkBuilder(Watermark{})
				for k := n; k > 0; k-- {
					w.Advance(t0, int64(k), strconv.Itoa(k))
				}
				w.Watermark()
			}
		})
	}
}

// TestScrubLeavesNoForgottenKey: a scrubbed watermark keeps its time and
// every key that is not forgotten, and its id is the largest id left.
func TestScrubLeavesNoForgottenKey(t *testing.T) {
	t.Parallel()
	fg, err := NewForgotten()
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	w := Watermark{CreatedAt: when, ID: 4030, Boundary: []string{"4028", "4030", "9f3a"}}
	if got := fg.Scrub(w); !reflect.DeepEqual(got, w) {
		t.Errorf("nothing forgotten: %+v, want %+v", got, w)
	}
	for _, c := range []struct {
		forget []string
		want   Watermark
	}{
		{[]string{"4030"}, Watermark{CreatedAt: when, ID: 4028, Boundary: []string{"4028", "9f3a"}}},
		{[]string{"9f3a"}, Watermark{CreatedAt: when, ID: 4030, Boundary: []string{"4028", "4030"}}},
		{[]string{"4028"}, Watermark{CreatedAt: when, ID: 4030, Boundary: []string{"4030", "9f3a"}}},
		{[]string{"4028", "4030", "9f3a"}, Watermark{CreatedAt: when, Boundary: []string{}}},
		{[]string{"1"}, w},
	} {
		got := fg.With(int64(len(c.forget)), c.forget...).Scrub(w)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("forget %v: %+v, want %+v", c.forget, got, c.want)
		}
	}
	if got := w.Boundary; !slices.Equal(got, []string{"4028", "4030", "9f3a"}) {
		t.Errorf("the scrubbed watermark's boundary was changed in place: %v", got)
	}
}
