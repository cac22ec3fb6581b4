package formsapi

import (
	"context"
	"math"
	"sync"
	"time"
)

// Limiter spaces request starts evenly so that never more than
// max(1, floor(rate)) of them start in any one-second window, with no burst:
// after an idle spell only one request goes at once, the next one interval
// later. The server's 429 threshold is undocumented, so being smooth is
// cheaper than being fast and then waiting out Retry-After.
//
// A Limiter is safe for concurrent use; one Client shares one Limiter
// across all its forms and all retries.
type Limiter struct {
	interval time.Duration
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	next time.Time // earliest start of the next request
}

// NewLimiter returns a Limiter for rate requests per second (rate > 0; a
// non-positive or NaN rate is treated as 1). now and sleep default to
// time.Now and a context-aware timer when nil.
func NewLimiter(rate float64, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *Limiter {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = sleepContext
	}
	return &Limiter{interval: limiterInterval(rate), now: now, sleep: sleep}
}

// limiterInterval is the spacing between starts. It is 1/rate, widened for
// fractional rates above 1 (rate 2.5 would otherwise fit 3 starts in a
// second) so the floor(rate) guarantee holds.
func limiterInterval(rate float64) time.Duration {
	switch {
	case math.IsInf(rate, 1):
		return 0
	case !(rate > 0): // also NaN
		rate = 1
	}
	per := max(1, math.Floor(rate))
	iv := math.Max(float64(time.Second)/rate, float64(time.Second)/per)
	if iv >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(iv))
}

// Wait blocks until the caller may start a request, or ctx is done. A
// cancelled caller gives its slot back when nobody queued behind it.
func (l *Limiter) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	l.mu.Lock()
	now := l.now()
	slot := l.next
	if slot.Before(now) {
		slot = now
	}
	l.next = slot.Add(l.interval)
	l.mu.Unlock()

	d := slot.Sub(now)
	if d <= 0 {
		return nil
	}
	if err := l.sleep(ctx, d); err != nil {
		l.mu.Lock()
		if l.next.Equal(slot.Add(l.interval)) {
			l.next = slot
		}
		l.mu.Unlock()
		return err
	}
	return nil
}
