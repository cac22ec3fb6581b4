package formsapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRetryAfterHoldsEveryFormOfTheClient: a server that sends only
// Retry-After (no X-RateLimit-* headers, as behind a proxy that strips
// them) refuses form a; while a waits, form b of the same client is held
// until the Retry-After ends instead of being sent at once, whether the
// header says seconds or an HTTP date. After the hold both are served.
func TestRetryAfterHoldsEveryFormOfTheClient(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter func(now time.Time) string
	}{
		{"seconds", func(time.Time) string { return "7" }},
		{"HTTP date", func(now time.Time) string { return now.Add(7 * time.Second).UTC().Format(http.TimeFormat) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu       sync.Mutex
				b        *bundle
				refused  time.Time
				arrivals = map[string][]time.Time{}
			)
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, attempt int) {
				now := b.clock.Now()
				form := strings.Split(r.URL.Path, "/")[3]
				mu.Lock()
				arrivals[form] = append(arrivals[form], now)
				first := attempt == 1
				if first {
					refused = now
				}
				mu.Unlock()
				if first {
					w.Header().Set("Retry-After", tc.retryAfter(now))
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				writePage(w, r, newerPage)
			})
			var bDone error
			var asked atomic.Bool
			b = setup(t, srv.URL, func(c *Config) {
				sleep := c.Sleep
				c.Sleep = func(ctx context.Context, d time.Duration) error {
					// Form a's wait after its 429: form b asks meanwhile.
					if asked.CompareAndSwap(false, true) {
						_, _, bDone = b.client.Page(ctx, "b", 1, 2)
					}
					return sleep(ctx, d)
				}
			})
			if _, _, err := b.client.Page(t.Context(), "a", 1, 2); err != nil {
				t.Fatalf("form a: %v", record(err))
			}
			if bDone != nil {
				t.Fatalf("form b: %v", record(bDone))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(arrivals["b"]) != 1 || len(arrivals["a"]) != 2 {
				t.Fatalf("requests: %v", arrivals)
			}
			end := refused.Add(7 * time.Second)
			if at := arrivals["b"][0]; at.Before(end) {
				t.Errorf("form b was sent %v after the 429, during its %s Retry-After", at.Sub(refused), "7s")
			}
			if at := arrivals["a"][1]; at.Before(end) {
				t.Errorf("form a retried %v after its 429", at.Sub(refused))
			}
		})
	}
}
