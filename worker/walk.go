package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// span says which submissions a walk is after. Walks go from newer to
// older submissions in either order, so a span has an upper end (rows
// beyond it are skipped) and a lower end (a page reaching past it is the
// last one read).
type span struct {
	// stage reports whether a row is to be staged.
	stage func(sink.Row) bool
	// past reports whether a row lies beyond the lower (older) end.
	past func(sink.Row) bool
}

// spanAbove is the span of a sync: what the threshold has not loaded.
func spanAbove(threshold state.Watermark) span {
	return span{
		stage: func(r sink.Row) bool { return threshold.Compare(r.CreatedAt, r.SubmissionKey) > 0 },
		past:  func(r sink.Row) bool { return threshold.Compare(r.CreatedAt, r.SubmissionKey) <= 0 },
	}
}

// walker reads pages of one form. It goes forwards (page 1 on) when the
// form is newest-first and backwards (from a high page to 1) when it is
// oldest-first: in both cases from newer to older submissions, and in the
// direction in which moving pages repeat submissions rather than skip them
// (see the package doc).
type walker struct {
	r    *formRun
	span span
	// onPage, when set, is called after every page the walk consumed, with
	// the page number; an error stops the walk.
	onPage func(ctx context.Context, page int) error
	// before, when set, is the page a walk from start reads just before
	// it, as read earlier (a backfill's bisection reads it). The walk's
	// first page is checked against it as every page is against the one
	// before: deletions between the two readings pulled submissions from
	// the first page onto it, which the fall of the total says.
	before *formsapi.Page
}

func (w *walker) forward() bool { return w.r.order != state.OrderOldestFirst }

// walk reads from page start until the end of the form or the first page
// that reaches past the span's lower end. first, when it is page start as
// already fetched, saves a request.
func (w *walker) walk(ctx context.Context, start int, first *formsapi.Page) error {
	r := w.r
	step := 1
	if !w.forward() {
		step = -1
	}
	var prev *seenPage
	if w.before != nil {
		seen, _, err := w.consume(w.before, nil)
		if err != nil {
			return err
		}
		seen.page, seen.total = start-step, w.before.Total
		prev = seen
	}
	for page := start; page >= 1; page += step {
		p := first
		first = nil
		if p == nil || p.CurrentPage != page {
			var err error
			if p, err = r.fetch(ctx, page); err != nil {
				return err
			}
		}
		// A deletion ahead of a newest-first reader pulls every later
		// submission up by one: the first of this page moved onto the page
		// read before, and would be skipped. The total dropping since that
		// page was read says so; reading the pages before again picks the
		// pulled ones up. A submission added at the head meanwhile pushes
		// them back down, onto this page as it is now, not as it was read
		// (or onto a page read again before it came): the total rising
		// while they are read again says so, and this page is read again
		// before they are, until they are read with the form held still
		// or falling.
		if w.forward() && prev != nil && p.Total < prev.total {
			asRead := prev
			for tries := 1; ; tries++ {
				again, rose, err := w.readPulled(ctx, asRead, p.Total)
				if err != nil {
					return err
				}
				prev = again
				if !rose {
					break
				}
				if tries == maxPulledRereads {
					return fmt.Errorf("form %s: submissions were added and deleted while pages %d and %d were read %d times: %w",
						r.old.FormID, page-1, page, tries, errMovingForm)
				}
				r.report.Rescans++
				if p, err = r.fetch(ctx, page); err != nil {
					return err
				}
				if p.Total >= asRead.total {
					// Added as many as deleted: nothing is pulled above
					// this page any more.
					break
				}
			}
		}
		var prevKeys map[string]struct{}
		if prev != nil {
			prevKeys = prev.keys
		}
		seen, reached, err := w.consume(p, prevKeys)
		if err != nil {
			return err
		}
		if prev != nil && p.Total == prev.total {
			if err := w.completeTies(ctx, page, prev, seen); err != nil {
				return err
			}
		}
		// A page repeating the one before it, submission for submission,
		// staged nothing (every key was the previous page's): the server
		// or a proxy ignores the page parameter. Unless the total moved
		// between the two: a page of submissions added ahead of a
		// newest-first reader (or removed ahead of an oldest-first one)
		// shifts the next page onto the one read, which the walk reads on
		// past.
		if prev != nil && len(seen.order) > 0 && p.Total == prev.total && slices.Equal(prev.order, seen.order) {
			return fmt.Errorf("form %s: page %d holds exactly the submissions of page %d, so the server (or a proxy) ignores the page parameter: %w",
				r.old.FormID, page, prev.page, formsapi.ErrPaging)
		}
		seen.page, seen.total = page, p.Total
		prev = seen
		if w.onPage != nil {
			if err := w.onPage(ctx, page); err != nil {
				return err
			}
		}
		last := page >= p.TotalPages || len(p.Submissions) == 0
		if !w.forward() {
			last = page == 1
		}
		if reached || last {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("form %s: stopped after page %d: %w", r.old.FormID, page, context.Cause(ctx))
		}
	}
	return nil
}

// seenPage is what the walk remembers of the page it read last: its
// submissions' keys, as a set and in the order served.
type seenPage struct {
	page  int
	total int
	keys  map[string]struct{}
	order []string
	// headAt and tailAt are the created_at millisecond of the page's first
	// and last submission; headN and tailN how many submissions in a row,
	// from either end, share it.
	headAt, tailAt time.Time
	headN, tailN   int
}

// maxTieRefetches bounds how many times a page is read again to find the
// members of a created_at tie split between it and the page before.
const maxTieRefetches = 6

// completeTies reads page again while the submissions sharing the
// created_at millisecond at its border with the page read before (prev)
// are fewer, counted by key, than the places they fill on the two pages.
// A server that orders such ties differently on every request (an ORDER
// BY created_at with OFFSET may) can put a member on both pages and
// another on neither; the places do not move while the total holds. A
// server with a stable order never needs it: no request is added. A tie
// that fills either page whole is not counted so (its members may lie on
// pages further on): the form's completeness check is left to find it.
func (w *walker) completeTies(ctx context.Context, page int, prev, seen *seenPage) error {
	run := func(s *seenPage, head bool) (time.Time, []string) {
		if head {
			return s.headAt, s.order[:s.headN]
		}
		return s.tailAt, s.order[len(s.order)-s.tailN:]
	}
	// Walking forwards, the border is prev's tail and this page's head;
	// backwards, this page's tail and prev's head.
	atPrev, before := run(prev, !w.forward())
	at, here := run(seen, w.forward())
	if len(before) == 0 || len(here) == 0 || !at.Equal(atPrev) || len(here) == len(seen.order) || len(before) == len(prev.order) {
		return nil
	}
	// A copy (copies.go) fills two places on one page with one key.
	places := distinctCount(before) + distinctCount(here)
	found := map[string]struct{}{}
	for _, k := range slices.Concat(before, here) {
		found[k] = struct{}{}
	}
	skip := maps.Clone(prev.keys)
	maps.Copy(skip, seen.keys)
	for range maxTieRefetches {
		if len(found) >= places {
			return nil
		}
		w.r.report.Rescans++
		again, err := w.r.fetch(ctx, page)
		if err != nil {
			return err
		}
		if again.Total != prev.total {
			return nil // the form changed: the rescans of the walk see to it
		}
		more, _, err := w.consume(again, skip)
		if err != nil {
			return err
		}
		if a, ks := run(more, w.forward()); a.Equal(at) {
			for _, k := range ks {
				found[k] = struct{}{}
			}
		}
		maps.Copy(skip, more.keys)
		maps.Copy(seen.keys, more.keys)
	}
	return nil
}

// maxPulledRereads bounds how many times the pages a deletion pulled
// submissions onto are read again because submissions were added while
// they were read.
const maxPulledRereads = 8

// errMovingForm is the error of a form that moved under the walk, every
// time it read the same pages again, in a way it cannot follow.
var errMovingForm = errors.New("the form kept moving while read; it is read again next run")

// readPulled reads again, newest-first, the pages before the one just
// fetched, whose total (since) fell below that of prev, the page read
// before it: d deletions among the submissions already read pull the next
// d up onto the pages read, from prev backwards. It stages what it finds
// there but prev's submissions, and returns prev as read again, with the
// total of that reading. rose reports that the total rose after the page
// just fetched or between two pages read again: a submission was added
// ahead, which may have pushed pulled submissions down onto a page read
// before it came.
//
// It goes from prev's page down, so that a deletion while it reads pulls a
// submission onto a page it has yet to read, never onto one it has read
// (as the backward walk of an oldest-first form). It stops at the page
// whose first submission was served before prev's last (so was everything
// above it), once as deep as the total's fall can pull (ceil(fall / per
// page) pages), or at page 1. A fall of less than a page costs one
// request, as it always did.
func (w *walker) readPulled(ctx context.Context, prev *seenPage, since int) (top *seenPage, rose bool, err error) {
	r := w.r
	per := max(r.perPage, len(prev.order), 1)
	// read reports whether a submission was served, when the walk read
	// prev, on prev or before it: it is on prev, or newer than prev's last
	// submission. A member of a tie at prev's last millisecond that is not
	// on prev may be either: it is not reported.
	read := func(key string, at time.Time) bool {
		_, on := prev.keys[key]
		return on || at.Truncate(time.Millisecond).After(prev.tailAt)
	}
	var above map[string]struct{}
	lowest, last := prev.total, since
	for page := prev.page; page >= 1; page-- {
		r.report.Rescans++
		again, err := r.fetch(ctx, page)
		if err != nil {
			return nil, false, err
		}
		lowest = min(lowest, again.Total)
		rose = rose || again.Total > last
		last = again.Total
		// A submission on the page read again just before (above) is
		// pulled down onto this one by a deletion in between: read once.
		// One added since the walk began is staged as on any page.
		skip := maps.Clone(prev.keys)
		maps.Copy(skip, above)
		seen, _, err := w.consume(again, skip)
		if err != nil {
			return nil, false, err
		}
		if top == nil {
			top = seen
			top.page, top.total = page, again.Total
		}
		above = seen.keys
		depth := (prev.total - lowest + per - 1) / per
		if len(seen.order) == 0 || read(seen.order[0], seen.headAt) || page <= prev.page-depth+1 {
			break
		}
	}
	return top, rose, nil
}

// consume stages a page's submissions within the span, skipping those taken
// from the neighbouring page read just before (prev). reached reports that
// the page reaches past the span's lower end: newest-first, any submission
// on it (the rest of the form is older); oldest-first, its first one (the
// oldest on the page, so everything before it is older still).
func (w *walker) consume(p *formsapi.Page, prev map[string]struct{}) (seen *seenPage, reached bool, err error) {
	r := w.r
	seen = &seenPage{keys: make(map[string]struct{}, len(p.Submissions)), order: make([]string, 0, len(p.Submissions))}
	var onPage state.Copies
	for i, s := range p.Submissions {
		row, names, err := r.rowOf(s)
		if err != nil {
			return nil, false, fmt.Errorf("form %s page %d submission %d: %w", r.old.FormID, p.CurrentPage, i+1, err)
		}
		seen.order = append(seen.order, row.SubmissionKey)
		switch at := row.CreatedAt.Truncate(time.Millisecond); {
		case i == 0:
			seen.headAt, seen.headN, seen.tailAt, seen.tailN = at, 1, at, 1
		case at.Equal(seen.tailAt):
			seen.tailN++
			if seen.tailN == i+1 {
				seen.headN = seen.tailN
			}
		default:
			seen.tailAt, seen.tailN = at, 1
		}
		past := w.span.past(row)
		if past && (w.forward() || i == 0) {
			reached = true
		}
		if _, dup := seen.keys[row.SubmissionKey]; dup {
			if row.SubmissionID == nil {
				// A second submission with this content on one page: a
				// copy (copies.go).
				if onPage == nil {
					onPage = state.Copies{}
				}
				onPage[row.SubmissionKey]++
				if w.span.stage(row) && r.old.Watermark.IsNew(row.CreatedAt, row.SubmissionKey) {
					r.passNew++
				}
			}
			continue
		}
		seen.keys[row.SubmissionKey] = struct{}{}
		if _, dup := prev[row.SubmissionKey]; dup {
			continue
		}
		if !w.span.stage(row) {
			continue
		}
		if err := r.stage(row, names); err != nil {
			return nil, false, err
		}
	}
	if onPage != nil {
		r.copies = r.copies.Merge(onPage)
	}
	return seen, reached, nil
}

// detectOrder tells the sort order from page 1, or, when page 1 cannot tell
// (one submission, or all sharing one created_at), from the stored order or
// the last page.
func (r *formRun) detectOrder(ctx context.Context, first *formsapi.Page) (state.Order, error) {
	if o := orderOf(first.Submissions); o != state.OrderUnknown {
		return o, nil
	}
	if r.old.Order != state.OrderUnknown || first.TotalPages <= 1 || len(first.Submissions) == 0 {
		return r.old.Order, nil
	}
	last, err := r.fetch(ctx, first.TotalPages)
	if err != nil {
		return state.OrderUnknown, err
	}
	if len(last.Submissions) == 0 {
		return state.OrderUnknown, nil
	}
	return orderOf([]formsapi.Submission{first.Submissions[0], last.Submissions[len(last.Submissions)-1]}), nil
}

func orderOf(subs []formsapi.Submission) state.Order {
	if len(subs) < 2 {
		return state.OrderUnknown
	}
	a, b := subs[0].CreatedAt, subs[len(subs)-1].CreatedAt
	switch {
	case a.After(b):
		return state.OrderNewestFirst
	case a.Before(b):
		return state.OrderOldestFirst
	}
	return state.OrderUnknown
}

// distinctCount is how many different keys keys holds.
func distinctCount(keys []string) int {
	set := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		set[k] = struct{}{}
	}
	return len(set)
}
