package trigger

import (
	"context"
	"slices"
	"sync"
	"time"
)

// QueueConfig configures a Queue.
type QueueConfig struct {
	// Gather is how long the queue waits after the first trigger of a batch
	// for others to join it, so that forms triggered together are synced
	// and committed together. Defaults to 200ms; negative means no wait.
	Gather time.Duration
}

// A Queue holds the forms waiting to be synced because a trigger named
// them. Each form is pending at most once.
type Queue struct {
	gather time.Duration

	mu      sync.Mutex
	pending []string // in the order they were first triggered
	wake    chan struct{}
}

// NewQueue returns an empty queue.
func NewQueue(cfg QueueConfig) *Queue {
	g := cfg.Gather
	switch {
	case g == 0:
		g = 200 * time.Millisecond
	case g < 0:
		g = 0
	}
	return &Queue{gather: g, wake: make(chan struct{}, 1)}
}

// Add marks form pending. It reports false when the form was pending
// already: the trigger coalesced into the sync that is waiting.
func (q *Queue) Add(form string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if slices.Contains(q.pending, form) {
		return false
	}
	q.pending = append(q.pending, form)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// Pending returns the number of forms waiting for a sync.
func (q *Queue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// take empties the queue and returns what it held.
func (q *Queue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	forms := q.pending
	q.pending = nil
	return forms
}

// Run calls sync with the pending forms, one batch at a time, until ctx
// ends. A batch is what is pending once Gather has passed since the first
// of its triggers; triggers that come while sync runs form the next batch.
// sync's own errors are its to report: Run goes on with the next batch.
func (q *Queue) Run(ctx context.Context, sync func(ctx context.Context, forms []string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
		if q.gather > 0 {
			t := time.NewTimer(q.gather)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if forms := q.take(); len(forms) > 0 {
			sync(ctx, forms)
		}
	}
}
