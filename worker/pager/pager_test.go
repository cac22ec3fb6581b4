package pager_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/pager"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// sub is submission n of a test form, created n minutes after t0; noID
// makes it a submission of the older response form.
func sub(n int) formsapi.Submission {
	id := int64(n)
	return formsapi.Submission{ID: &id, CreatedAt: t0.Add(time.Duration(n) * time.Minute)}
}

// at is submission id created at minute m.
func at(id, m int) formsapi.Submission {
	s := sub(m)
	v := int64(id)
	s.ID = &v
	return s
}

// newest is submissions hi down to lo, newest first.
func newest(hi, lo int) []formsapi.Submission {
	var out []formsapi.Submission
	for n := hi; n >= lo; n-- {
		out = append(out, sub(n))
	}
	return out
}

// form is a form served in pages of per from subs, in the order held.
type form struct {
	subs []formsapi.Submission
	per  int
	// fetched are the pages asked for, in order.
	fetched []int
	// serve, when set, makes the page served for call (0-based) of page.
	serve func(f *form, call, page int) *formsapi.Page
	// before, when set, runs before the call'th request.
	before func(f *form, call int)
}

func (f *form) page(page int) *formsapi.Page {
	lo := min((page-1)*f.per, len(f.subs))
	hi := min(lo+f.per, len(f.subs))
	pages := (len(f.subs) + f.per - 1) / f.per
	return &formsapi.Page{
		Submissions: slices.Clone(f.subs[lo:hi]), Total: len(f.subs), Count: hi - lo,
		PerPage: f.per, CurrentPage: page, TotalPages: max(pages, 1),
	}
}

func (f *form) fetch(_ context.Context, page int) (*formsapi.Page, error) {
	call := len(f.fetched)
	if f.before != nil {
		f.before(f, call)
	}
	f.fetched = append(f.fetched, page)
	if f.serve != nil {
		return f.serve(f, call, page), nil
	}
	return f.page(page), nil
}

func (f *form) remove(id int64) {
	f.subs = slices.DeleteFunc(f.subs, func(s formsapi.Submission) bool { return s.ID != nil && *s.ID == id })
}

// decode keys a submission by id, or by created_at without one.
func decode(p *formsapi.Page, i int) (pager.Item[formsapi.Submission], error) {
	s := p.Submissions[i]
	key := "c" + s.CreatedAt.Format(time.RFC3339Nano)
	if s.ID != nil {
		key = strconv.FormatInt(*s.ID, 10)
	}
	return pager.Item[formsapi.Submission]{Key: key, CreatedAt: s.CreatedAt, HasID: s.ID != nil, Value: s}, nil
}

// result is what a scan or walk yielded.
type result struct {
	keys    []string
	rereads int
	walked  []int
	copies  state.Copies
	err     error
}

func collect[S ~func(func(pager.Event[formsapi.Submission], error) bool)](events S) result {
	var r result
	for ev, err := range events {
		if err != nil {
			r.err = err
			break
		}
		switch ev.Kind {
		case pager.Submission:
			k, _ := decode(&formsapi.Page{Submissions: []formsapi.Submission{ev.Item.Value}}, 0)
			r.keys = append(r.keys, k.Key)
		case pager.Reread:
			r.rereads++
		case pager.Walked:
			r.walked = append(r.walked, ev.Page)
		case pager.Copies:
			r.copies = r.copies.Merge(ev.Copies)
		}
	}
	return r
}

func keys(ns ...int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return out
}

func span(hi, lo int) []int {
	var out []int
	for n := hi; n >= lo; n-- {
		out = append(out, n)
	}
	return out
}

func scanOf(f *form) *pager.Scan[formsapi.Submission] {
	return &pager.Scan[formsapi.Submission]{Form: "f", Fetch: f.fetch, Decode: decode, LastTotal: -1}
}

// loaded is the watermark after submissions up to n.
func loaded(n int) state.Watermark {
	return state.Watermark{CreatedAt: sub(n).CreatedAt, ID: int64(n), Boundary: []string{strconv.Itoa(n)}}
}

func TestScanNewestFirst(t *testing.T) {
	t.Parallel()
	f := &form{subs: newest(25, 1), per: 10}
	sc := scanOf(f)
	got := collect(sc.Events(t.Context()))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got, want := got.keys, keys(span(25, 1)...); !slices.Equal(got, want) {
		t.Errorf("keys: got %v, want %v", got, want)
	}
	if got, want := f.fetched, []int{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("pages fetched: got %v, want %v", got, want)
	}
	want := pager.Facts{Order: state.OrderNewestFirst, Total: 25, PerPage: 10, Seen: 25}
	if got := sc.Facts(); got != want {
		t.Errorf("facts: got %+v, want %+v", got, want)
	}
	if got, want := got.walked, []int{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("pages walked: got %v, want %v", got, want)
	}

	// Incremental: from page 1 until the watermark is passed.
	f = &form{subs: newest(25, 1), per: 10}
	sc = scanOf(f)
	sc.Watermark, sc.LastTotal = loaded(13), 13
	got = collect(sc.Events(t.Context()))
	if got.err != nil || !slices.Equal(got.keys, keys(span(25, 14)...)) || !slices.Equal(f.fetched, []int{1, 2}) {
		t.Errorf("incremental: keys %v, pages %v, error %v; want 25..14 from pages 1 and 2", got.keys, f.fetched, got.err)
	}
}

// An oldest-first form is read from the last page back, and the walk ends
// on the first page whose first submission is loaded: the overlap with the
// watermark is confirmed before the jump is trusted.
func TestScanOldestFirstJumpsNearTheEnd(t *testing.T) {
	t.Parallel()
	oldest := newest(25, 1)
	slices.Reverse(oldest)
	f := &form{subs: oldest, per: 10}
	sc := scanOf(f)
	sc.Watermark, sc.LastTotal = loaded(18), 18
	got := collect(sc.Events(t.Context()))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got, want := got.keys, keys(21, 22, 23, 24, 25, 19, 20); !slices.Equal(got, want) {
		t.Errorf("keys: got %v, want %v", got, want)
	}
	// Page 1 tells the order, page 3 is the jump, page 2 confirms the
	// overlap (it starts with a loaded submission).
	if got, want := f.fetched, []int{1, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("pages fetched: got %v, want %v", got, want)
	}
	if o := sc.Facts().Order; o != state.OrderOldestFirst {
		t.Errorf("order %q, want oldest first", o)
	}

	// A jump that lands on new submissions only reads on backwards until
	// the overlap: here, back to page 1.
	f = &form{subs: slices.Clone(oldest), per: 10}
	sc = scanOf(f)
	sc.Watermark, sc.LastTotal = loaded(5), 5
	got = collect(sc.Events(t.Context()))
	if got.err != nil || len(got.keys) != 20 || !slices.Equal(f.fetched, []int{1, 3, 2, 1}) {
		t.Errorf("long jump: %d keys, pages %v, error %v; want 20 keys from pages 1, 3, 2, 1", len(got.keys), f.fetched, got.err)
	}
}

// Page 1 cannot tell the order when its submissions share one created_at:
// the last page does, unless the stored order is known.
func TestDetectFromTheLastPage(t *testing.T) {
	t.Parallel()
	subs := []formsapi.Submission{at(6, 9), at(5, 9), sub(4), sub(3), sub(2), sub(1)}
	f := &form{subs: subs, per: 2}
	first, _ := f.fetch(t.Context(), 1)
	o, err := pager.Detect(t.Context(), f.fetch, first, state.OrderUnknown)
	if err != nil || o != state.OrderNewestFirst || !slices.Equal(f.fetched, []int{1, 3}) {
		t.Errorf("detect: %q, %v, pages %v; want newest first from pages 1 and 3", o, err, f.fetched)
	}
	f.fetched = nil
	first, _ = f.fetch(t.Context(), 1)
	o, err = pager.Detect(t.Context(), f.fetch, first, state.OrderOldestFirst)
	if err != nil || o != state.OrderOldestFirst || len(f.fetched) != 1 {
		t.Errorf("detect with a stored order: %q, %v, pages %v; want the stored order, no request", o, err, f.fetched)
	}
	// One page that cannot tell: unknown, no further request.
	f = &form{subs: []formsapi.Submission{at(2, 9), at(1, 9)}, per: 10}
	first, _ = f.fetch(t.Context(), 1)
	if o, _ := pager.Detect(t.Context(), f.fetch, first, state.OrderUnknown); o != state.OrderUnknown || len(f.fetched) != 1 {
		t.Errorf("one page of a tie: %q after pages %v; want unknown after page 1", o, f.fetched)
	}
}

// A total that grew by more than the new submissions read says one was
// inserted behind the watermark: the form is read whole once more.
func TestScanRereadsAShortRead(t *testing.T) {
	t.Parallel()
	// 1..20 loaded at a total of 20; now 21..22 are new and 100 was
	// inserted (back-dated) among the loaded ones.
	subs := newest(22, 11)
	subs = append(subs, at(100, 10))
	subs = append(subs, newest(10, 1)...)
	f := &form{subs: subs, per: 10}
	sc := scanOf(f)
	sc.Watermark, sc.LastTotal = loaded(20), 20
	got := collect(sc.Events(t.Context()))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.rereads != 1 || !slices.Contains(got.keys, "100") {
		t.Errorf("rereads %d, keys %v; want 1 re-read that finds 100", got.rereads, got.keys)
	}
	if got, want := f.fetched, []int{1, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("pages fetched: got %v, want %v", got, want)
	}

	// As many new as the total grew by: no re-read.
	f = &form{subs: newest(22, 1), per: 10}
	sc = scanOf(f)
	sc.Watermark, sc.LastTotal = loaded(20), 20
	if got := collect(sc.Events(t.Context())); got.err != nil || got.rereads != 0 || len(f.fetched) != 1 {
		t.Errorf("no short read: %d rereads, pages %v, error %v; want page 1 only", got.rereads, f.fetched, got.err)
	}
}

func TestPagingMustAddUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		serve func(f *form, call, page int) *formsapi.Page
		want  string
	}{
		{"current_page not the page asked", func(f *form, _, _ int) *formsapi.Page { return f.page(1) }, "current_page 1"},
		{"total_pages not ceil(total/per_page)", func(f *form, _, page int) *formsapi.Page {
			p := f.page(page)
			p.TotalPages = 7
			return p
		}, "total_pages is 7"},
		{"a page identical to the one before", func(f *form, _, page int) *formsapi.Page {
			p := f.page(1)
			p.CurrentPage = page
			return p
		}, "holds exactly the submissions of page 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &form{subs: newest(25, 1), per: 10, serve: tc.serve}
			got := collect(scanOf(f).Events(t.Context()))
			if !errors.Is(got.err, formsapi.ErrPaging) || !strings.Contains(got.err.Error(), tc.want) {
				t.Errorf("error %v; want ErrPaging saying %q", got.err, tc.want)
			}
		})
	}
}

// The watermark's boundary holds the keys loaded at its millisecond: a
// submission sharing it but not in the boundary is new, one in it is not.
func TestScanTiesAtTheWatermark(t *testing.T) {
	t.Parallel()
	subs := []formsapi.Submission{sub(12), sub(11), at(30, 10), at(31, 10), at(32, 10), sub(9)}
	f := &form{subs: subs, per: 10}
	sc := scanOf(f)
	sc.Watermark = state.Watermark{CreatedAt: sub(10).CreatedAt, ID: 31, Boundary: []string{"30", "31"}}
	sc.LastTotal = 5
	got := collect(sc.Events(t.Context()))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got, want := got.keys, keys(12, 11, 32); !slices.Equal(got, want) {
		t.Errorf("keys: got %v, want %v", got, want)
	}
}

// A server that orders the members of a created_at tie differently on
// every request can put one on both sides of a page border and another on
// neither: the page is read again until every place is accounted for.
func TestWalkCompletesATieSplitAtAPageBorder(t *testing.T) {
	t.Parallel()
	// Three submissions at minute 3 fill the last place of page 1 and the
	// first two of page 2.
	all := []formsapi.Submission{sub(5), sub(4), at(31, 3), at(32, 3), at(33, 3), sub(1)}
	f := &form{subs: all, per: 3, serve: func(f *form, call, page int) *formsapi.Page {
		p := f.page(page)
		if page == 2 && call == 1 {
			// 31 served again, 32 on neither page.
			p.Submissions[0] = all[2]
		}
		return p
	}}
	w := &pager.Walk[formsapi.Submission]{Form: "f", Fetch: f.fetch, Decode: decode, Order: state.OrderNewestFirst, Bounds: pager.Above(state.Watermark{})}
	got := collect(w.From(t.Context(), 1, nil))
	if got.err != nil {
		t.Fatal(got.err)
	}
	want := keys(5, 4, 31, 33, 1, 32)
	if got, want := got.keys, want; !slices.Equal(got, want) {
		t.Errorf("keys: got %v, want %v", got, want)
	}
	if got.rereads != 1 || !slices.Equal(f.fetched, []int{1, 2, 2}) {
		t.Errorf("%d rereads, pages %v; want page 2 read again once", got.rereads, f.fetched)
	}
}

// A deletion ahead of a newest-first reader pulls the next submission onto
// the page already read: the fall of the total makes the walk read that
// page again before it goes on.
func TestWalkRereadsWhatADeletionPulledUp(t *testing.T) {
	t.Parallel()
	f := &form{subs: newest(10, 1), per: 3, before: func(f *form, call int) {
		if call == 1 {
			f.remove(9) // read on page 1; pulls 7 up onto it
		}
	}}
	sc := scanOf(f)
	got := collect(sc.Events(t.Context()))
	if got.err != nil {
		t.Fatal(got.err)
	}
	slices.Sort(got.keys)
	want := keys(1, 10, 2, 3, 4, 5, 6, 7, 8, 9)
	if got, want := got.keys, want; !slices.Equal(got, want) {
		t.Errorf("keys, sorted: got %v, want %v", got, want)
	}
	if got.rereads != 1 || !slices.Equal(f.fetched, []int{1, 2, 1, 3}) {
		t.Errorf("%d rereads, pages %v; want page 1 read again after page 2", got.rereads, f.fetched)
	}
	if total := sc.Facts().Total; total != 9 {
		t.Errorf("total %d, want the lowest seen, 9", total)
	}
}

// Additions that keep coming while the pulled pages are read again end
// the walk with ErrMoving rather than a read that may have skipped one.
func TestWalkGivesUpOnAFormThatNeverHoldsStill(t *testing.T) {
	t.Parallel()
	next := 100
	f := &form{subs: newest(10, 1), per: 3}
	f.before = func(f *form, call int) {
		if call == 0 {
			return
		}
		// From the second request on, one deleted among those read, then
		// one added at the head, and so on: the total falls and rises.
		if call%2 == 1 {
			f.subs = f.subs[1:]
			return
		}
		next++
		f.subs = append([]formsapi.Submission{at(next, 1000+next)}, f.subs...)
	}
	got := collect(scanOf(f).Events(t.Context()))
	if !errors.Is(got.err, pager.ErrMoving) {
		t.Errorf("error %v after pages %v; want ErrMoving", got.err, f.fetched)
	}
}

// Copies (one content key twice on one page, no id) are counted, not
// yielded twice.
func TestWalkCountsCopies(t *testing.T) {
	t.Parallel()
	c := sub(5)
	c.ID = nil
	f := &form{subs: []formsapi.Submission{c, c, sub(4)}, per: 10}
	sc := scanOf(f)
	sc.Reconcile, sc.Full = true, true
	got := collect(sc.Events(t.Context()))
	if got.err != nil || len(got.keys) != 2 || got.copies.Count() != 1 {
		t.Errorf("keys %v, copies %v, error %v; want 2 keys and 1 copy", got.keys, got.copies, got.err)
	}
	if f := sc.Facts(); !f.AddedUp || f.Seen != 3 {
		t.Errorf("facts %+v; want the read to add up to 3", f)
	}
}

// A reader that stops taking events stops the walk: no further request.
func TestStoppingTheReaderStopsTheWalk(t *testing.T) {
	t.Parallel()
	f := &form{subs: newest(25, 1), per: 10}
	for ev, err := range scanOf(f).Events(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == pager.Submission {
			break
		}
	}
	if !slices.Equal(f.fetched, []int{1}) {
		t.Errorf("pages fetched %v; want page 1 only", f.fetched)
	}
}

// A walk of a window (a backfill's) yields what lies within it, from newer
// to older, and ends on the first page reaching past its lower end.
func TestWalkOfAWindow(t *testing.T) {
	t.Parallel()
	f := &form{subs: newest(30, 1), per: 5}
	since, until := sub(12).CreatedAt, sub(23).CreatedAt
	in := func(at time.Time) bool { return !at.Before(since) && !at.After(until) }
	w := &pager.Walk[formsapi.Submission]{Form: "f", Fetch: f.fetch, Decode: decode, Order: state.OrderNewestFirst, Bounds: pager.Bounds{
		Want: func(at time.Time, _ string) bool { return in(at) },
		Past: func(at time.Time, _ string) bool { return at.Before(since) },
	}}
	// Page 2 (25..21) holds the window's newest.
	got := collect(w.From(t.Context(), 2, nil))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if want := keys(span(23, 12)...); !slices.Equal(got.keys, want) {
		t.Errorf("keys %v, want %v", got.keys, want)
	}
	if want := []int{2, 3, 4}; !slices.Equal(f.fetched, want) || !slices.Equal(got.walked, want) {
		t.Errorf("pages fetched %v, walked %v; want %v", f.fetched, got.walked, want)
	}
}
