package formsapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestErrorMessageMember: a Laravel-style {"message": "..."} body is shown
// as its message; other bodies as an excerpt.
func TestErrorMessageMember(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"message":"This action is unauthorized."}`:               `server said "This action is unauthorized."`,
		`{"message":"Form \u00abx\u00bb gone","errors":{"a":[1]}}`: `server said "Form «x» gone"`,
		`{"message":""}`:     `server said "{\"message\":\"\"}"`,
		`{"message":3}`:      `server said "{\"message\":3}"`,
		`["message"]`:        `server said "[\"message\"]"`,
		`<h1>Forbidden</h1>`: `server said "<h1>Forbidden</h1>"`,
		`{"message":"token ` + testToken + ` bad"}`: `server said "token [REDACTED] bad"`,
	} {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(body))
		})
		_, _, err := setup(t, srv.URL).client.Page(t.Context(), "f", 1, 0)
		if !errors.Is(record(err), ErrForbidden) || !strings.Contains(err.Error(), want) {
			t.Errorf("body %s: err = %v\nwant it to contain %s", body, err, want)
		}
	}
}

// TestRedactEveryEncoding: the token echoed in any encoding a body can
// carry is redacted from the excerpt, the message and the wrapped error.
func TestRedactEveryEncoding(t *testing.T) {
	t.Parallel()
	const tok = "Ab/Cd+Ef=9x_é"
	jsonU := func(s string) string { // every rune as \uXXXX, mixed hex case
		var b strings.Builder
		for i, r := range s {
			if i%2 == 0 {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		}
		return b.String()
	}
	encodings := map[string]string{
		"exact":              tok,
		"json slash":         `Ab\/Cd+Ef=9x_é`,
		"json unicode":       jsonU(tok),
		"json mixed":         `A\u0062\/Cd\u002bEf=9x_\u00e9`,
		"url":                `Ab%2FCd%2BEf%3D9x_%C3%A9`,
		"url lower hex":      `Ab%2fCd%2bEf%3d9x_%c3%a9`,
		"url every byte":     `%41%62%2F%43%64%2B%45%66%3D%39%78%5F%C3%A9`,
		"url twice":          `Ab%252FCd%252BEf%253D9x_%25C3%25A9`,
		"upper case":         strings.ToUpper(tok),
		"lower case":         strings.ToLower(tok),
		"html references":    `Ab&#47;Cd&#x2B;Ef&#61;9x_&#233;`,
		"case and url":       `aB%2fcD%2BeF%3D9X_%C3%89`,
		"bearer header echo": `Bearer ` + tok,
	}
	m := newTokenMatcher(tok)
	for name, enc := range encodings {
		t.Run(name, func(t *testing.T) {
			body := `{"error":"bad token","echo":"` + enc + `"}`
			if got := m.redact(body); strings.Contains(got, enc) && enc != "" || !strings.Contains(got, Redacted) {
				t.Fatalf("redact(%s) = %s", body, got)
			}
			var gotReq int
			var mu sync.Mutex
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				mu.Lock()
				gotReq++
				mu.Unlock()
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(body))
			})
			b := setup(t, srv.URL, func(c *Config) { c.Token = tok })
			_, _, err := b.client.Page(t.Context(), "f", 1, 0)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v", err)
			}
			for _, text := range []string{err.Error(), e.Body, fmt.Sprintf("%+v", err)} {
				if strings.Contains(text, enc) || !strings.Contains(text, Redacted) {
					t.Errorf("token (%s) not redacted: %s", name, text)
				}
			}
			// A decode error quoting the token in a 200 body.
			srv2 := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				writeJSON(w, `{"data":[{"id":1,"created_at":"`+strings.ReplaceAll(enc, `"`, `\"`)+`"}],"meta":{"pagination":{"total":1,"per_page":10,"current_page":1}}}`)
			})
			b2 := setup(t, srv2.URL, func(c *Config) { c.Token = tok })
			_, _, err = b2.client.Page(t.Context(), "f", 1, 0)
			if err == nil || strings.Contains(err.Error(), enc) {
				t.Errorf("decode error leaks the token: %v", err)
			}
		})
	}
	// Unprintable bytes dropped from a body cannot join a split token.
	if got := excerpt([]byte("x"+tok[:3]+"\x00"+tok[3:]+"y"), m); got != "x"+Redacted+"y" {
		t.Errorf("excerpt joined a split token: %q", got)
	}
	// Text without the token is left alone, and a prefix is not the token.
	for _, s := range []string{"", "Ab/Cd+Ef=9x_", "no secret here %2F \\/ &#47;"} {
		if got := m.redact(s); got != s {
			t.Errorf("redact(%q) = %q", s, got)
		}
	}
}

// TestUnauthorizedStopsEveryForm: after one 401, no call of the Client
// sends a request: ten forms fetched four at a time with a wrong token
// make at most four requests between them.
func TestUnauthorizedStopsEveryForm(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"message":"Unauthenticated."}`))
	})
	b := setup(t, srv.URL)
	forms := make(chan string, 10)
	for i := range 10 {
		forms <- fmt.Sprintf("form-%d", i)
	}
	close(forms)
	var mu sync.Mutex
	requests := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for f := range forms {
				_, resp, err := b.client.Page(t.Context(), f, 1, 0)
				var e *Error
				if !errors.Is(record(err), ErrUnauthorized) || !errors.As(err, &e) || !strings.Contains(err.Error(), "FORMSYNC_API_TOKEN_FILE") {
					t.Errorf("%s: err = %v, want ErrUnauthorized naming the token settings", f, err)
				}
				mu.Lock()
				requests += resp.Requests
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if srv.Hits() > 4 || requests != srv.Hits() {
		t.Errorf("%d requests reached the server (%d counted), want at most 4", srv.Hits(), requests)
	}
	// Later calls cost nothing.
	_, resp, err := b.client.Page(t.Context(), "late", 2, 0)
	if !errors.Is(record(err), ErrUnauthorized) || resp.Requests != 0 {
		t.Errorf("late call: err %v, %d requests", err, resp.Requests)
	}
}

// TestLongTokenNotCutInDecodeErrors: a decode error quotes at most a few
// dozen characters of a bad value; a long token echoed there must not
// leave its first characters behind.
func TestLongTokenNotCutInDecodeErrors(t *testing.T) {
	t.Parallel()
	tok := "Zq" + strings.Repeat("0123456789abcdef", 4) // 66 characters
	for name, sub := range map[string]string{
		"created_at": `{"id":1,"created_at":"` + tok + `"}`,
		"id":         `{"id":"` + tok + `","created_at":"2026-01-01T00:00:00Z"}`,
		"fields":     `{"fields":"` + tok + `","created_at":"2026-01-01T00:00:00Z"}`,
	} {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			writeJSON(w, `{"data":[`+sub+`],"meta":{"pagination":{"total":1,"per_page":10,"current_page":1}}}`)
		})
		b := setup(t, srv.URL, func(c *Config) { c.Token = Secret(tok) })
		_, _, err := b.client.Page(t.Context(), "f", 1, 0)
		if !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), tok[:12]) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want a malformed error naming %s without any of the token", name, err, name)
		}
	}
}

// TestUnauthorizedWhileWaitingGivesSlotBack: a call admitted by the limiter
// after another form's 401 is not sent, and hands its slot back: when that
// slot was the one probe allowed while the server's window is spent, every
// other caller waiting for the probe's answer would otherwise wait for good.
func TestUnauthorizedWhileWaitingGivesSlotBack(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writePage(w, r, newerPage) })
	var armed atomic.Bool
	var b *bundle
	b = setup(t, srv.URL, func(c *Config) {
		sleep := c.Sleep
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			if armed.CompareAndSwap(true, false) {
				// Another form is answered 401 while this one waits.
				b.client.rejected.Store(&Error{FormID: "other", Status: http.StatusUnauthorized, Kind: KindUnauthorized})
			}
			return sleep(ctx, d)
		}
	})
	l := b.client.limiter
	// The server's window is spent and its end unknown: one probe at a time.
	l.mu.Lock()
	l.limit, l.budget = 10, 0
	l.mu.Unlock()
	// The ceiling's token is taken, so the call sleeps for its spacing.
	l.ceiling.ReserveN(b.clock.Now(), 1)
	armed.Store(true)
	_, resp, err := b.client.Page(t.Context(), "f", 1, 0)
	if !errors.Is(record(err), ErrUnauthorized) || resp.Requests != 0 {
		t.Fatalf("err %v, %d requests; want ErrUnauthorized, none sent", err, resp.Requests)
	}
	l.mu.Lock()
	probing, inflight := l.probing, l.inflight
	l.mu.Unlock()
	if probing || inflight != 0 {
		t.Errorf("after the call: probing %v, %d in flight; want the slot given back", probing, inflight)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, _, _, err := l.wait(ctx, noHoldLimit)
	if err != nil {
		t.Fatalf("next caller: %v; want it admitted as the next probe", err)
	}
	l.observe(s, 0, nil, 0)
}
