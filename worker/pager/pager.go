package pager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// Fetch reads page n (1-based) of one form.
type Fetch func(ctx context.Context, page int) (*formsapi.Page, error)

// Item is a served submission as the pager walks it: Key and CreatedAt
// are what it dedupes and orders by, HasID tells a copy (two submissions
// under one content key on one page) from a submission served twice, and
// Value is what the reader made of it, handed back untouched.
type Item[T any] struct {
	Key       string
	CreatedAt time.Time
	HasID     bool
	Value     T
}

// Decode makes the item of submission i of page p. The pager calls it once
// per submission of every page it reads, re-reads included.
type Decode[T any] func(p *formsapi.Page, i int) (Item[T], error)

// Bounds say which submissions a walk is after. Walks go from newer to
// older submissions in either order, so the bounds have an upper end
// (submissions beyond it are not yielded) and a lower end (a page reaching
// past it is the last one read).
type Bounds struct {
	// Want reports whether a submission is to be yielded.
	Want func(at time.Time, key string) bool
	// Past reports whether a submission lies beyond the lower (older) end.
	Past func(at time.Time, key string) bool
}

// Above are the bounds of a sync: what threshold has not loaded.
func Above(threshold state.Watermark) Bounds {
	return Bounds{
		Want: func(at time.Time, key string) bool { return threshold.Compare(at, key) > 0 },
		Past: func(at time.Time, key string) bool { return threshold.Compare(at, key) <= 0 },
	}
}

// Kind says what an Event is.
type Kind int

const (
	// Submission is a submission within the bounds not yielded before in
	// this walk: the reader stages Item.
	Submission Kind = iota + 1
	// Copies ends a reading of a page that served submissions twice under
	// one key (no id): Copies counts them, by key, for that page.
	Copies
	// Reread says that a page, or the whole form, is read again because
	// the form moved while read (or a tie at a page border is not yet
	// complete).
	Reread
	// Walked says that page Page of the walk was read and checked; the
	// submissions on it were yielded before.
	Walked
)

// Event is one step of a walk, in the order the reader must take it.
type Event[T any] struct {
	Kind   Kind
	Item   Item[T]      // Submission
	Copies state.Copies // Copies
	Page   int          // Walked
}

// ErrMoving is the error of a form that moved under the walk, every time it
// read the same pages again, in a way it cannot follow.
var ErrMoving = errors.New("the form kept moving while read; it is read again next run")

// errStopped ends a walk whose reader stopped taking its events.
var errStopped = errors.New("pager: the reader stopped")

// fetchChecked fetches page of form and refuses it when its pagination
// does not add up, by the rule formsapi.Client applies to every page it
// decodes (Page.CheckPaging): a walk checks every page again, so that no
// other Fetch feeds it a page it would take for another.
func fetchChecked(ctx context.Context, fetch Fetch, form string, page int) (*formsapi.Page, error) {
	p, err := fetch(ctx, page)
	if err != nil {
		return nil, err
	}
	if err := p.CheckPaging(page); err != nil {
		return nil, fmt.Errorf("form %s: %w", form, err)
	}
	return p, nil
}

// Detect tells the sort order from page 1 (first), or, when page 1 cannot
// tell (one submission, or all sharing one created_at), from the stored
// order or the last page.
func Detect(ctx context.Context, fetch Fetch, first *formsapi.Page, stored state.Order) (state.Order, error) {
	if o := orderOf(first.Submissions); o != state.OrderUnknown {
		return o, nil
	}
	if stored != state.OrderUnknown || first.TotalPages <= 1 || len(first.Submissions) == 0 {
		return stored, nil
	}
	last, err := fetch(ctx, first.TotalPages)
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
