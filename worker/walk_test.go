package worker_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/worker"
)

// storedIDs is the set of submission ids the sink holds for form f.
func storedIDs(t *testing.T, s *memory.Sink, f string) map[int64]bool {
	t.Helper()
	rows, err := s.ReadRows(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]bool{}
	for _, r := range rows {
		out[*r.SubmissionID] = true
	}
	return out
}

// The bisection of a backfill may read the window's first page before the
// page a walk reads ahead of it. A submission added at the head of a
// newest-first form, or deleted at the head of an oldest-first one,
// between the two readings moves the window's newest submission from the
// page ahead (as the first page was read) onto the first page (as the page
// ahead was read): on neither as read.
func TestBackfillWindowMovedBetweenBisectionReadsLosesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		oldest bool
		after  int   // the page served before the form moves
		until  int   // the id the window ends at
		want   []int // the ids the window holds
	}{
		// Pages 6, 3, 5 and 4 are read, in that order; the window's
		// first page is 5 (the end of page 4, id 61, pushed onto it).
		{"newest first, an addition", false, 5, 61, ids(61, 1)},
		// Pages 6, 3, 5 and 4 again; the first page is 3 (the start of
		// page 4, id 31, pulled onto it).
		{"oldest first, a deletion", true, 5, 31, ids(31, 2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			subs := manySubs(100) // ids 100 (newest) to 1, a minute apart
			api := handSim(orderOf(tc.oldest))
			api.SetSubmissions("f", subs...)
			moved := append([]apisim.Submission{sub(101, base.Add(200*time.Minute), map[string]any{"n": "101"})}, subs...)
			if tc.oldest {
				moved = subs[:99] // id 1 deleted
			}
			var fired atomic.Bool
			handler := rewriting(api, func(r *http.Request, _, pag map[string]any) {
				if askedPage(r) == tc.after && fired.CompareAndSwap(false, true) {
					api.SetSubmissions("f", moved...)
				}
			})
			s := memory.New()
			e := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}, PageSize: 10})
			rep, err := e.Backfill(t.Context(), "f", worker.BackfillOptions{Window: worker.Window{Until: base.Add(time.Duration(tc.until-1) * time.Minute)}})
			if err != nil {
				t.Fatal(err)
			}
			if !fired.Load() {
				t.Fatal("the form never moved")
			}
			stored := storedIDs(t, s, "f")
			var missing []int
			for _, id := range tc.want {
				if !stored[int64(id)] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				t.Errorf("%d rows stored, want %d; missing %v (first page %d, %d requests)", len(stored), len(tc.want), missing, rep.FirstPage, rep.Requests)
			}
		})
	}
}

// A backfill of a window locates its first page by bisection, which reads
// the page before it too. Deletions of newer submissions between the
// readings of the page before and of the first page pull the window's
// newest submissions up onto the page before, which the walk does not
// read: the fall of the total between the two says so, as between any two
// pages of the walk. A window that lies, as read, on one page holding
// none of it is read, not reported empty, when the total fell.
func TestBackfillWindowPulledAboveItsFirstPageLosesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		deleted      int // how many of the newest are deleted
		since, until int // the window's ids
	}{
		// The window ends at id 69, on page 4; ids 68 and 69 are
		// pulled onto page 3.
		{"the window's newest", 3, 0, 69},
		// The window is id 70 alone, first of page 4, pulled onto page 3.
		{"the whole window", 1, 70, 70},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			subs := manySubs(100) // ids 100 (newest) to 1, a minute apart
			api := handSim(apisim.NewestFirst)
			api.SetSubmissions("f", subs...)
			// The bisection reads pages 6, 3, 5 and 4, in that order; the
			// deletions land after page 3.
			var fired atomic.Bool
			handler := rewriting(api, func(r *http.Request, _, pag map[string]any) {
				if askedPage(r) == 3 && fired.CompareAndSwap(false, true) {
					api.SetSubmissions("f", subs[tc.deleted:]...)
				}
			})
			s := memory.New()
			e := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}, PageSize: 10})
			win := worker.Window{Until: base.Add(time.Duration(tc.until-1) * time.Minute)}
			if tc.since > 0 {
				win.Since = base.Add(time.Duration(tc.since-1) * time.Minute)
			}
			rep, err := e.Backfill(t.Context(), "f", worker.BackfillOptions{Window: win})
			if err != nil {
				t.Fatal(err)
			}
			if !fired.Load() {
				t.Fatal("the deletions never happened")
			}
			stored := storedIDs(t, s, "f")
			var missing []int
			for id := max(tc.since, 1); id <= tc.until; id++ {
				if !stored[int64(id)] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 || len(stored) != tc.until-max(tc.since, 1)+1 {
				t.Errorf("%d rows stored, want ids %d to %d; missing %v (pages %d to %d, %d pages read again)",
					len(stored), max(tc.since, 1), tc.until, missing, rep.FirstPage, rep.LastPage, rep.Rescans)
			}
		})
	}
}

// A deletion ahead of a newest-first reader pulls the next page's first
// submissions onto the pages just read, which the walk reads again. A
// submission added at the head while it does pushes them back down: onto
// the next page as it is now, not as it was read, or onto a page read
// again before it came. The walk reads them there too. The deleted rows,
// stored, keep the completeness check from counting those lost.
func TestAdditionWhilePulledPagesAreReadAgainLosesNothing(t *testing.T) {
	t.Parallel()
	type move struct {
		page, serving int // the move comes as page is served for the serving-th time
		ids           []int
	}
	without := func(n int, gone ...int) []int {
		var out []int
		for id := n; id >= 1; id-- {
			if !slices.Contains(gone, id) {
				out = append(out, id)
			}
		}
		return out
	}
	tests := []struct {
		name  string
		n     int
		moves []move
	}{
		// Id 50 goes once page 2 is read, before page 3 is; id 51 comes
		// once page 3 is read, before page 2 is read again: id 30, pulled
		// onto page 2, is back on page 3.
		{"after the next page was read", 50, []move{
			{2, 1, without(50, 50)},
			{3, 1, append([]int{51}, without(50, 50)...)},
		}},
		// Ids 100 to 86 go once page 3 is read; id 101 comes between the
		// readings again of page 3 and page 2: id 66, pulled onto page 2,
		// is back on page 3, read again already.
		{"between two pages read again", 100, []move{
			{3, 1, without(100, ids(100, 86)...)},
			{3, 2, append([]int{101}, without(100, ids(100, 86)...)...)},
		}},
	}
	for _, tc := range tests {
		for _, backfill := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/backfill=%v", tc.name, backfill), func(t *testing.T) {
				byID := map[int]apisim.Submission{}
				for _, m := range append(manySubs(tc.n), sub(tc.n+1, base.Add(time.Duration(tc.n)*time.Minute), map[string]any{"n": "new"})) {
					byID[int(m.ID)] = m
				}
				list := func(ids []int) []apisim.Submission {
					var out []apisim.Submission
					for _, id := range ids {
						out = append(out, byID[id])
					}
					return out
				}
				api := handSim(apisim.NewestFirst)
				api.SetSubmissions("f", manySubs(tc.n)...)
				var mu sync.Mutex
				served := map[int]int{}
				var moved atomic.Int32
				handler := rewriting(api, func(r *http.Request, _, pag map[string]any) {
					mu.Lock()
					defer mu.Unlock()
					page := askedPage(r)
					served[page]++
					for _, m := range tc.moves {
						if m.page == page && m.serving == served[page] {
							api.SetSubmissions("f", list(m.ids)...)
							moved.Add(1)
						}
					}
				})
				s := memory.New()
				e := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}, PageSize: 10})
				readWhole(t, e, "f", backfill)
				if int(moved.Load()) != len(tc.moves) {
					t.Fatalf("%d of %d moves came", moved.Load(), len(tc.moves))
				}
				stored := storedIDs(t, s, "f")
				var missing []int
				for _, id := range tc.moves[len(tc.moves)-1].ids {
					if id <= tc.n && !stored[int64(id)] {
						missing = append(missing, id)
					}
				}
				if len(missing) > 0 {
					t.Errorf("%d rows stored; live submissions missing: %v", len(stored), missing)
				}
			})
		}
	}
}

// A form that, after a deletion, gets a submission and loses it again on
// every other request never holds still while the pages the deletion pulled submissions onto are
// read again: the walk gives up after a bounded number of tries and fails
// the form, keeping its watermark, rather than risk a submission pushed
// back onto a page it read before. Once the form holds still, the next
// sync stores every live submission.
func TestFormThatNeverHoldsStillFailsAndLosesNothing(t *testing.T) {
	t.Parallel()
	subs := manySubs(50) // ids 50 (newest) to 1
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("f", subs...)
	var mu sync.Mutex
	live := slices.Clone(subs)
	churning, added, next := false, false, 51
	handler := rewriting(api, func(r *http.Request, _, pag map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case churning && added:
			live, added = live[1:], false
			api.SetSubmissions("f", live...)
		case churning:
			live = append([]apisim.Submission{sub(next, base.Add(time.Duration(next)*time.Minute), map[string]any{"n": "new"})}, live...)
			next, added = next+1, true
			api.SetSubmissions("f", live...)
		case askedPage(r) == 2 && next == 51:
			live = live[1:] // id 50 deleted
			api.SetSubmissions("f", live...)
			churning = true
		}
	})
	s := memory.New()
	e := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}, PageSize: 10})
	rep, err := e.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fr := rep.Forms[0]
	if fr.Err == nil || !strings.Contains(fr.Err.Error(), "kept moving") {
		t.Fatalf("sync of a form that never holds still: error %v, want one saying it kept moving", fr.Err)
	}
	if rows, _ := s.ReadRows(t.Context(), "f"); len(rows) != 0 {
		t.Errorf("the failed form committed %d rows", len(rows))
	}

	mu.Lock()
	churning = false
	if added {
		live = live[1:]
		api.SetSubmissions("f", live...)
	}
	mu.Unlock()
	rep, err = e.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	stored := storedIDs(t, s, "f")
	mu.Lock()
	defer mu.Unlock()
	for _, m := range live {
		if id := m.ID; !stored[id] {
			t.Errorf("live submission %d not stored", id)
		}
	}
	if len(stored) != len(live) {
		t.Errorf("%d rows stored, %d live", len(stored), len(live))
	}
}
