package formsapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// unreachableClient is a client of base whose waits are recorded, not
// slept.
func unreachableClient(t *testing.T, base string, hc *http.Client) (*Client, func() []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var waits []time.Duration
	c, err := New(Config{BaseURL: base, Token: testToken, RateLimit: 1000, HTTPClient: hc,
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			return ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), waits...)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestWrongBaseURLFailsAtOnce: a connection refused, or a host name that
// does not resolve, before the API ever answered is a base URL that
// points nowhere: the first attempt gives up, naming the URL, instead of
// retrying for the whole wait budget.
func TestWrongBaseURLFailsAtOnce(t *testing.T) {
	t.Parallel()
	// No DNS query leaves the machine: the dialer answers for the
	// resolver, as a name under .invalid would be answered.
	noSuchHost := &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}}}
	for name, tc := range map[string]struct {
		base string
		hc   *http.Client
	}{
		"refused":      {"http://" + closedPort(t), nil},
		"no such host": {"https://forms.example.invalid", noSuchHost},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, waits := unreachableClient(t, tc.base, tc.hc)
			_, resp, err := c.Page(t.Context(), "f", 1, 100)
			record(err)
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindTransport {
				t.Fatalf("error %v, want a transport error", err)
			}
			if w := waits(); len(w) != 0 || resp.Requests != 1 {
				t.Errorf("%d requests, waits %v: want one request and no retry", resp.Requests, w)
			}
			if !strings.Contains(err.Error(), tc.base) {
				t.Errorf("error %q does not name the URL %s", err, tc.base)
			}
		})
	}
}

// TestRefusedAfterAnAnswerIsRetried: once the API answered, a refused
// connection is the API going away for a while (a restart): retried.
func TestRefusedAfterAnAnswerIsRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":[],"meta":{"pagination":{"total":0,"count":0,"per_page":100,"current_page":1,"total_pages":0}}}`))
	}))
	c, waits := unreachableClient(t, srv.URL, nil)
	if _, _, err := c.Page(t.Context(), "f", 1, 100); err != nil {
		t.Fatalf("the first page: %v", record(err))
	}
	srv.Close()
	_, resp, err := c.Page(t.Context(), "f", 2, 100)
	record(err)
	if err == nil || resp.Requests < 2 || len(waits()) == 0 {
		t.Errorf("after an answer, a refused connection: %d requests, waits %v, error %v: want retries", resp.Requests, waits(), err)
	}
}
