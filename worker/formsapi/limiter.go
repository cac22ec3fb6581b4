package formsapi

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter paces one Client's requests, all forms and retries together, by
// two rules:
//
//  1. The ceiling, Config.RateLimit: request starts are spaced at least
//     1/RateLimit apart, with no burst (golang.org/x/time/rate, burst 1).
//  2. The server's own signals, when its answers carry them. The service's
//     throttle (Laravel's) counts requests in a fixed window that opens at
//     the first request and closes a whole number of seconds later; every
//     counted answer says X-RateLimit-Limit (the plan's allowance per
//     window) and X-RateLimit-Remaining, and a refused one Retry-After
//     (seconds until the window closes, counted from the whole second) and
//     X-RateLimit-Reset (the window's end, unix seconds). The limiter keeps
//     a budget of the requests still allowed in the current window (the
//     last Remaining, minus the requests sent since), spends it at the
//     ceiling's pace, and when it is spent waits for the window to close
//     instead of collecting 429s.
//
// The window's length is not announced. Until it is known, a spent budget
// lets one request through at a time as a probe: the answer is either a
// fresh Remaining (a new window opened) or a 429 whose Retry-After or
// X-RateLimit-Reset says when the window ends; that end, less the start of
// the window (the request answered with Remaining = Limit-1), is the window's
// length, from which the end of every later window is predicted. So a user
// who does not know the plan's limit gets close to its full rate with about
// one 429 in the first window and none after. A server without the
// headers is paced by the ceiling, and a 429's Retry-After (seconds or an
// HTTP date) holds every request of the client until it ends: one hold for
// all the forms of an account, as for a server with the headers.
type limiter struct {
	ceiling *rate.Limiter
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	// maxWait bounds a wait for a window to close, whatever the server says.
	maxWait time.Duration

	mu       sync.Mutex
	limit    int           // X-RateLimit-Limit; 0 until a response carried it
	budget   int           // requests still allowed in the current window
	inflight int           // requests sent and not yet observed
	resetAt  time.Time     // end of the current window; zero when unknown
	window   time.Duration // learned window length; 0 when unknown
	opened   time.Time     // when the current window opened; zero when unknown
	probing  bool          // a probe is out (budget spent, window end unknown)
	changed  chan struct{} // closed and replaced whenever the state changes
}

// newLimiter returns a limiter with ceiling ratePerSec (> 0; +Inf means no
// ceiling). now and sleep default to time.Now and a context-aware timer.
func newLimiter(ratePerSec float64, maxWait time.Duration, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *limiter {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = sleepContext
	}
	lim := rate.Limit(ratePerSec)
	if math.IsInf(ratePerSec, 1) {
		lim = rate.Inf
	}
	return &limiter{
		ceiling: rate.NewLimiter(lim, 1),
		now:     now,
		sleep:   sleep,
		maxWait: cmp.Or(maxWait, DefaultMaxRetryAfter),
		changed: make(chan struct{}),
	}
}

// slot is one permitted request; observe must be called with its answer.
type slot struct {
	sent  time.Time
	probe bool
}

// noHoldLimit lets wait hold a request for as long as the window takes.
const noHoldLimit = time.Duration(math.MaxInt64)

// errHoldBudget refuses a hold for the server's window that would take
// longer than the caller can still spend.
var errHoldBudget = errors.New("formsapi: the rate-limit window closes after the wait budget is spent")

// wait blocks until a request may start, or ctx is done, and returns the
// slot, the time spent in the ceiling's spacing and the time held for the
// server's window to close (or for a probe's answer). A hold that would
// bring the held time above maxHold is refused with errHoldBudget before it
// is slept, so that a caller with a wait budget fails instead of sleeping
// past it.
func (l *limiter) wait(ctx context.Context, maxHold time.Duration) (slot, time.Duration, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return slot{}, 0, 0, context.Cause(ctx)
	}
	start := l.now()
	// The ceiling first. A reservation that is not used is given back, so
	// a cancelled caller does not delay the others.
	r := l.ceiling.ReserveN(start, 1)
	if d := r.DelayFrom(start); d > 0 {
		if err := l.sleep(ctx, d); err != nil {
			r.CancelAt(l.now())
			return slot{}, l.now().Sub(start), 0, err
		}
	}
	holdStart := l.now()
	spaced := holdStart.Sub(start)
	for {
		l.mu.Lock()
		now := l.now()
		s, wait, changed, ok := l.admitLocked(now)
		l.mu.Unlock()
		held := now.Sub(holdStart)
		if ok {
			return s, spaced, held, nil
		}
		if wait > 0 {
			if wait > maxHold-held {
				return slot{}, spaced, held, errHoldBudget
			}
			if err := l.sleep(ctx, wait); err != nil {
				return slot{}, spaced, l.now().Sub(holdStart), err
			}
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return slot{}, spaced, l.now().Sub(holdStart), context.Cause(ctx)
		}
	}
}

// holdAt is how long a request at t would be held for the current window
// to close, as far as is known now: callers check it against their budget
// before sleeping towards t.
func (l *limiter) holdAt(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if (l.limit > 0 && l.budget > 0) || l.resetAt.IsZero() || !t.Before(l.resetAt) {
		return 0
	}
	return l.resetAt.Sub(t)
}

// admitLocked decides about a request at now: admitted (ok), or to sleep
// for wait, or (wait 0) to wait until changed is closed.
func (l *limiter) admitLocked(now time.Time) (s slot, wait time.Duration, changed chan struct{}, ok bool) {
	if l.limit == 0 {
		// No rate-limit headers (yet): the ceiling, and the hold of a
		// 429's Retry-After (or X-RateLimit-Reset), which stops every
		// request of the client until it ends, not only the refused one.
		if !l.resetAt.IsZero() {
			if now.Before(l.resetAt) {
				return slot{}, min(l.resetAt.Sub(now), l.maxWait), nil, false
			}
			l.resetAt = time.Time{}
		}
		l.inflight++
		return slot{sent: now}, 0, nil, true
	}
	if !l.resetAt.IsZero() && !now.Before(l.resetAt) {
		// The window has closed; this request opens the next one.
		l.budget, l.opened, l.resetAt = l.limit, now, time.Time{}
		if l.window > 0 {
			l.resetAt = windowEnd(now, l.window)
		}
	}
	switch {
	case l.budget > 0:
		l.budget--
		l.inflight++
		return slot{sent: now}, 0, nil, true
	case !l.resetAt.IsZero():
		return slot{}, min(l.resetAt.Sub(now), l.maxWait), nil, false
	case !l.probing:
		l.probing = true
		l.inflight++
		return slot{sent: now, probe: true}, 0, nil, true
	}
	return slot{}, 0, l.changed, false
}

// windowEnd is when a window opened at t closes: Laravel sets its timer in
// whole unix seconds, so t's second plus the window.
func windowEnd(t time.Time, window time.Duration) time.Time {
	if window%time.Second == 0 {
		return t.Truncate(time.Second).Add(window)
	}
	return t.Add(window)
}

// observe takes the answer to s: its status (0 when none arrived), its
// headers (nil when none) and the parsed Retry-After (0 when none).
func (l *limiter) observe(s slot, status int, h http.Header, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.wakeLocked()
	l.inflight = max(0, l.inflight-1)
	if s.probe {
		l.probing = false
	}
	limit, okL := headerInt(h, "X-RateLimit-Limit")
	remaining, okR := headerInt(h, "X-RateLimit-Remaining")
	if status == http.StatusTooManyRequests {
		if okL && limit > 0 {
			l.limit = limit
		}
		l.budget = 0
		l.learnEndLocked(h, retryAfter)
		return
	}
	if !okL || !okR || limit < 1 || remaining >= limit {
		return
	}
	first := l.limit == 0
	l.limit = limit
	budget := max(0, remaining-l.inflight)
	switch {
	case s.sent.Before(l.opened):
		// Sent in an earlier window: its count says nothing about this one.
	case remaining == limit-1:
		// This request opened the window; the others in flight were
		// sent around it and are taken off the budget.
		l.opened = s.sent
		l.budget = budget
		if l.window > 0 {
			l.resetAt = windowEnd(s.sent, l.window)
		}
	case first:
		l.budget = budget
	default:
		// Within a window answers can arrive out of order: never raise
		// the budget on an older answer's word.
		l.budget = min(l.budget, budget)
	}
}

// learnEndLocked takes the window's end from a 429 and, knowing when the
// window opened, its length.
func (l *limiter) learnEndLocked(h http.Header, retryAfter time.Duration) {
	now := l.now()
	var end time.Time
	switch {
	case retryAfter > 0 && l.limit == 0:
		// A server that sends no rate-limit headers may count it from
		// anywhere: the whole of it, as the refused request waits it.
		end = now.Add(retryAfter)
	case retryAfter > 0:
		// Laravel counts Retry-After from the whole second.
		end = now.Truncate(time.Second).Add(retryAfter)
		if !end.After(now) {
			end = now.Add(retryAfter)
		}
	}
	if reset, ok := headerInt(h, "X-RateLimit-Reset"); ok {
		// The exact end, if it agrees with Retry-After (clocks can differ).
		t := time.Unix(int64(reset), 0)
		if t.After(now) && (end.IsZero() || absDuration(t.Sub(end)) <= 2*time.Second) {
			end = t
		}
	}
	if end.IsZero() {
		return
	}
	end = minTime(end, now.Add(l.maxWait))
	l.resetAt = end
	if !l.opened.IsZero() && end.After(l.opened) {
		w := end.Sub(l.opened.Truncate(time.Second)).Round(time.Second)
		if w >= time.Second && w <= time.Hour {
			l.window = w
		}
	}
}

func (l *limiter) wakeLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// headerInt reads a non-negative integer header.
func headerInt(h http.Header, name string) (int, bool) {
	if h == nil {
		return 0, false
	}
	v := h.Get(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
