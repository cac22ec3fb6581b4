package formsapi

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
)

// simClient serves a simulator on loopback and returns a client for it that
// does not really sleep, and the waits it chose after each 429.
func simClient(t *testing.T, opts apisim.Options) (*apisim.Server, *Client, *[]time.Duration) {
	t.Helper()
	opts.Token = testToken
	// One clock for the simulator and the client, which sleeping moves on:
	// a Retry-After is waited at once, and the limiter's hold, on the same
	// clock, has passed when the sleep returns (on the real clock it would
	// be waited again, for real).
	clock := newFakeClock()
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	sim := apisim.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var waits []time.Duration
	c, err := New(Config{
		BaseURL: srv.URL, Token: testToken, RateLimit: 10000, MaxWait: time.Hour,
		Now: clock.Now, Sleep: clock.Sleep,
		Observer: func(ev Event) {
			record(ev.Err)
			if ev.Status == 429 {
				mu.Lock()
				waits = append(waits, ev.Wait)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c, &waits
}

// readAll pages through a form the way a full sync does.
func readAll(t *testing.T, c *Client, formID string, limit int) []Submission {
	t.Helper()
	var all []Submission
	for page := 1; ; page++ {
		p, _, err := c.Page(t.Context(), formID, page, limit)
		if err != nil {
			t.Fatal(record(err))
		}
		all = append(all, p.Submissions...)
		if page >= p.TotalPages {
			return all
		}
	}
}

func TestClientAgainstSimulatorBothFormsBothOrders(t *testing.T) {
	t.Parallel()
	for _, v := range []apisim.Variant{apisim.Older, apisim.Newer, apisim.Live} {
		for _, o := range []apisim.Order{apisim.NewestFirst, apisim.OldestFirst} {
			t.Run(v.String()+"/"+o.String(), func(t *testing.T) {
				sim, c, _ := simClient(t, apisim.Options{Seed: 3, Variant: v, Order: o, Forms: []string{"f"}, SubmissionsPerForm: 137, TieEvery: 4})
				p, _, err := c.Page(t.Context(), "f", 1, 100)
				if err != nil {
					t.Fatal(err)
				}
				wantPer := map[apisim.Variant]int{apisim.Older: 25, apisim.Newer: 100, apisim.Live: 100}[v]
				if p.PerPage != wantPer || p.Newer != (v != apisim.Older) || p.Total != 137 {
					t.Errorf("page 1: per_page %d newer %v total %d", p.PerPage, p.Newer, p.Total)
				}
				got := readAll(t, c, "f", 100)
				want := sim.Submissions("f")
				if len(got) != len(want) {
					t.Fatalf("read %d submissions, want %d", len(got), len(want))
				}
				for i, s := range got {
					w := want[i]
					if o == apisim.NewestFirst {
						w = want[len(want)-1-i]
					}
					at := w.CreatedAt
					if v != apisim.Older {
						at = at.Truncate(time.Millisecond)
					}
					if !s.CreatedAt.Equal(at) || (s.ID != nil) != (v != apisim.Older) || (s.ID != nil && *s.ID != w.ID) {
						t.Fatalf("submission %d: got %v id %v, want %v id %d", i, s.CreatedAt, s.ID, at, w.ID)
					}
					if !jsonEqual(s.Fields, w.Fields) || len(s.Raw) == 0 {
						t.Fatalf("submission %d: fields %s raw %s, want fields %s", i, s.Fields, s.Raw, w.Fields)
					}
					if v == apisim.Live && (string(s.Files) != "[]" || s.IsSpam) {
						t.Fatalf("submission %d: live form has no files or is_spam, got %s %v", i, s.Files, s.IsSpam)
					}
				}
			})
		}
	}
}

// TestClientAgainstLiveSinglePage: a live form of one page answers
// "links": [], and its values come through.
func TestClientAgainstLiveSinglePage(t *testing.T) {
	t.Parallel()
	sim, c, _ := simClient(t, apisim.Options{Seed: 5, Variant: apisim.Live, Forms: []string{"contact"}, SubmissionsPerForm: 7})
	p, _, err := c.Page(t.Context(), "contact", 1, 10)
	if err != nil {
		t.Fatal(record(err))
	}
	if p.TotalPages != 1 || len(p.Submissions) != 7 || p.Next != "" || p.Previous != "" || !p.Newer {
		t.Fatalf("page = %+v", p)
	}
	want := sim.Submissions("contact")
	for i, s := range p.Submissions {
		var fields map[string]any
		if err := json.Unmarshal(s.Fields, &fields); err != nil || fields["email"] == nil || !jsonEqual(s.Fields, want[len(want)-1-i].Fields) {
			t.Errorf("submission %d fields = %s", i, s.Fields)
		}
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func TestClientAgainstSimulatorErrors(t *testing.T) {
	t.Parallel()
	sim, c, _ := simClient(t, apisim.Options{Seed: 4, Variant: apisim.Newer, Forms: []string{"off", "gone"}, SubmissionsPerForm: 5})
	sim.SetFormStatus("off", 400)
	sim.SetFormStatus("gone", 404)
	for form, want := range map[string]error{"off": ErrAccessDisabled, "gone": ErrFormNotFound, "never-existed": ErrFormNotFound} {
		if _, _, err := c.Page(t.Context(), form, 1, 10); !errors.Is(record(err), want) {
			t.Errorf("%s: %v, want %v", form, err, want)
		}
	}
	bad, err := New(Config{BaseURL: c.Config().BaseURL, Token: "wrong-token"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := bad.Page(t.Context(), "off", 1, 10); !errors.Is(record(err), ErrUnauthorized) {
		t.Errorf("wrong token: %v, want ErrUnauthorized", err)
	}
}

// Every Retry-After shape the simulator sends is honoured as the client
// promises: seconds and dates exactly (capped), absent or zero by backoff.
func TestClientAgainstSimulatorRetryAfterShapes(t *testing.T) {
	t.Parallel()
	for _, mode := range []apisim.RetryAfterMode{apisim.RetryAfterSeconds, apisim.RetryAfterDate, apisim.RetryAfterNone, apisim.RetryAfterZero, apisim.RetryAfterMixed} {
		t.Run(mode.String(), func(t *testing.T) {
			sim, c, waits := simClient(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 300,
				RateLimitFaults: 0.4, RetryAfter: mode})
			got := readAll(t, c, "f", 10)
			if len(got) != 300 {
				t.Fatalf("read %d of 300 through the 429s", len(got))
			}
			limited := sim.Stats().ByStatus[429]
			if limited == 0 || len(*waits) != limited {
				t.Fatalf("%d answers 429, %d waits", limited, len(*waits))
			}
			for _, w := range *waits {
				if w <= 0 || w > DefaultMaxRetryAfter {
					t.Errorf("wait %s outside (0, %s]", w, DefaultMaxRetryAfter)
				}
				if mode == apisim.RetryAfterSeconds && w%time.Second != 0 {
					t.Errorf("Retry-After in seconds not honoured exactly: waited %s", w)
				}
				if (mode == apisim.RetryAfterNone || mode == apisim.RetryAfterZero) && w > DefaultMaxBackoff {
					t.Errorf("backoff wait %s above the %s cap", w, DefaultMaxBackoff)
				}
			}
		})
	}
}

// With the simulator enforcing a rate and the client configured below it,
// 429s do not happen at all.
func TestClientRateLimitKeepsSimulatorHappy(t *testing.T) {
	t.Parallel()
	sim := apisim.New(apisim.Options{Seed: 6, Token: testToken, Variant: apisim.Newer, Forms: []string{"a", "b", "c"}, SubmissionsPerForm: 100, RateLimit: 20})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL, Token: testToken, RateLimit: 15})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, f := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for page := 1; page <= 5; page++ {
				if _, _, err := c.Page(t.Context(), f, page, 10); err != nil {
					t.Error(record(err))
				}
			}
		}()
	}
	wg.Wait()
	if n := sim.Stats().ByStatus[429]; n != 0 {
		t.Errorf("%d requests answered 429 although the client stayed under the server's rate", n)
	}
}

// TestClientLearnsUndisclosedPlanLimit: against the simulator's plan limit
// (20 requests per 10 s, not told to the client) and a ceiling of 1000/s,
// the client reads every page with at most one 429, and spends its waits in
// the limiter rather than in retries. Simulator and client share a fake
// clock, so nothing really sleeps.
func TestClientLearnsUndisclosedPlanLimit(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	sim := apisim.New(apisim.Options{Seed: 8, Token: testToken, Variant: apisim.Live, Forms: []string{"a", "b"},
		SubmissionsPerForm: 250, PlanLimit: 20, PlanWindow: 10 * time.Second, Now: clock.Now})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, Token: testToken, RateLimit: 1000, Now: clock.Now, Sleep: clock.Sleep,
		Observer: func(ev Event) { record(ev.Err) }})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	var paced time.Duration
	limited := 0
	for _, f := range []string{"a", "b"} {
		for page := 1; page <= 25; page++ {
			p, resp, err := c.Page(t.Context(), f, page, 10)
			if err != nil {
				t.Fatal(record(err))
			}
			if len(p.Submissions) != 10 {
				t.Fatalf("%s page %d: %d submissions", f, page, len(p.Submissions))
			}
			paced += resp.Paced
			limited += resp.RateLimited
		}
	}
	st := sim.Stats()
	if st.ByStatus[429] > 1 || limited != st.ByStatus[429] {
		t.Errorf("%d answers were 429 (client counted %d), want at most 1", st.ByStatus[429], limited)
	}
	// 50 pages at 20 per 10 s: the third window opens after 20 s. The
	// first window's end is learned from its 429 (a retry wait); the
	// second's is predicted (a wait in the limiter).
	if el := clock.Now().Sub(start); el > 21*time.Second || paced < 9*time.Second {
		t.Errorf("took %v on the fake clock, %v of it paced; want about 20 s, half of it paced", el, paced)
	}
}

// TestClientAgainstSimulatorDocumentedPaging: the documented defaults and
// edges, as the simulator serves them in each form: limit left to the
// server (10 in the newer and live forms, 25 in the older one), a page past
// the end (no submissions, not an error), an empty form, is_spam and files
// as the ground truth has them, and a form gone (410).
func TestClientAgainstSimulatorDocumentedPaging(t *testing.T) {
	t.Parallel()
	for _, v := range []apisim.Variant{apisim.Older, apisim.Newer, apisim.Live} {
		t.Run(v.String(), func(t *testing.T) {
			sim, c, _ := simClient(t, apisim.Options{Seed: 12, Variant: v, Order: apisim.OldestFirst, Forms: []string{"f", "empty"}, SubmissionsPerForm: 60})
			wantPer := map[apisim.Variant]int{apisim.Older: 25, apisim.Newer: 10, apisim.Live: 10}[v]
			p, _, err := c.Page(t.Context(), "f", 1, 0)
			if err != nil {
				t.Fatal(record(err))
			}
			if p.PerPage != wantPer || len(p.Submissions) != wantPer || p.Total != 60 || p.TotalPages != (60+wantPer-1)/wantPer || p.CurrentPage != 1 {
				t.Errorf("limit omitted: per_page %d, %d submissions, total %d, total_pages %d, current_page %d",
					p.PerPage, len(p.Submissions), p.Total, p.TotalPages, p.CurrentPage)
			}
			truth := sim.Submissions("f")
			for i, s := range p.Submissions {
				w := truth[i]
				spam, files := w.IsSpam, w.Files
				if v == apisim.Live {
					spam, files = false, []byte("[]")
				}
				if s.IsSpam != spam || !jsonEqual(s.Files, files) {
					t.Errorf("submission %d: is_spam %v files %s, want %v %s", i, s.IsSpam, s.Files, spam, files)
				}
			}
			past, _, err := c.Page(t.Context(), "f", 99, 0)
			if err != nil {
				t.Fatalf("page past the end: %v", record(err))
			}
			if len(past.Submissions) != 0 || past.CurrentPage != 99 || past.Total != 60 || past.Next != "" {
				t.Errorf("page past the end = %+v", past)
			}
			sim.Delete("empty", 60)
			empty, _, err := c.Page(t.Context(), "empty", 1, 0)
			if err != nil {
				t.Fatalf("empty form: %v", record(err))
			}
			if len(empty.Submissions) != 0 || empty.Total != 0 || empty.TotalPages > 1 {
				t.Errorf("empty form = %+v", empty)
			}
			sim.SetFormStatus("f", 410)
			if _, _, err := c.Page(t.Context(), "f", 1, 0); !errors.Is(record(err), ErrGone) {
				t.Errorf("form gone: %v, want ErrGone", err)
			}
		})
	}
}
