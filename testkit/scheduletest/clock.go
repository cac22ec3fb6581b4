// Package scheduletest provides a manually advanced clock for tests of code
// that uses package schedule, so that they neither sleep nor flake.
//
// The clock records every After call as a waiter. A test waits with
// BlockUntilWaiters until the code under test is parked on the clock, then
// calls Advance, which moves the time and fires the waiters that are due.
package scheduletest

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Clock is a fake schedule.Clock. Safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{} // closed and replaced whenever waiters change
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock stopped at now.
func NewClock(now time.Time) *Clock {
	return &Clock{now: now, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once Advance has
// moved it d or more forward. A d of zero or less fires at once.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	c.signal()
	return ch
}

// Advance moves the clock d forward and fires every waiter then due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now // buffered: never blocks
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
	c.signal()
}

// BlockUntilWaiters returns once at least n After channels are pending, or
// ctx's error when ctx is done first.
func (c *Clock) BlockUntilWaiters(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d waiters, have %d: %w", n, have, context.Cause(ctx))
		}
	}
}

// signal wakes BlockUntilWaiters; c.mu must be held.
func (c *Clock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}
