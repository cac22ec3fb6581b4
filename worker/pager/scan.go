package pager

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// Scan reads what is new in a form since its watermark (everything when
// Full, or when the form was never read), in the direction its detected
// order needs, and reads the form whole once more when the totals say the
// first pass missed something.
type Scan[T any] struct {
	// Form names the form in errors.
	Form   string
	Fetch  Fetch
	Decode Decode[T]
	// Stored is the order stored for the form, taken when page 1 cannot
	// tell it.
	Stored state.Order
	// Watermark is what is loaded (zero: nothing), and LastTotal the total
	// the API counted when it was (-1: unknown).
	Watermark state.Watermark
	LastTotal int64
	// Lookback lowers the threshold of an incremental read by this much,
	// so that submissions changed since they were loaded are read again.
	Lookback time.Duration
	// Full reads every page whatever the watermark.
	Full bool
	// Reconcile reads every page, once more when the total fell while a
	// form not oldest-first was read, and reports whether what was read
	// adds up to the API's count (Facts.AddedUp).
	Reconcile bool

	facts Facts
	// The current pass: the submissions yielded, those of them (and of
	// the copies within its bounds) newer than Watermark, the copies of
	// the whole scan; the totals it saw: the last, and whether it fell
	// between two requests.
	seen, fresh int64
	copies      state.Copies
	last        int
	fell        bool
}

// Facts are what a scan learnt of the form.
type Facts struct {
	Order state.Order
	// Total is the lowest total the last pass saw; -1 before its first
	// page.
	Total int64
	// PerPage is the page size of the last page read that gave one.
	PerPage int
	// Seen is how many submissions the last pass yielded, copies counted.
	Seen int64
	// AddedUp, for a Reconcile, reports that a pass saw as many
	// submissions as the API counts.
	AddedUp bool
}

// Facts are what the scan learnt, as far as it got.
func (s *Scan[T]) Facts() Facts {
	f := s.facts
	f.Seen = s.seen + s.copies.Count()
	return f
}

// Events scans the form. A failure is the last event's error; Facts says
// what was learnt by then.
func (s *Scan[T]) Events(ctx context.Context) iter.Seq2[Event[T], error] {
	return func(yield func(Event[T], error) bool) {
		s.facts, s.copies = Facts{Total: -1}, nil
		if err := s.scan(ctx, yield); err != nil && !errors.Is(err, errStopped) {
			yield(Event[T]{}, err)
		}
	}
}

func (s *Scan[T]) scan(ctx context.Context, yield func(Event[T], error) bool) error {
	first, err := s.fetch(ctx, 1)
	if err != nil {
		return err
	}
	if s.facts.Order, err = Detect(ctx, s.fetch, first, s.Stored); err != nil {
		return err
	}
	incremental := !s.Full && !s.Watermark.IsZero() && s.facts.Order != state.OrderUnknown
	threshold := state.Watermark{}
	if incremental {
		// What is newer than the threshold is yielded (again).
		threshold = s.Watermark
		if s.Lookback > 0 {
			threshold = state.Watermark{CreatedAt: s.Watermark.CreatedAt.Add(-s.Lookback)}
		}
	}
	if err := s.pass(ctx, yield, threshold, first); err != nil {
		return err
	}
	if s.Reconcile {
		return s.reconcile(ctx, yield)
	}
	// A short read: fewer new submissions than the total grew by means some
	// were inserted behind the watermark. Read everything once.
	if incremental && s.LastTotal >= 0 && s.fresh < s.facts.Total-s.LastTotal {
		return s.again(ctx, yield)
	}
	return nil
}

// reconcile decides whether the read adds up, reading the form once more
// when that alone cannot tell. Deletions while a newest-first form is read
// pull submissions onto pages already read. The walk reads those again,
// but additions and deletions that keep coming can still make it skip
// one, and the count of the read does not show it: submissions read and
// then deleted make up for it. A reconcile would mark the skipped row
// deleted, so one that saw the total fall reads the form once more, and
// marks only what neither read served.
func (s *Scan[T]) reconcile(ctx context.Context, yield func(Event[T], error) bool) error {
	s.facts.AddedUp = s.addsUp()
	if !s.fell || s.facts.Order == state.OrderOldestFirst {
		return nil
	}
	if err := s.again(ctx, yield); err != nil {
		return err
	}
	s.facts.AddedUp = s.facts.AddedUp || s.addsUp()
	return nil
}

// addsUp reports whether the pass just made saw as many submissions as the
// API counted at its lowest.
func (s *Scan[T]) addsUp() bool { return s.seen+s.copies.Count() >= s.facts.Total }

// again reads the whole form once more.
func (s *Scan[T]) again(ctx context.Context, yield func(Event[T], error) bool) error {
	if !yield(Event[T]{Kind: Reread}, nil) {
		return errStopped
	}
	return s.pass(ctx, yield, state.Watermark{}, nil)
}

// fetch reads a page and takes in its totals.
func (s *Scan[T]) fetch(ctx context.Context, page int) (*formsapi.Page, error) {
	p, err := fetchChecked(ctx, s.Fetch, s.Form, page)
	if err != nil {
		return nil, err
	}
	s.fell = s.fell || p.Total < s.last
	s.last = p.Total
	if s.facts.Total < 0 || int64(p.Total) < s.facts.Total {
		s.facts.Total = int64(p.Total)
	}
	if p.PerPage > 0 {
		s.facts.PerPage = p.PerPage
	}
	return p, nil
}

// pass makes one walk over the form for what threshold has not loaded.
// first, when not nil, is page 1 already fetched in this pass.
func (s *Scan[T]) pass(ctx context.Context, yield func(Event[T], error) bool, threshold state.Watermark, first *formsapi.Page) error {
	s.fresh, s.facts.Total, s.seen, s.fell, s.last = 0, -1, 0, false, -1
	if first != nil {
		s.facts.Total, s.last = int64(first.Total), first.Total
	}
	w := &Walk[T]{Form: s.Form, Fetch: s.fetch, Decode: s.Decode, Order: s.facts.Order, Bounds: Above(threshold), newCopy: s.newCopy}
	start, first, err := s.start(ctx, w, first)
	if err != nil {
		return err
	}
	w.PerPage = s.facts.PerPage
	for ev, err := range w.From(ctx, start, first) {
		if err != nil {
			return err
		}
		switch ev.Kind {
		case Submission:
			s.seen++
			if s.Watermark.IsNew(ev.Item.CreatedAt, ev.Item.Key) {
				s.fresh++
			}
		case Copies:
			s.copies = s.copies.Merge(ev.Copies)
		}
		if !yield(ev, nil) {
			return errStopped
		}
	}
	return nil
}

// start is the page a pass starts at, and that page when already read:
// page 1 forwards; backwards, the last page (page 1 as fetched before
// would be stale by the time the walk reaches it).
func (s *Scan[T]) start(ctx context.Context, w *Walk[T], first *formsapi.Page) (int, *formsapi.Page, error) {
	if w.Forward() {
		return 1, first, nil
	}
	if first == nil {
		var err error
		if first, err = s.fetch(ctx, 1); err != nil {
			return 0, nil, err
		}
	}
	if last := max(first.TotalPages, 1); last > 1 {
		return last, nil, nil
	}
	return 1, first, nil
}

func (s *Scan[T]) newCopy(at time.Time, key string) {
	if s.Watermark.IsNew(at, key) {
		s.fresh++
	}
}
