package formsapi

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// maxInWindow returns the most starts that fall in any half-open window
// [s, s+window) beginning at a start (the busiest window always does).
func maxInWindow(starts []time.Time, window time.Duration) int {
	s := slices.Clone(starts)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	best, j := 0, 0
	for i := range s {
		for j < len(s) && s[j].Sub(s[i]) < window {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

func allowed(rate float64) int { return max(1, int(math.Floor(rate))) }

func TestLimiterFakeClockSequential(t *testing.T) {
	for _, rate := range []float64{0.5, 1, 2.5, 5, 7.9, 20} {
		clock := newFakeClock()
		l := NewLimiter(rate, clock.Now, clock.Sleep)
		rnd := rand.New(rand.NewPCG(1, uint64(rate*10)))
		var starts []time.Time
		for range 300 {
			// Callers arrive at random moments, sometimes in bursts.
			if rnd.IntN(3) == 0 {
				clock.Advance(time.Duration(rnd.Int64N(int64(2 * time.Second))))
			}
			if err := l.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			starts = append(starts, clock.Now())
		}
		if got := maxInWindow(starts, time.Second); got > allowed(rate) {
			t.Errorf("rate %g: %d starts in one second, want <= %d", rate, got, allowed(rate))
		}
	}
}

func TestLimiterFakeClockConcurrent(t *testing.T) {
	const rate = 5.0
	clock := newFakeClock()
	t0 := clock.Now()
	var mu sync.Mutex
	var starts []time.Time
	// The clock stands still; each caller starts when its sleep would end.
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		starts = append(starts, t0.Add(d))
		mu.Unlock()
		return nil
	}
	l := NewLimiter(rate, clock.Now, sleep)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := l.Wait(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Exactly one caller went without sleeping (at t0).
	immediate := 50 - len(starts)
	if immediate != 1 {
		t.Fatalf("%d callers started without waiting, want 1", immediate)
	}
	starts = append(starts, t0)
	if got := maxInWindow(starts, time.Second); got > allowed(rate) {
		t.Errorf("%d starts in one second, want <= %d", got, allowed(rate))
	}
}

func TestLimiterCancelGivesSlotBack(t *testing.T) {
	clock := newFakeClock()
	ctx, cancel := context.WithCancel(t.Context())
	l := NewLimiter(1, clock.Now, func(ctx context.Context, d time.Duration) error { cancel(); return context.Canceled })
	if err := l.Wait(t.Context()); err != nil { // first is free
		t.Fatal(err)
	}
	if err := l.Wait(ctx); err == nil {
		t.Fatal("cancelled wait returned nil")
	}
	l.mu.Lock()
	next := l.next
	l.mu.Unlock()
	if want := clock.Now().Add(time.Second); !next.Equal(want) {
		t.Errorf("next = %v, want %v (slot given back)", next, want)
	}
}

func TestLimiterRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time test")
	}
	var mu sync.Mutex
	var starts []time.Time
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		writePage(w, r, newerPage)
	})
	c, err := New(Config{BaseURL: srv.URL, Token: testToken, RateLimit: 20})
	if err != nil {
		t.Fatal(record(err))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 3 { // three forms share the client's limiter
		wg.Go(func() {
			for i := range 10 {
				if _, _, err := c.Page(ctx, "form", g*10+i+1, 10); err != nil {
					t.Error(record(err))
					return
				}
			}
		})
	}
	wg.Wait()
	if len(starts) != 30 {
		t.Fatalf("%d requests, want 30", len(starts))
	}
	// Server-side timestamps carry scheduling noise of a few ms; a 950ms
	// window keeps the check exact in spirit without flaking.
	if got := maxInWindow(starts, 950*time.Millisecond); got > 20 {
		t.Errorf("%d requests within 950ms at rate 20", got)
	}
}

func TestLimiterInterval(t *testing.T) {
	tests := map[float64]time.Duration{
		1: time.Second, 5: 200 * time.Millisecond, 20: 50 * time.Millisecond,
		2.5: 500 * time.Millisecond, 0.5: 2 * time.Second, 0: time.Second, -3: time.Second, math.NaN(): time.Second,
	}
	for rate, want := range tests {
		if got := limiterInterval(rate); got != want {
			t.Errorf("limiterInterval(%g) = %v, want %v", rate, got, want)
		}
	}
}
