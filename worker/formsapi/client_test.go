package formsapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPageRequest(t *testing.T) {
	t.Parallel()
	var got *http.Request
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		got = r.Clone(r.Context())
		writePage(w, r, newerPage)
	})
	b := setup(t, srv.URL+"/prefix/")
	p, _, err := b.client.Page(t.Context(), "a/b c", 2, 100)
	if err != nil {
		t.Fatal(record(err))
	}
	if p.FormID != "a/b c" || !p.Newer {
		t.Errorf("page = %+v", p)
	}
	if got.URL.EscapedPath() != "/prefix/api/forms/a%2Fb%20c/submissions" {
		t.Errorf("path = %s", got.URL.EscapedPath())
	}
	if q := got.URL.Query(); q.Get("page") != "2" || q.Get("limit") != "100" {
		t.Errorf("query = %s", got.URL.RawQuery)
	}
	if h := got.Header.Get("Authorization"); h != "Bearer "+testToken {
		t.Errorf("Authorization header wrong (not printed)")
	}
	if got.Header.Get("Accept") != "application/json" || got.Header.Get("User-Agent") != "formsync/dev" {
		t.Errorf("headers = %v %v", got.Header.Get("Accept"), got.Header.Get("User-Agent"))
	}
	ev := b.Events()
	if len(ev) != 1 || ev[0].Status != 200 || ev[0].Attempt != 1 || ev[0].Err != nil || ev[0].FormID != "a/b c" || ev[0].Page != 2 {
		t.Errorf("events = %+v", ev)
	}
}

func TestPageOlderFormIgnoresLimit(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeJSON(w, olderPage) // per_page 25 whatever limit says
	})
	p, _, err := setup(t, srv.URL).client.Page(t.Context(), "f1", 2, 100)
	if err != nil {
		t.Fatal(record(err))
	}
	if p.PerPage != 25 || p.Newer || p.Submissions[0].ID != nil {
		t.Errorf("page = %+v", p)
	}
}

func TestPageArgumentErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "http://127.0.0.1:1")
	for _, tc := range []struct {
		form        string
		page, limit int
	}{{"", 1, 10}, {"f", 0, 10}, {"f", 1, -1}, {"f", 1, 101}} {
		if _, _, err := b.client.Page(t.Context(), tc.form, tc.page, tc.limit); record(err) == nil {
			t.Errorf("Page(%q,%d,%d) succeeded", tc.form, tc.page, tc.limit)
		}
	}
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status   int
		kind     Kind
		sentinel error
		advice   string
		attempts int
	}{
		{400, KindAccessDisabled, ErrAccessDisabled, `enable "HTTP API Access" in the form's Settings tab`, 1},
		{401, KindUnauthorized, ErrUnauthorized, "FORMSYNC_API_TOKEN", 1},
		// A wrong base URL path answers 404 for every form, too.
		{404, KindFormNotFound, ErrFormNotFound, "check the form id (FORMSYNC_FORMS or --form), or FORMSYNC_API_BASE_URL if every form answers 404", 1},
		{403, KindForbidden, ErrForbidden, "may not read this form", 1},
		{410, KindGone, ErrGone, "form was removed, or the service retired this version of the API", 1},
		{418, KindUnexpectedStatus, ErrUnexpectedStatus, "unexpected HTTP status 418", 1},
		{302, KindUnexpectedStatus, ErrUnexpectedStatus, "unexpected HTTP status 302", 1},
		{429, KindRateLimited, ErrRateLimited, "rate limited", 1},
		{500, KindServer, ErrServer, "server error (HTTP 500)", 1},
		{503, KindServer, ErrServer, "server error (HTTP 503)", 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Location", "https://elsewhere.example.com/")
				w.WriteHeader(tt.status)
				fmt.Fprintf(w, `{"error":"nope","echo":%q}`, r.Header.Get("Authorization"))
			})
			// MaxWait below the first backoff: retryable kinds give up at once.
			b := setup(t, srv.URL, func(c *Config) { c.MaxWait = time.Millisecond })
			_, _, err := b.client.Page(t.Context(), "contact-form", 3, 10)
			record(err)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Kind != tt.kind || e.Status != tt.status || e.FormID != "contact-form" || e.Page != 3 {
				t.Errorf("error = %+v", e)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.sentinel)
			}
			for _, other := range []error{ErrAccessDisabled, ErrUnauthorized, ErrFormNotFound, ErrRateLimited, ErrServer, ErrMalformed, ErrTransport, ErrForbidden, ErrGone, ErrPaging, ErrUnexpectedStatus} {
				if other != tt.sentinel && errors.Is(err, other) {
					t.Errorf("also matches %v", other)
				}
			}
			msg := err.Error()
			if !strings.Contains(msg, `form "contact-form" page 3`) || !strings.Contains(msg, tt.advice) {
				t.Errorf("message %q lacks form/page or %q", msg, tt.advice)
			}
			if !strings.Contains(e.Body, redacted) || strings.Contains(msg, testToken) {
				t.Errorf("body excerpt not redacted: %q", e.Body)
			}
			if srv.Hits() != tt.attempts {
				t.Errorf("hits = %d, want %d", srv.Hits(), tt.attempts)
			}
		})
	}
}

func TestErrorBodyExcerptBounded(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(400)
		_, _ = w.Write([]byte("line1\n\x1b[31mred\x00" + strings.Repeat("é", 500) + testToken))
	})
	_, _, err := setup(t, srv.URL).client.Page(t.Context(), "f", 1, 0)
	var e *Error
	if !errors.As(record(err), &e) {
		t.Fatal(err)
	}
	if len(e.Body) > maxExcerpt+len("…") || strings.ContainsAny(e.Body, "\n\x1b\x00") || !strings.HasPrefix(e.Body, "line1 [31mred") {
		t.Errorf("excerpt = %q", e.Body)
	}
}

func TestRetryAfterWaits(t *testing.T) {
	t.Parallel()
	clock0 := newFakeClock().Now()
	backoff := 500 * time.Millisecond // InitialBackoff with jitter at its midpoint
	tests := []struct {
		name      string
		header    string
		wantWait  time.Duration
		wantParse time.Duration
	}{
		{"seconds", "7", 7 * time.Second, 7 * time.Second},
		{"http date", clock0.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second, 10 * time.Second},
		{"zero", "0", backoff, 0},
		{"negative", "-3", backoff, 0},
		{"missing", "", backoff, 0},
		{"garbage", "in a while", backoff, 0},
		{"past date", clock0.Add(-time.Minute).Format(http.TimeFormat), backoff, 0},
		{"absurd", "1000000000", 60 * time.Second, 1e9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					if tt.header != "" {
						w.Header().Set("Retry-After", tt.header)
					}
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				writeJSON(w, newerPage)
			})
			b := setup(t, srv.URL)
			if _, _, err := b.client.Page(t.Context(), "f", 1, 10); err != nil {
				t.Fatal(record(err))
			}
			if got := b.Waits(); !slices.Equal(got, []time.Duration{tt.wantWait}) {
				t.Errorf("waits = %v, want [%v]", got, tt.wantWait)
			}
			if got := b.clock.Sleeps(); !slices.Equal(got, []time.Duration{tt.wantWait}) {
				t.Errorf("sleeps = %v, want [%v]", got, tt.wantWait)
			}
			ev := b.Events()
			if len(ev) != 2 || ev[0].Status != 429 || ev[0].RetryAfter != tt.wantParse || !errors.Is(ev[0].Err, ErrRateLimited) || ev[1].Status != 200 {
				t.Errorf("events = %+v", ev)
			}
		})
	}
}

func TestRetryAfterNeverMultiplied(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 4 {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		writeJSON(w, newerPage)
	})
	b := setup(t, srv.URL)
	if _, _, err := b.client.Page(t.Context(), "f", 1, 10); err != nil {
		t.Fatal(record(err))
	}
	want := []time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second, 7 * time.Second}
	if got := b.Waits(); !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 7 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		writeJSON(w, newerPage)
	})
	rnd := []float64{0.5, 0, 0.999999, 0.5, 0.5, 0.5, 0.5}
	i := 0
	b := setup(t, srv.URL, func(c *Config) {
		c.MaxBackoff = 4 * time.Second
		c.Rand = func() float64 { r := rnd[i%len(rnd)]; i++; return r }
	})
	if _, _, err := b.client.Page(t.Context(), "f", 1, 10); err != nil {
		t.Fatal(record(err))
	}
	ms := time.Millisecond
	// 500ms, 1s*0.5, 2s*~1.5, 4s, then capped at MaxBackoff.
	want := []time.Duration{500 * ms, 500 * ms, 2999999 * time.Microsecond, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	got := b.Waits()
	if len(got) != len(want) {
		t.Fatalf("waits = %v, want %v", got, want)
	}
	for k := range want {
		if d := got[k] - want[k]; d < -ms || d > ms {
			t.Errorf("wait %d = %v, want ~%v", k, got[k], want[k])
		}
	}
}

func TestMaxWaitBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		header   string
		status   int
		maxWait  time.Duration
		attempts int
		waits    []time.Duration
		sentinel error
	}{
		// 7+7 = 14 fits in 20s; a third wait would make 21.
		{"retry-after", "7", 429, 20 * time.Second, 3, []time.Duration{7 * time.Second, 7 * time.Second}, ErrRateLimited},
		// capped absurd value: 60s fits in 2m twice, not three times.
		{"absurd capped", "1000000000", 429, 2 * time.Minute, 3, []time.Duration{time.Minute, time.Minute}, ErrRateLimited},
		// backoff 0.5+1 = 1.5 fits in 3s; +2s would not.
		{"backoff", "", 429, 3 * time.Second, 3, []time.Duration{500 * time.Millisecond, time.Second}, ErrRateLimited},
		{"server errors", "", 500, 3 * time.Second, 3, []time.Duration{500 * time.Millisecond, time.Second}, ErrServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(tt.status)
			})
			b := setup(t, srv.URL, func(c *Config) { c.MaxWait = tt.maxWait })
			_, _, err := b.client.Page(t.Context(), "f", 5, 10)
			record(err)
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("err = %v, want %v", err, tt.sentinel)
			}
			var e *Error
			if !errors.As(err, &e) || e.Attempts != tt.attempts || !strings.Contains(err.Error(), fmt.Sprintf("gave up after %d attempts", tt.attempts)) {
				t.Errorf("err = %v, want %d attempts", err, tt.attempts)
			}
			if srv.Hits() != tt.attempts {
				t.Errorf("hits = %d, want %d", srv.Hits(), tt.attempts)
			}
			if got := b.Waits(); !slices.Equal(got, tt.waits) {
				t.Errorf("waits = %v, want %v", got, tt.waits)
			}
			if ev := b.Events(); ev[len(ev)-1].Wait != 0 {
				t.Errorf("last event has a wait: %+v", ev[len(ev)-1])
			}
		})
	}
}

// A 429 with X-RateLimit-Reset but no Retry-After: the backoff is short,
// and the limiter then holds the retry until the window closes. That hold
// is part of the retry's wait, so the budget bounds the whole call: with
// the window a minute ahead on every answer, 2m allow two retries.
func TestMaxWaitCountsWindowHoldAfter429(t *testing.T) {
	t.Parallel()
	var b *bundle
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(b.clock.Now().Add(time.Minute).Unix(), 10))
		w.WriteHeader(http.StatusTooManyRequests)
	})
	b = setup(t, srv.URL, func(c *Config) { c.MaxWait = 2 * time.Minute })
	start := b.clock.Now()
	_, resp, err := b.client.Page(t.Context(), "f", 1, 10)
	if !errors.Is(record(err), ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 3 || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Errorf("err = %v, want 3 attempts", err)
	}
	if srv.Hits() != 3 || resp.Requests != 3 || resp.RateLimited != 3 {
		t.Errorf("hits = %d, response = %+v, want 3 requests", srv.Hits(), resp)
	}
	// Backoff 0.5s then held to the window's end, backoff 1s then held;
	// the third 429's retry (2s + 58s) would exceed the budget and is not
	// slept at all.
	spent := b.clock.Now().Sub(start)
	if spent != 2*time.Minute || resp.Waited != 2*time.Minute || resp.Paced != 0 {
		t.Errorf("clock advanced %v, Waited %v, Paced %v; want 2m, 2m, 0", spent, resp.Waited, resp.Paced)
	}
	want := []time.Duration{500 * time.Millisecond, 59500 * time.Millisecond, time.Second, 59 * time.Second}
	if got := b.clock.Sleeps(); !slices.Equal(got, want) {
		t.Errorf("sleeps = %v, want %v", got, want)
	}
}

// Only what follows a 429 is spent from MaxWait: a window that successful
// requests used up is pacing, and a Page call held for it does not fail
// however short the budget.
func TestMaxWaitIgnoresPacingBySuccessfulAnswers(t *testing.T) {
	t.Parallel()
	var b *bundle
	var opened time.Time
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		// A plan of 2 requests per 10 s, opened by the first request.
		w.Header().Set("X-RateLimit-Limit", "2")
		switch n {
		case 1, 4:
			opened = b.clock.Now().Truncate(time.Second)
			w.Header().Set("X-RateLimit-Remaining", "1")
		case 2, 5:
			w.Header().Set("X-RateLimit-Remaining", "0")
		case 3:
			// The probe past the spent window; its 429 teaches the limiter
			// the window's length.
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(opened.Add(10*time.Second).Unix(), 10))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		default:
			w.Header().Set("X-RateLimit-Remaining", "1")
		}
		writePage(w, r, newerPage)
	})
	b = setup(t, srv.URL, func(c *Config) { c.MaxWait = time.Second })
	for page := 1; page <= 2; page++ {
		if _, _, err := b.client.Page(t.Context(), "f", page, 2); err != nil {
			t.Fatalf("page %d: %v", page, record(err))
		}
	}
	// After its 429 the probe's retry would be held 10s: over the budget,
	// so the call fails at once, without sleeping.
	before := b.clock.Now()
	_, resp, err := b.client.Page(t.Context(), "f", 3, 2)
	if !errors.Is(record(err), ErrRateLimited) || resp.Requests != 1 {
		t.Fatalf("err = %v after %d requests, want ErrRateLimited after 1", err, resp.Requests)
	}
	// The ceiling's 1ms spacing before the request is all it may sleep.
	if slept := b.clock.Now().Sub(before); slept > time.Millisecond || resp.Waited != 0 {
		t.Errorf("slept %v (Waited %v) before giving up", slept, resp.Waited)
	}
	b.clock.Advance(10 * time.Second) // the next window
	for page := 3; page <= 4; page++ {
		if _, _, err := b.client.Page(t.Context(), "f", page, 2); err != nil {
			t.Fatalf("page %d: %v", page, record(err))
		}
	}
	// The window is spent and known: the limiter holds this call ~10s,
	// ten times the budget, and it succeeds.
	_, resp, err = b.client.Page(t.Context(), "f", 5, 2)
	if err != nil {
		t.Fatalf("page 5 held by pacing failed: %v", record(err))
	}
	if resp.Requests != 1 || resp.Waited != 0 || resp.Paced < 9*time.Second {
		t.Errorf("response = %+v, want one request paced about 10s", resp)
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, newerPage)
	})
	b := setup(t, srv.URL)
	p, _, err := b.client.Page(t.Context(), "f", 1, 2)
	if err != nil || len(p.Submissions) != 2 {
		t.Fatalf("page=%v err=%v", p, record(err))
	}
	ev := b.Events()
	if len(ev) != 2 || ev[0].Status != 503 || !errors.Is(ev[0].Err, ErrServer) || ev[0].Wait != 500*time.Millisecond {
		t.Errorf("events = %+v", ev)
	}
}

func TestTruncatedBodyThenSuccess(t *testing.T) {
	t.Parallel()
	tests := map[string]func(w http.ResponseWriter){
		// The connection closes before Content-Length bytes arrive.
		"short transfer": func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", fmt.Sprint(len(olderPage)))
			_, _ = w.Write([]byte(olderPage[:100]))
		},
		// Complete transfer of a cut document.
		"cut document": func(w http.ResponseWriter) { writeJSON(w, olderPage[:100]) },
	}
	for name, first := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					first(w)
					return
				}
				writeJSON(w, olderPage)
			})
			b := setup(t, srv.URL)
			p, _, err := b.client.Page(t.Context(), "f", 2, 0)
			if err != nil || len(p.Submissions) != 2 {
				t.Fatalf("page=%v err=%v", p, record(err))
			}
			ev := b.Events()
			if len(ev) != 2 || !errors.Is(ev[0].Err, ErrMalformed) || ev[0].Wait == 0 {
				t.Errorf("events = %+v", ev)
			}
		})
	}
}

func TestMalformedStopsAfterThreeAttempts(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeJSON(w, `<html>maintenance</html>`)
	})
	_, _, err := setup(t, srv.URL).client.Page(t.Context(), "f", 1, 0)
	if !errors.Is(record(err), ErrMalformed) || srv.Hits() != 3 {
		t.Fatalf("err = %v hits = %d, want malformed after 3", err, srv.Hits())
	}
}

func TestOversizedBody(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writePage(w, r, olderPage)
	})
	b := setup(t, srv.URL, func(c *Config) { c.MaxBodyBytes = 100 })
	_, _, err := b.client.Page(t.Context(), "f", 1, 0)
	if !errors.Is(record(err), ErrMalformed) || !strings.Contains(err.Error(), "100 byte limit") {
		t.Fatalf("err = %v", err)
	}
	// Not retried: the same page is as large the next time.
	if srv.Hits() != 1 {
		t.Errorf("%d requests for an oversized page, want 1", srv.Hits())
	}
	// Refused on its announced length, and without one on what arrives.
	chunked := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(olderPage[:80]))
		w.(http.Flusher).Flush() // chunked: no Content-Length
		_, _ = w.Write([]byte(olderPage[80:]))
	})
	_, resp, err := setup(t, chunked.URL, func(c *Config) { c.MaxBodyBytes = 100 }).client.Page(t.Context(), "f", 1, 0)
	if !errors.Is(record(err), ErrMalformed) || !strings.Contains(err.Error(), "100 byte limit") || resp.Requests != 1 {
		t.Errorf("chunked: err = %v after %d requests, want the limit after 1", err, resp.Requests)
	}
	// Exactly at the limit is fine.
	b = setup(t, srv.URL, func(c *Config) { c.MaxBodyBytes = int64(len(olderPage)) })
	if _, _, err := b.client.Page(t.Context(), "f", 1, 0); err != nil {
		t.Fatal(record(err))
	}
}

func TestStalledBodyTimesOutAndRetries(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Content-Length", fmt.Sprint(len(olderPage)))
			_, _ = w.Write([]byte(olderPage[:50]))
			w.(http.Flusher).Flush()
			select { // stall until the client gives up
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		writePage(w, r, olderPage)
	})
	b := setup(t, srv.URL, func(c *Config) { c.RequestTimeout = 200 * time.Millisecond })
	start := time.Now()
	p, _, err := b.client.Page(t.Context(), "f", 1, 0)
	if err != nil || len(p.Submissions) != 2 {
		t.Fatalf("page=%v err=%v", p, record(err))
	}
	ev := b.Events()
	if len(ev) != 2 || !errors.Is(ev[0].Err, ErrTransport) || !strings.Contains(ev[0].Err.Error(), "request timeout") {
		t.Errorf("events = %+v", ev)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v", el)
	}
}

func TestTransportErrorRetried(t *testing.T) {
	t.Parallel()
	// The connection is dropped before any response: a reset, retried
	// (a refused connection before any answer is not: unreachable).
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	b := setup(t, srv.URL, func(c *Config) { c.MaxWait = 2 * time.Second })
	_, _, err := b.client.Page(t.Context(), "f", 1, 0)
	if !errors.Is(record(err), ErrTransport) {
		t.Fatalf("err = %v", err)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("cause not kept: %v", err)
	}
	// Waits 0.5s and 1s fit in 2s; the next (2s) would not.
	if ev := b.Events(); len(ev) != 3 || ev[0].Status != 0 || srv.Hits() != 3 {
		t.Errorf("events = %+v, hits %d", ev, srv.Hits())
	}
}

func TestContextCancelStopsWaiting(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(429)
	})
	ctx, cancel := context.WithCancel(t.Context())
	b := setup(t, srv.URL, func(c *Config) {
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
	})
	_, _, err := b.client.Page(ctx, "f", 1, 0)
	record(err)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrRateLimited) || srv.Hits() != 1 {
		t.Fatalf("err = %v hits = %d", err, srv.Hits())
	}
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	ok := func(base string) Config { return Config{BaseURL: base, Token: testToken} }
	for _, base := range []string{"https://forms.example.com", "https://forms.example.com/prefix/", "http://127.0.0.1:8080", "http://127.9.9.9", "http://[::1]:8080", "http://localhost:8080", "HTTP://LOCALHOST"} {
		if _, err := New(ok(base)); err != nil {
			t.Errorf("New(%s): %v", base, record(err))
		}
	}
	insecure := []string{"http://example.com", "http://10.0.0.1", "http://[::2]:80", "http://localhost.example.com", "ftp://example.com"}
	for _, base := range insecure {
		_, err := New(ok(base))
		if !errors.Is(record(err), ErrInsecureURL) {
			t.Errorf("New(%s) = %v, want ErrInsecureURL", base, err)
		}
	}
	for _, cfg := range []Config{
		{Token: testToken},
		{BaseURL: "forms.example.com", Token: testToken},
		{BaseURL: "https://user:" + testToken + "@forms.example.com", Token: testToken},
		{BaseURL: "https://forms.example.com?x=1", Token: testToken},
		{BaseURL: "https://forms.example.com"},
		{BaseURL: "https://forms.example.com", Token: testToken + "\n"},
		{BaseURL: "https://forms.example.com", Token: "Bearer " + testToken},
		{BaseURL: "https://forms.example.com", Token: testToken, RateLimit: -1},
		{BaseURL: "https://forms.example.com", Token: testToken, RateLimit: 0.001},
		{BaseURL: "https://forms.example.com", Token: testToken, RateLimit: 0.0099},
		{BaseURL: "https://forms.example.com", Token: testToken, RateLimit: math.NaN()},
		{BaseURL: "https://forms.example.com", Token: testToken, RateLimit: math.Inf(1)},
		{BaseURL: "https://forms.example.com", Token: testToken, MaxWait: -time.Second},
	} {
		if _, err := New(cfg); record(err) == nil {
			t.Errorf("New(%v) succeeded", cfg)
		}
	}
	// Every problem at once.
	_, err := New(Config{BaseURL: "http://example.com", RateLimit: -1, RequestTimeout: -1, MaxBodyBytes: -1})
	msg := record(err).Error()
	for _, want := range []string{"plain http", "token is empty", "rate limit", "request timeout", "max body bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if _, err := New(Config{BaseURL: "https://forms.example.com", Token: testToken, RateLimit: MinRateLimit}); err != nil {
		t.Errorf("RateLimit %g refused: %v", MinRateLimit, record(err))
	}
	c, err := New(ok("https://forms.example.com"))
	if err != nil {
		t.Fatal(record(err))
	}
	got := c.Config()
	if got.RateLimit != 5 || got.MaxWait != 2*time.Minute || got.MaxRetryAfter != time.Minute || got.RequestTimeout != 30*time.Second || got.MaxBodyBytes != 32<<20 || got.UserAgent != "formsync/dev" {
		t.Errorf("defaults = %v", got)
	}
}

func TestRedirectsNotFollowed(t *testing.T) {
	t.Parallel()
	other := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, newerPage) })
	api := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	})
	_, _, err := setup(t, api.URL).client.Page(t.Context(), "f", 1, 0)
	if !errors.Is(record(err), ErrUnexpectedStatus) || other.Hits() != 0 {
		t.Fatalf("err = %v, other hits = %d", err, other.Hits())
	}
}

func TestTokenNeverInMalformedError(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		writeJSON(w, `{"data":[{"created_at":"`+tok+`","id":"`+tok+`"}],"meta":{"pagination":{"total":1,"count":1,"per_page":25,"current_page":1}}}`)
	})
	_, _, err := setup(t, srv.URL).client.Page(t.Context(), "f", 1, 0)
	if !errors.Is(record(err), ErrMalformed) || strings.Contains(err.Error(), testToken) {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigPrintingRedactsToken(t *testing.T) {
	t.Parallel()
	cfg := Config{BaseURL: "https://forms.example.com", Token: testToken}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("config", "cfg", cfg, "ptr", &cfg)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "cfg", cfg)
	type outer struct{ API Config }
	texts := []string{
		buf.String(),
		fmt.Sprint(cfg), fmt.Sprintf("%v|%+v|%#v|%s|%q", cfg, cfg, cfg, cfg, cfg),
		fmt.Sprintf("%v|%+v|%#v", &cfg, &cfg, &cfg),
		fmt.Sprintf("%v|%+v|%#v", outer{cfg}, outer{cfg}, outer{cfg}),
	}
	for _, s := range texts {
		recordText(s)
		if strings.Contains(s, testToken) || !strings.Contains(s, redacted) {
			t.Errorf("token not redacted in %q", s)
		}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(record(err))
	}
	if s := fmt.Sprintf("%+v", c.Config()); strings.Contains(s, testToken) {
		t.Errorf("effective config leaks: %s", s)
	}
}

// TestCertificateRejectedNotRetried: a server certificate that does not
// verify fails the call at once: it verifies no better a moment later, and
// retrying spent the whole wait budget on every page of every form.
func TestCertificateRejectedNotRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writePage(w, r, newerPage) }))
	t.Cleanup(srv.Close)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	b := setup(t, srv.URL)                           // the default client, which does not trust the test CA
	_, resp, err := b.client.Page(t.Context(), "f", 1, 0)
	var cv *tls.CertificateVerificationError
	if !errors.Is(record(err), ErrTransport) || !errors.As(err, &cv) {
		t.Fatalf("err = %v, want a transport error with the verification failure", err)
	}
	if resp.Requests != 1 || resp.Waited != 0 {
		t.Errorf("%d requests, waited %v; want 1 and no wait", resp.Requests, resp.Waited)
	}
}
