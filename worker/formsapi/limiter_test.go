package formsapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestLimiterCeilingSpacing: starts are at least 1/rate apart, whenever
// callers arrive, with no burst after an idle spell.
func TestLimiterCeilingSpacing(t *testing.T) {
	for _, r := range []float64{0.01, 0.5, 1, 2.5, 5, 7.9, 20} {
		clock := newFakeClock()
		l := newLimiter(r, 0, clock.Now, clock.Sleep)
		rnd := rand.New(rand.NewPCG(1, uint64(r*100)))
		interval := time.Duration(float64(time.Second) / r)
		var last time.Time
		for i := range 200 {
			if rnd.IntN(3) == 0 {
				clock.Advance(time.Duration(rnd.Int64N(int64(3 * interval))))
			}
			s, _, _, err := l.wait(t.Context(), noHoldLimit)
			if err != nil {
				t.Fatal(err)
			}
			l.observe(s, 200, nil, 0)
			now := clock.Now()
			// x/time/rate computes in float seconds: allow a microsecond.
			if i > 0 && now.Sub(last) < interval-time.Microsecond {
				t.Fatalf("rate %g: starts %v apart, want >= %v", r, now.Sub(last), interval)
			}
			last = now
		}
	}
}

// TestLimiterConcurrentCallersQueue: callers arriving together are given
// successive slots, one interval apart.
func TestLimiterConcurrentCallersQueue(t *testing.T) {
	clock := newFakeClock()
	var mu sync.Mutex
	var delays []time.Duration
	// The clock stands still; each caller records when it would start.
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		delays = append(delays, d)
		mu.Unlock()
		return nil
	}
	l := newLimiter(5, 0, clock.Now, sleep)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, _, _, err := l.wait(t.Context(), noHoldLimit); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[time.Duration]bool{}
	for _, d := range delays {
		slot := d.Round(time.Millisecond)
		if seen[slot] || slot%(200*time.Millisecond) != 0 {
			t.Fatalf("delays %v: want distinct multiples of 200ms", delays)
		}
		seen[slot] = true
	}
	if len(delays) != 49 {
		t.Fatalf("%d callers waited, want 49 (the first goes at once)", len(delays))
	}
}

// TestLimiterCancelGivesSlotBack: a caller that gives up while waiting
// does not delay the next one.
func TestLimiterCancelGivesSlotBack(t *testing.T) {
	clock := newFakeClock()
	ctx, cancel := context.WithCancel(t.Context())
	var sleeps []time.Duration
	l := newLimiter(1, 0, clock.Now, func(c context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		if c == ctx {
			cancel()
			return context.Canceled
		}
		return nil
	})
	if _, _, _, err := l.wait(t.Context(), noHoldLimit); err != nil { // first is free
		t.Fatal(err)
	}
	if _, _, _, err := l.wait(ctx, noHoldLimit); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait = %v", err)
	}
	if _, _, _, err := l.wait(t.Context(), noHoldLimit); err != nil {
		t.Fatal(err)
	}
	if len(sleeps) != 2 || sleeps[1] != time.Second {
		t.Errorf("sleeps = %v, want the third caller to wait 1s, not 2s", sleeps)
	}
}

// laravel models the service's throttle: a fixed window opened, in whole
// seconds, by the first request after the last one closed; refusals are
// not counted.
type laravel struct {
	limit  int
	window time.Duration
	hits   int
	reset  int64
	// noReset leaves X-RateLimit-Reset off 429s (only Retry-After).
	noReset bool
}

func (s *laravel) answer(now time.Time) (int, http.Header, time.Duration) {
	h := http.Header{}
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	sec := now.Unix()
	if sec >= s.reset {
		s.hits, s.reset = 0, sec+int64(s.window/time.Second)
	}
	if s.hits >= s.limit {
		h.Set("X-RateLimit-Remaining", "0")
		ra := s.reset - sec
		h.Set("Retry-After", strconv.FormatInt(ra, 10))
		if !s.noReset {
			h.Set("X-RateLimit-Reset", strconv.FormatInt(s.reset, 10))
		}
		return 429, h, time.Duration(ra) * time.Second
	}
	s.hits++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(s.limit-s.hits))
	return 200, h, 0
}

// TestLimiterFollowsServerWindow: with a high ceiling and a server that
// allows 60 requests a minute without saying the minute, the limiter sends
// 60 per window, takes at most one 429 (learning the window's end) and none
// once the window's length is known.
func TestLimiterFollowsServerWindow(t *testing.T) {
	for _, noReset := range []bool{false, true} {
		t.Run("no X-RateLimit-Reset="+strconv.FormatBool(noReset), func(t *testing.T) {
			clock := newFakeClock()
			clock.Advance(300 * time.Millisecond) // not on a whole second
			srv := &laravel{limit: 60, window: time.Minute, noReset: noReset}
			l := newLimiter(1000, time.Minute, clock.Now, clock.Sleep)
			start := clock.Now()
			ok, refused := 0, 0
			for clock.Now().Sub(start) < 10*time.Minute {
				s, _, _, err := l.wait(t.Context(), noHoldLimit)
				if err != nil {
					t.Fatal(err)
				}
				clock.Advance(2 * time.Millisecond) // latency
				status, h, ra := srv.answer(clock.Now())
				l.observe(s, status, h, ra)
				if status == 429 {
					refused++
					clock.Sleep(t.Context(), ra) // what the client's retry does
				} else {
					ok++
				}
			}
			t.Logf("%d answered, %d refused, window %v", ok, refused, l.window)
			if refused > 1 {
				t.Errorf("%d requests refused, want at most 1", refused)
			}
			// Ten windows of 60, but the first opens 0.3 s into a second
			// and each later one when the previous closes.
			if ok < 9*60 {
				t.Errorf("%d requests in 10 minutes, want at least %d", ok, 9*60)
			}
			if l.window != time.Minute {
				t.Errorf("learned window %v, want 1m", l.window)
			}
		})
	}
}

// TestLimiterConcurrentFormsShareBudget: four callers sharing one limiter
// against the same server stay within its window. They run in a synctest
// bubble, whose clock moves only when every caller sleeps: a shared fake
// clock that each sleeper moves on by its own sleep moved it on four times
// for four callers waiting for the same window, and how often that
// happened depended on the scheduler.
func TestLimiterConcurrentFormsShareBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &laravel{limit: 30, window: 10 * time.Second}
		var mu sync.Mutex // the server's state and counts
		l := newLimiter(1000, time.Minute, time.Now, sleepContext)
		ok, refused := 0, 0
		end := time.Now().Add(2 * time.Minute)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(end) {
					s, _, _, err := l.wait(t.Context(), noHoldLimit)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					status, h, ra := srv.answer(time.Now())
					if status == 429 {
						refused++
					} else {
						ok++
					}
					mu.Unlock()
					l.observe(s, status, h, ra)
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		t.Logf("%d answered, %d refused", ok, refused)
		if total := ok + refused; refused*50 > total || ok < 10*30 {
			t.Errorf("%d answered, %d refused (of %d): want <= 2%% refused and >= %d answered", ok, refused, total, 10*30)
		}
	})
}

// TestLimiterWithoutHeaders: a server that sends no rate-limit headers is
// paced by the ceiling alone, and its 429s do not stop the limiter.
func TestLimiterWithoutHeaders(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(10, time.Minute, clock.Now, clock.Sleep)
	for i := range 100 {
		s, _, _, err := l.wait(t.Context(), noHoldLimit)
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			l.observe(s, 429, http.Header{}, 0)
		} else {
			l.observe(s, 200, http.Header{}, 0)
		}
	}
	if got := clock.Now().Sub(newFakeClock().Now()); got != 99*100*time.Millisecond {
		t.Errorf("100 requests took %v, want 9.9s at 10/s", got)
	}
}

// spentWindow returns a limiter that saw a server's window of two requests
// a minute spent: two requests answered, the third refused, so the
// window's end is known.
func spentWindow(t *testing.T) (*fakeClock, *limiter) {
	t.Helper()
	clock := newFakeClock()
	srv := &laravel{limit: 2, window: time.Minute}
	l := newLimiter(1000, time.Minute, clock.Now, clock.Sleep)
	for range 3 {
		s, _, _, err := l.wait(t.Context(), noHoldLimit)
		if err != nil {
			t.Fatal(err)
		}
		status, h, ra := srv.answer(clock.Now())
		l.observe(s, status, h, ra)
	}
	return clock, l
}

// TestLimiterWaitHonoursContext: a caller waiting for the server's window
// to close stops when its context does.
func TestLimiterWaitHonoursContext(t *testing.T) {
	_, l := spentWindow(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	cancel()
	l.sleep = func(ctx context.Context, d time.Duration) error {
		if d > time.Second {
			return context.Cause(ctx)
		}
		return nil
	}
	if _, _, _, err := l.wait(ctx, noHoldLimit); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
	// A caller whose deadline comes first is not held for the window.
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	l.sleep = func(c context.Context, d time.Duration) error {
		cancel2()
		return context.Cause(c)
	}
	if _, _, _, err := l.wait(ctx2, noHoldLimit); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
}

// TestLimiterHoldWithinBudget: a hold for the window that would take
// longer than the caller's maxHold is refused before any of it is slept;
// one that fits is slept and reported as held, apart from the ceiling's
// spacing.
func TestLimiterHoldWithinBudget(t *testing.T) {
	clock, l := spentWindow(t)
	end := clock.Now()
	hold := l.holdAt(end)
	end = end.Add(hold)
	if hold < 59*time.Second || hold > time.Minute {
		t.Fatalf("holdAt = %v, want about the minute left of the window", hold)
	}
	if got := l.holdAt(clock.Now().Add(hold)); got != 0 {
		t.Errorf("holdAt the window's end = %v, want 0", got)
	}
	slept := len(clock.Sleeps())
	if _, _, _, err := l.wait(t.Context(), hold/2); !errors.Is(err, errHoldBudget) {
		t.Fatalf("wait with half the hold = %v, want errHoldBudget", err)
	}
	// Only the ceiling's spacing was slept, not the window.
	for _, d := range clock.Sleeps()[slept:] {
		if d > time.Millisecond {
			t.Errorf("slept %v before refusing", d)
		}
	}
	start := clock.Now()
	s, spaced, held, err := l.wait(t.Context(), hold)
	if err != nil {
		t.Fatal(err)
	}
	l.observe(s, 200, nil, 0)
	if !clock.Now().Equal(end) || spaced > time.Millisecond || spaced+held != end.Sub(start) {
		t.Errorf("admitted %v after the window's end, spaced %v, held %v; want at the end, held all but the spacing",
			clock.Now().Sub(end), spaced, held)
	}
}

// TestLimiterIgnoresEarlierWindowAnswers: a late answer from the window
// before does not spend the new window's budget.
func TestLimiterIgnoresEarlierWindowAnswers(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(1000, time.Minute, clock.Now, clock.Sleep)
	h := func(rem int) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {strconv.Itoa(rem)}}
	}
	old, _, _, _ := l.wait(t.Context(), noHoldLimit)
	clock.Advance(time.Millisecond)
	first, _, _, _ := l.wait(t.Context(), noHoldLimit)
	l.observe(first, 200, h(9), 0) // opens a window
	l.observe(old, 200, h(0), 0)   // sent before it opened
	// 9 left, less the old request still in flight when the window
	// opened (it may have been counted in it); its own answer of 0 is
	// from the window before and changes nothing.
	if l.budget != 8 {
		t.Errorf("budget %d, want 8", l.budget)
	}
}
