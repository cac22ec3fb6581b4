package formsapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
)

// BenchmarkAdaptiveRate measures how close the client comes to a plan limit
// it is not told. The simulator allows planLimit requests per planWindow
// (Laravel's fixed window, with X-RateLimit-Limit/-Remaining on every answer
// and Retry-After/X-RateLimit-Reset on a refusal); the client's ceiling is
// 1000/s; four forms are paged at once, on loopback, with the real clock.
//
// The sustained rate is measured over whole server windows: from the moment
// the second window opened (the first is where the client learns the window)
// to the moment the window after the last counted one opened, the requests
// answered 200 divided by that time, so the gaps the client leaves between
// windows count against it. The 429 share is over every request, learning
// included. Each iteration is one bounded run (benchWindows windows, at
// most a minute): use -benchtime 1x.
//
//	go test ./worker/formsapi -run '^$' -bench AdaptiveRate -benchtime 1x
func BenchmarkAdaptiveRate(b *testing.B) {
	const (
		planLimit    = 100
		planWindow   = 2 * time.Second
		benchWindows = 8 // windows measured, after the first
		forms        = 4
	)
	for range b.N {
		sim := apisim.New(apisim.Options{Seed: 12, Token: testToken, Variant: apisim.Live,
			Forms: []string{"a", "b", "c", "d"}, SubmissionsPerForm: 1000, PlanLimit: planLimit, PlanWindow: planWindow})
		var mu sync.Mutex
		var opened []time.Time // when each server window opened
		var answers []answer
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w}
			sim.ServeHTTP(rec, r)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			answers = append(answers, answer{now, rec.status})
			if rec.status == 200 && w.Header().Get("X-RateLimit-Remaining") == strconv.Itoa(planLimit-1) {
				opened = append(opened, now)
			}
		}))
		c, err := New(Config{BaseURL: srv.URL, Token: testToken, RateLimit: 1000, MaxWait: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		var wg sync.WaitGroup
		for _, f := range []string{"a", "b", "c", "d"} {
			wg.Go(func() {
				for page := 1; ctx.Err() == nil; page = page%100 + 1 {
					mu.Lock()
					done := len(opened) >= benchWindows+2
					mu.Unlock()
					if done {
						cancel()
						return
					}
					if _, _, err := c.Page(ctx, f, page, 10); err != nil && ctx.Err() == nil {
						b.Error(err)
						cancel()
						return
					}
				}
			})
		}
		wg.Wait()
		cancel()
		srv.Close()

		mu.Lock()
		if len(opened) < benchWindows+2 {
			b.Fatalf("only %d windows opened within a minute", len(opened))
		}
		from, to := opened[1], opened[benchWindows+1]
		ok, refused := 0, 0
		for _, a := range answers {
			switch {
			case a.status == http.StatusTooManyRequests:
				refused++
			case a.status == http.StatusOK && !a.at.Before(from) && a.at.Before(to):
				ok++
			}
		}
		total := len(answers)
		mu.Unlock()
		limit := float64(planLimit) / planWindow.Seconds()
		rate := float64(ok) / to.Sub(from).Seconds()
		b.ReportMetric(rate, "req/s")
		b.ReportMetric(limit, "limit-req/s")
		b.ReportMetric(rate/limit, "of-limit")
		b.ReportMetric(100*float64(refused)/float64(total), "429-%")
		b.Logf("server limit %d per %v (%.1f/s), ceiling 1000/s, %d forms: %d answered 200 in %d whole windows over %.2f s = %.2f req/s (%.3f of the limit); %d of %d requests answered 429 (%.2f %%)",
			planLimit, planWindow, limit, forms, ok, benchWindows, to.Sub(from).Seconds(), rate, rate/limit, refused, total, 100*float64(refused)/float64(total))
	}
}

type answer struct {
	at     time.Time
	status int
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
