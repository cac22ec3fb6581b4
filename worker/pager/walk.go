package pager

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// Walk reads the pages of one form. It goes forwards (page 1 on) when the
// form is newest-first and backwards (from a high page to 1) when it is
// oldest-first: in both cases from newer to older submissions, and in the
// direction in which moving pages repeat submissions rather than skip them
// (see the package doc).
type Walk[T any] struct {
	// Form names the form in errors.
	Form   string
	Fetch  Fetch
	Decode Decode[T]
	// Order is the form's sort order; unknown is walked as newest-first.
	Order  state.Order
	Bounds Bounds
	// PerPage is the page size as the pages read before the walk gave it;
	// the walk follows the pages it reads.
	PerPage int
	// Before, when set, is the page a walk from start reads just before
	// it, as read earlier (a backfill's bisection reads it). The walk's
	// first page is checked against it as every page is against the one
	// before: deletions between the two readings pulled submissions from
	// the first page onto it, which the fall of the total says.
	Before *formsapi.Page

	// newCopy, when set, is told of every copy within the bounds.
	newCopy func(at time.Time, key string)
}

// Forward reports whether the walk goes from page 1 on.
func (w *Walk[T]) Forward() bool { return w.Order != state.OrderOldestFirst }

// From walks from page start until the end of the form or the first page
// that reaches past the bounds' lower end. first, when it is page start as
// already fetched, saves a request. A failure is the last event's error.
func (w *Walk[T]) From(ctx context.Context, start int, first *formsapi.Page) iter.Seq2[Event[T], error] {
	return func(yield func(Event[T], error) bool) {
		r := &walking[T]{Walk: w, yield: yield, perPage: w.PerPage}
		if err := r.walk(ctx, start, first); err != nil && !errors.Is(err, errStopped) {
			yield(Event[T]{}, err)
		}
	}
}

// walking is one walk under way.
type walking[T any] struct {
	*Walk[T]
	yield   func(Event[T], error) bool
	perPage int
}

func (r *walking[T]) emit(ev Event[T]) error {
	if !r.yield(ev, nil) {
		return errStopped
	}
	return nil
}

func (r *walking[T]) fetch(ctx context.Context, page int) (*formsapi.Page, error) {
	p, err := fetchChecked(ctx, r.Fetch, r.Form, page)
	if err != nil {
		return nil, err
	}
	if p.PerPage > 0 {
		r.perPage = p.PerPage
	}
	return p, nil
}

func (r *walking[T]) walk(ctx context.Context, start int, first *formsapi.Page) error {
	step := 1
	if !r.Forward() {
		step = -1
	}
	prev, err := r.before(start - step)
	if err != nil {
		return err
	}
	for page := start; page >= 1; page += step {
		p := first
		first = nil
		if p == nil || p.CurrentPage != page {
			if p, err = r.fetch(ctx, page); err != nil {
				return err
			}
		}
		var done bool
		if prev, done, err = r.take(ctx, page, p, prev); err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("form %s: stopped after page %d: %w", r.Form, page, context.Cause(ctx))
		}
	}
	return nil
}

// before is the walk's Before page, as the walk remembers the page read
// before its first (page); nil without one.
func (r *walking[T]) before(page int) (*seenPage, error) {
	if r.Before == nil {
		return nil, nil
	}
	seen, _, err := r.consume(r.Before, nil)
	if err != nil {
		return nil, err
	}
	seen.page, seen.total = page, r.Before.Total
	return seen, nil
}

// take yields what page p (page) holds that prev, the page read before,
// did not, after reading again what a deletion pulled from it onto prev,
// and checks it against prev. It returns the page as the walk remembers
// it; done reports that it is the walk's last.
func (r *walking[T]) take(ctx context.Context, page int, p *formsapi.Page, prev *seenPage) (seen *seenPage, done bool, err error) {
	if r.Forward() && prev != nil && p.Total < prev.total {
		if p, prev, err = r.followPulled(ctx, page, p, prev); err != nil {
			return nil, false, err
		}
	}
	seen, reached, err := r.consume(p, prev.keySet())
	if err != nil {
		return nil, false, err
	}
	if err := r.check(ctx, page, p, prev, seen); err != nil {
		return nil, false, err
	}
	seen.page, seen.total = page, p.Total
	if err := r.emit(Event[T]{Kind: Walked, Page: page}); err != nil {
		return nil, false, err
	}
	return seen, reached || r.last(page, p), nil
}

// last reports whether page p is the walk's last.
func (r *walking[T]) last(page int, p *formsapi.Page) bool {
	if !r.Forward() {
		return page == 1
	}
	return page >= p.TotalPages || len(p.Submissions) == 0
}

// followPulled handles a fall of the total between prev, the page read
// before, and p, page page as just fetched. A deletion ahead of a
// newest-first reader pulls every later submission up by one: the first of
// this page moved onto the page read before, and would be skipped. The
// total dropping since that page was read says so; reading the pages
// before again picks the pulled ones up (readPulled). A submission added
// at the head meanwhile pushes them back down, onto this page as it is
// now, not as it was read (or onto a page read again before it came): the
// total rising while they are read again says so, and this page is read
// again before they are, until they are read with the form held still or
// falling. It returns this page and prev as last read.
func (r *walking[T]) followPulled(ctx context.Context, page int, p *formsapi.Page, prev *seenPage) (*formsapi.Page, *seenPage, error) {
	asRead := prev
	for tries := 1; ; tries++ {
		again, rose, err := r.readPulled(ctx, asRead, p.Total)
		if err != nil {
			return nil, nil, err
		}
		prev = again
		if !rose {
			return p, prev, nil
		}
		if tries == maxPulledRereads {
			return nil, nil, fmt.Errorf("form %s: submissions were added and deleted while pages %d and %d were read %d times: %w",
				r.Form, page-1, page, tries, ErrMoving)
		}
		if err := r.emit(Event[T]{Kind: Reread}); err != nil {
			return nil, nil, err
		}
		if p, err = r.fetch(ctx, page); err != nil {
			return nil, nil, err
		}
		if p.Total >= asRead.total {
			// Added as many as deleted: nothing is pulled above this page
			// any more.
			return p, prev, nil
		}
	}
}

// check completes a tie split at the border with the page before, and
// refuses a page repeating the one before it, submission for submission,
// which staged nothing (every key was the previous page's): the server or
// a proxy ignores the page parameter. Unless the total moved between the
// two: a page of submissions added ahead of a newest-first reader (or
// removed ahead of an oldest-first one) shifts the next page onto the one
// read, which the walk reads on past.
func (r *walking[T]) check(ctx context.Context, page int, p *formsapi.Page, prev, seen *seenPage) error {
	if prev == nil || p.Total != prev.total {
		return nil
	}
	if err := r.completeTies(ctx, page, prev, seen); err != nil {
		return err
	}
	if len(seen.order) > 0 && slices.Equal(prev.order, seen.order) {
		return fmt.Errorf("form %s: page %d holds exactly the submissions of page %d, so the server (or a proxy) ignores the page parameter: %w",
			r.Form, page, prev.page, formsapi.ErrPaging)
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

func newSeenPage(n int) *seenPage {
	return &seenPage{keys: make(map[string]struct{}, n), order: make([]string, 0, n)}
}

// keySet is the page's keys; nil for no page.
func (s *seenPage) keySet() map[string]struct{} {
	if s == nil {
		return nil
	}
	return s.keys
}

// served records the next submission of the page, in the order served.
func (s *seenPage) served(key string, createdAt time.Time) {
	s.order = append(s.order, key)
	i := len(s.order) - 1
	switch at := createdAt.Truncate(time.Millisecond); {
	case i == 0:
		s.headAt, s.headN, s.tailAt, s.tailN = at, 1, at, 1
	case at.Equal(s.tailAt):
		s.tailN++
		if s.tailN == i+1 {
			s.headN = s.tailN
		}
	default:
		s.tailAt, s.tailN = at, 1
	}
}

// run is the page's submissions sharing the created_at millisecond of its
// first (head) or last submission.
func (s *seenPage) run(head bool) (time.Time, []string) {
	if head {
		return s.headAt, s.order[:s.headN]
	}
	return s.tailAt, s.order[len(s.order)-s.tailN:]
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
func (r *walking[T]) completeTies(ctx context.Context, page int, prev, seen *seenPage) error {
	// Walking forwards, the border is prev's tail and this page's head;
	// backwards, this page's tail and prev's head.
	atPrev, before := prev.run(!r.Forward())
	at, here := seen.run(r.Forward())
	if len(before) == 0 || len(here) == 0 || !at.Equal(atPrev) || len(here) == len(seen.order) || len(before) == len(prev.order) {
		return nil
	}
	// A copy fills two places on one page with one key.
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
		if err := r.emit(Event[T]{Kind: Reread}); err != nil {
			return err
		}
		again, err := r.fetch(ctx, page)
		if err != nil {
			return err
		}
		if again.Total != prev.total {
			return nil // the form changed: the rescans of the walk see to it
		}
		more, _, err := r.consume(again, skip)
		if err != nil {
			return err
		}
		if a, ks := more.run(r.Forward()); a.Equal(at) {
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

// readPulled reads again, newest-first, the pages before the one just
// fetched, whose total (since) fell below that of prev, the page read
// before it: d deletions among the submissions already read pull the next
// d up onto the pages read, from prev backwards. It yields what it finds
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
// request.
func (r *walking[T]) readPulled(ctx context.Context, prev *seenPage, since int) (top *seenPage, rose bool, err error) {
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
		if err := r.emit(Event[T]{Kind: Reread}); err != nil {
			return nil, false, err
		}
		again, err := r.fetch(ctx, page)
		if err != nil {
			return nil, false, err
		}
		lowest = min(lowest, again.Total)
		rose = rose || again.Total > last
		last = again.Total
		// A submission on the page read again just before (above) is
		// pulled down onto this one by a deletion in between: read once.
		// One added since the walk began is yielded as on any page.
		skip := maps.Clone(prev.keys)
		maps.Copy(skip, above)
		seen, _, err := r.consume(again, skip)
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

// consume yields a page's submissions within the bounds, skipping those
// taken from the neighbouring page read just before (prev). reached
// reports that the page reaches past the bounds' lower end: newest-first,
// any submission on it (the rest of the form is older); oldest-first, its
// first one (the oldest on the page, so everything before it is older
// still).
func (r *walking[T]) consume(p *formsapi.Page, prev map[string]struct{}) (seen *seenPage, reached bool, err error) {
	seen = newSeenPage(len(p.Submissions))
	var onPage state.Copies
	for i := range p.Submissions {
		it, err := r.Decode(p, i)
		if err != nil {
			return nil, false, err
		}
		seen.served(it.Key, it.CreatedAt)
		if r.Bounds.Past(it.CreatedAt, it.Key) && (r.Forward() || i == 0) {
			reached = true
		}
		if _, dup := seen.keys[it.Key]; dup {
			if !it.HasID {
				// A second submission with this content on one page: a
				// copy.
				if onPage == nil {
					onPage = state.Copies{}
				}
				onPage[it.Key]++
				if r.newCopy != nil && r.Bounds.Want(it.CreatedAt, it.Key) {
					r.newCopy(it.CreatedAt, it.Key)
				}
			}
			continue
		}
		seen.keys[it.Key] = struct{}{}
		if _, dup := prev[it.Key]; dup || !r.Bounds.Want(it.CreatedAt, it.Key) {
			continue
		}
		if err := r.emit(Event[T]{Kind: Submission, Item: it}); err != nil {
			return nil, false, err
		}
	}
	if onPage != nil {
		if err := r.emit(Event[T]{Kind: Copies, Copies: onPage}); err != nil {
			return nil, false, err
		}
	}
	return seen, reached, nil
}

// distinctCount is how many different keys keys holds.
func distinctCount(keys []string) int {
	set := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		set[k] = struct{}{}
	}
	return len(set)
}
