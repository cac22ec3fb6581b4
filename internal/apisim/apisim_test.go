package apisim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// wirePage is the envelope as a client decodes it.
type wirePage struct {
	Data []struct {
		ID        *int64          `json:"id"`
		Fields    json.RawMessage `json:"fields"`
		Files     json.RawMessage `json:"files"`
		IsSpam    bool            `json:"is_spam"`
		CreatedAt string          `json:"created_at"`
	} `json:"data"`
	Meta struct {
		Pagination struct {
			Total       int                        `json:"total"`
			Count       int                        `json:"count"`
			PerPage     int                        `json:"per_page"`
			CurrentPage int                        `json:"current_page"`
			TotalPages  int                        `json:"total_pages"`
			Links       map[string]json.RawMessage `json:"links"`
		} `json:"pagination"`
	} `json:"meta"`
}

type bundle struct {
	sim  *Server
	base string
}

func setup(t *testing.T, opts Options) bundle {
	t.Helper()
	sim := New(opts)
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	return bundle{sim: sim, base: ts.URL}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// get requests path (relative to base, or an absolute URL) with the token.
func (b bundle) get(t *testing.T, path, token string) response {
	t.Helper()
	u := path
	if !strings.HasPrefix(path, "http") {
		u = b.base + path
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", u, err)
	}
	return response{resp.StatusCode, resp.Header, body}
}

func (b bundle) page(t *testing.T, form string, page, limit int) wirePage {
	t.Helper()
	q := fmt.Sprintf("/api/forms/%s/submissions?page=%d", form, page)
	if limit > 0 {
		q += fmt.Sprintf("&limit=%d", limit)
	}
	r := b.get(t, q, DefaultToken)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", q, r.status, r.body)
	}
	var p wirePage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("GET %s: decoding: %v\n%s", q, err, r.body)
	}
	return p
}

var (
	re6 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
	re3 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
)

func TestEnvelopeShape(t *testing.T) {
	t.Parallel()
	for _, v := range []Variant{Older, Newer} {
		for _, o := range []Order{NewestFirst, OldestFirst} {
			t.Run(v.String()+"/"+o.String(), func(t *testing.T) {
				b := setup(t, Options{Seed: 1, Variant: v, Order: o, SubmissionsPerForm: 60})
				r := b.get(t, "/api/forms/contact/submissions", DefaultToken)
				if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
					t.Fatalf("status %d type %q", r.status, r.header.Get("Content-Type"))
				}
				// Exact key sets, decoded generically.
				var raw map[string]any
				if err := json.Unmarshal(r.body, &raw); err != nil {
					t.Fatal(err)
				}
				if got := slices.Sorted(mapsKeys(raw)); !slices.Equal(got, []string{"data", "meta"}) {
					t.Fatalf("top-level keys %v", got)
				}
				item := raw["data"].([]any)[0].(map[string]any)
				wantItem := []string{"created_at", "fields", "files", "is_spam"}
				if v == Newer {
					wantItem = []string{"created_at", "fields", "files", "id", "is_spam"}
				}
				if got := slices.Sorted(mapsKeys(item)); !slices.Equal(got, wantItem) {
					t.Fatalf("submission keys %v, want %v", got, wantItem)
				}
				pag := raw["meta"].(map[string]any)["pagination"].(map[string]any)
				if got := slices.Sorted(mapsKeys(pag)); !slices.Equal(got, []string{"count", "current_page", "links", "per_page", "total", "total_pages"}) {
					t.Fatalf("pagination keys %v", got)
				}

				p := b.page(t, "contact", 1, 0)
				pp := p.Meta.Pagination
				wantPer := map[Variant]int{Older: 25, Newer: 10}[v]
				if pp.Total != 60 || pp.PerPage != wantPer || pp.Count != wantPer || pp.CurrentPage != 1 || pp.TotalPages != (60+wantPer-1)/wantPer {
					t.Fatalf("pagination %+v", pp)
				}
				re := map[Variant]*regexp.Regexp{Older: re6, Newer: re3}[v]
				for _, d := range p.Data {
					if !re.MatchString(d.CreatedAt) {
						t.Fatalf("created_at %q", d.CreatedAt)
					}
					if (d.ID != nil) != (v == Newer) {
						t.Fatalf("id present=%v in %v", d.ID != nil, v)
					}
					if d.Fields[0] != '{' || d.Files[0] != '[' {
						t.Fatalf("fields %s files %s", d.Fields, d.Files)
					}
				}
				if v == Older && len(pp.Links) != 0 {
					t.Fatalf("older links %v", pp.Links)
				}
				// Order: by created_at across the page.
				first, last := p.Data[0].CreatedAt, p.Data[len(p.Data)-1].CreatedAt
				if (o == NewestFirst && first < last) || (o == OldestFirst && first > last) {
					t.Fatalf("order %v: first %s last %s", o, first, last)
				}
			})
		}
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// key identifies a served submission by content, which is unique even for
// ties and in the older form.
func key(createdAt string, fields, files json.RawMessage) string {
	return createdAt[:23] + "|" + string(fields) + "|" + string(files)
}

func truthKeys(subs []Submission) []string {
	var out []string
	for _, s := range subs {
		out = append(out, key(s.CreatedAt.Format(layoutOlder), s.Fields, s.Files))
	}
	return out
}

func TestPagingCoversEverySubmissionOnce(t *testing.T) {
	t.Parallel()
	for _, v := range []Variant{Older, Newer} {
		for _, o := range []Order{NewestFirst, OldestFirst} {
			t.Run(v.String()+"/"+o.String(), func(t *testing.T) {
				b := setup(t, Options{Seed: 7, Variant: v, Order: o, SubmissionsPerForm: 237, TieEvery: 4})
				var served []string
				for pg := 1; ; pg++ {
					p := b.page(t, "feedback", pg, 33)
					if p.Meta.Pagination.Total != 237 || p.Meta.Pagination.Count != len(p.Data) {
						t.Fatalf("page %d pagination %+v", pg, p.Meta.Pagination)
					}
					for _, d := range p.Data {
						served = append(served, key(d.CreatedAt, d.Fields, d.Files))
					}
					if pg >= p.Meta.Pagination.TotalPages {
						break
					}
				}
				want := truthKeys(b.sim.Submissions("feedback"))
				if o == NewestFirst {
					slices.Reverse(want)
				}
				if !slices.Equal(served, want) {
					t.Fatalf("served %d submissions, want %d in %v order", len(served), len(want), o)
				}
				if len(want) != 237 {
					t.Fatalf("ground truth has %d", len(want))
				}
			})
		}
	}
}

func TestOlderPerPageIgnoresLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{SubmissionsPerForm: 60})
	for _, limit := range []int{0, 5, 100, 1000} {
		p := b.page(t, "contact", 1, limit)
		if pp := p.Meta.Pagination; pp.PerPage != 25 || pp.Count != 25 || pp.TotalPages != 3 {
			t.Fatalf("limit %d: %+v", limit, pp)
		}
	}
	if p := b.page(t, "contact", 3, 0); p.Meta.Pagination.Count != 10 {
		t.Fatalf("last page count %d", p.Meta.Pagination.Count)
	}
}

func TestNewerLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Variant: Newer, SubmissionsPerForm: 250})
	for limit, want := range map[int]int{0: 10, 7: 7, 100: 100, 101: 100, 1000: 100, -3: 10} {
		p := b.page(t, "contact", 1, limit)
		if pp := p.Meta.Pagination; pp.PerPage != want || pp.Count != want {
			t.Fatalf("limit %d: %+v, want %d", limit, pp, want)
		}
	}
	r := b.get(t, "/api/forms/contact/submissions?page=abc&limit=xyz", DefaultToken)
	var p wirePage
	if err := json.Unmarshal(r.body, &p); err != nil || p.Meta.Pagination.CurrentPage != 1 || p.Meta.Pagination.PerPage != 10 {
		t.Fatalf("invalid params: %v %+v", err, p.Meta.Pagination)
	}
}

func TestNewerLinks(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Variant: Newer, SubmissionsPerForm: 20})
	link := func(p wirePage, name string) string {
		var s *string
		if err := json.Unmarshal(p.Meta.Pagination.Links[name], &s); err != nil {
			t.Fatalf("links.%s: %v", name, err)
		}
		if s == nil {
			return ""
		}
		return *s
	}
	p1 := b.page(t, "signup", 1, 7)
	if _, ok := p1.Meta.Pagination.Links["previous"]; !ok || link(p1, "previous") != "" {
		t.Fatalf("page 1 previous must be null: %s", p1.Meta.Pagination.Links["previous"])
	}
	next := link(p1, "next")
	if next != b.base+"/api/forms/signup/submissions?page=2&limit=7" {
		t.Fatalf("next %q", next)
	}
	p2 := b.page(t, "signup", 2, 7)
	if link(p2, "previous") != b.base+"/api/forms/signup/submissions?page=1&limit=7" {
		t.Fatalf("previous %q", link(p2, "previous"))
	}
	// Following next gives page 2.
	r := b.get(t, next, DefaultToken)
	if !bytes.Equal(r.body, mustJSON(t, b, "signup", 2, 7)) {
		t.Fatal("following next differs from page 2")
	}
	p3 := b.page(t, "signup", 3, 7)
	if p3.Meta.Pagination.Count != 6 || link(p3, "next") != "" || p3.Meta.Pagination.TotalPages != 3 {
		t.Fatalf("last page %+v", p3.Meta.Pagination)
	}
	beyond := b.page(t, "signup", 9, 7)
	if pp := beyond.Meta.Pagination; len(beyond.Data) != 0 || pp.Count != 0 || pp.CurrentPage != 9 || pp.Total != 20 || link(beyond, "next") != "" {
		t.Fatalf("beyond the end: %+v", pp)
	}
}

func mustJSON(t *testing.T, b bundle, form string, page, limit int) []byte {
	t.Helper()
	return b.get(t, fmt.Sprintf("/api/forms/%s/submissions?page=%d&limit=%d", form, page, limit), DefaultToken).body
}

func TestEmptyForm(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Variant: Newer, SubmissionsPerForm: NoSubmissions})
	p := b.page(t, "contact", 1, 0)
	if pp := p.Meta.Pagination; pp.Total != 0 || pp.TotalPages != 0 || pp.Count != 0 || p.Data == nil {
		t.Fatalf("empty form: %+v data=%v", pp, p.Data)
	}
}

func TestTiesHaveStableOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Seed: 3, Variant: Newer, Order: OldestFirst, SubmissionsPerForm: 50, TieEvery: 3})
	subs := b.sim.Submissions("contact")
	ties := 0
	for i := 1; i < len(subs); i++ {
		if subs[i].CreatedAt.Equal(subs[i-1].CreatedAt) {
			ties++
			if subs[i].ID <= subs[i-1].ID {
				t.Fatalf("tie not ordered by id: %d then %d", subs[i-1].ID, subs[i].ID)
			}
		}
	}
	if ties != 16 {
		t.Fatalf("ties %d, want 16", ties)
	}
	asc := b.page(t, "contact", 1, 100)
	b.sim.SetOrder(NewestFirst)
	desc := b.page(t, "contact", 1, 100)
	for i := range asc.Data {
		if *asc.Data[i].ID != *desc.Data[len(desc.Data)-1-i].ID {
			t.Fatalf("newest-first is not the exact reverse at %d", i)
		}
	}
}

func TestCreatedAtTruncatedNotRounded(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 999_999_000, time.UTC)
	b := setup(t, Options{Variant: Newer, SubmissionsPerForm: NoSubmissions})
	b.sim.AddAt("contact", at, 2)
	p := b.page(t, "contact", 1, 0)
	if len(p.Data) != 2 || p.Data[0].CreatedAt != "2026-03-01T12:00:00.999Z" {
		t.Fatalf("newer: %+v", p.Data)
	}
	b.sim.SetVariant(Older)
	p = b.page(t, "contact", 1, 0)
	if p.Data[0].CreatedAt != "2026-03-01T12:00:00.999999Z" || p.Data[0].ID != nil {
		t.Fatalf("older: %q", p.Data[0].CreatedAt)
	}
}

func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	b.sim.SetFormStatus("signup", http.StatusBadRequest)
	b.sim.SetFormStatus("feedback", http.StatusNotFound)
	path := "/api/forms/%s/submissions"
	for _, tc := range []struct {
		name, form, token string
		want              int
	}{
		{"no token", "contact", "", 401},
		{"wrong token", "contact", "nope", 401},
		{"access disabled", "signup", DefaultToken, 400},
		{"deleted form", "feedback", DefaultToken, 404},
		{"unknown form", "nosuch", DefaultToken, 404},
		{"ok", "contact", DefaultToken, 200},
	} {
		r := b.get(t, fmt.Sprintf(path, tc.form), tc.token)
		if r.status != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, r.status, tc.want)
		}
	}
	// Missing Bearer prefix.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.base+fmt.Sprintf(path, "contact"), nil)
	req.Header.Set("Authorization", DefaultToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no Bearer prefix: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	// 400 says what is wrong, 404 is HTML.
	if r := b.get(t, fmt.Sprintf(path, "signup"), DefaultToken); !strings.Contains(string(r.body), "HTTP API access is not enabled") {
		t.Errorf("400 body %s", r.body)
	}
	if r := b.get(t, fmt.Sprintf(path, "nosuch"), DefaultToken); !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Errorf("404 type %q", r.header.Get("Content-Type"))
	}
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, b.base+fmt.Sprintf(path, "contact"), nil)
	req.Header.Set("Authorization", "Bearer "+DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET" {
		t.Fatalf("POST: %v %v", err, resp)
	}
	resp.Body.Close()
	b.sim.SetFormStatus("signup", 0)
	if r := b.get(t, fmt.Sprintf(path, "signup"), DefaultToken); r.status != 200 {
		t.Fatalf("re-enabled form: %d", r.status)
	}
	st := b.sim.Stats()
	if st.ByStatus[401] != 3 || st.ByStatus[400] != 2 || st.ByStatus[404] != 3 || st.ByStatus[405] != 1 || st.PerForm["nosuch"] != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// clock is a settable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRateLimitRetryAfterShapes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, mode := range []RetryAfterMode{RetryAfterSeconds, RetryAfterDate, RetryAfterNone, RetryAfterZero} {
		t.Run(mode.String(), func(t *testing.T) {
			clk := &clock{t: now}
			b := setup(t, Options{RateLimit: 0.5, RetryAfter: mode, Now: clk.Now})
			if r := b.get(t, "/api/forms/contact/submissions", DefaultToken); r.status != 200 {
				t.Fatalf("first request: %d", r.status)
			}
			clk.Advance(500 * time.Millisecond)
			r := b.get(t, "/api/forms/contact/submissions", DefaultToken)
			if r.status != 429 {
				t.Fatalf("second request: %d", r.status)
			}
			ra, present := r.header["Retry-After"]
			switch mode {
			case RetryAfterSeconds:
				// 0.25 tokens after 0.5 s at 0.5/s: 1.5 s to go, rounded up.
				if ra[0] != "2" {
					t.Fatalf("Retry-After %v", ra)
				}
			case RetryAfterDate:
				at, err := http.ParseTime(ra[0])
				if err != nil || !at.Equal(now.Add(2500*time.Millisecond).Truncate(time.Second)) {
					t.Fatalf("Retry-After %v: %v %v", ra, at, err)
				}
			case RetryAfterNone:
				if present {
					t.Fatalf("Retry-After %v", ra)
				}
			case RetryAfterZero:
				if ra[0] != "0" {
					t.Fatalf("Retry-After %v", ra)
				}
			}
			clk.Advance(2 * time.Second)
			if r := b.get(t, "/api/forms/contact/submissions", DefaultToken); r.status != 200 {
				t.Fatalf("after refill: %d", r.status)
			}
			if st := b.sim.Stats(); st.Faults["429"] != 1 || st.ByStatus[429] != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
	t.Run("mixed", func(t *testing.T) {
		clk := &clock{t: now}
		b := setup(t, Options{RateLimitFaults: 1, RetryAfter: RetryAfterMixed, Now: clk.Now})
		seen := map[string]bool{}
		for range 40 {
			r := b.get(t, "/api/forms/contact/submissions", DefaultToken)
			if r.status != 429 {
				t.Fatalf("status %d", r.status)
			}
			switch v, ok := r.header["Retry-After"]; {
			case !ok:
				seen["none"] = true
			case v[0] == "0":
				seen["zero"] = true
			case v[0] == "1":
				seen["seconds"] = true
			default:
				if _, err := http.ParseTime(v[0]); err != nil {
					t.Fatalf("Retry-After %q", v[0])
				}
				seen["date"] = true
			}
		}
		if len(seen) != 4 {
			t.Fatalf("shapes seen %v", seen)
		}
		if st := b.sim.Stats(); st.Faults["429-random"] != 40 {
			t.Fatalf("stats %+v", st.Faults)
		}
	})
}

func TestFaultsCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Seed: 11, Variant: Newer, ServerErrors: 0.3, Truncate: 0.3, RateLimitFaults: 0.1})
	truncated := 0
	for range 80 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.base+"/api/forms/contact/submissions?limit=50", nil)
		req.Header.Set("Authorization", "Bearer "+DefaultToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				truncated++
			} else if err != nil || !json.Valid(body) {
				t.Fatalf("200 with err %v", err)
			}
		}
	}
	st := b.sim.Stats()
	if st.Requests != 80 || st.PerForm["contact"] != 80 {
		t.Fatalf("requests %d", st.Requests)
	}
	if got := st.ByStatus[500] + st.ByStatus[502] + st.ByStatus[503]; got != st.Faults["5xx"] || got == 0 {
		t.Fatalf("5xx by status %d, faults %d", got, st.Faults["5xx"])
	}
	if truncated != st.Faults["truncate"] || truncated == 0 {
		t.Fatalf("client saw %d truncated bodies, server counted %d", truncated, st.Faults["truncate"])
	}
	if st.ByStatus[429] != st.Faults["429"] || st.Faults["429"] == 0 {
		t.Fatalf("429 %+v", st)
	}
	if sum := st.ByStatus[200] + st.ByStatus[429] + st.Faults["5xx"]; sum != 80 {
		t.Fatalf("statuses add to %d", sum)
	}
}

func TestStall(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Stall: 1, StallFor: 50 * time.Millisecond})
	r := b.get(t, "/api/forms/contact/submissions", DefaultToken)
	if r.status != 200 || !json.Valid(r.body) {
		t.Fatalf("stalled body did not complete: %d", r.status)
	}
	// A client that gives up ends the stall early.
	b.sim.SetFaults(Faults{Stall: 1, StallFor: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/api/forms/contact/submissions", nil)
	req.Header.Set("Authorization", "Bearer "+DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("stall of an hour completed")
	}
	if st := b.sim.Stats(); st.Faults["stall"] != 2 {
		t.Fatalf("stats %+v", st.Faults)
	}
}

func TestLatencyRespectsContext(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/api/forms/contact/submissions", nil)
	req.Header.Set("Authorization", "Bearer "+DefaultToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("latency of an hour completed")
	}
	// The handler notices the client left; it must not hang the server's Close.
	deadline := time.Now().Add(5 * time.Second)
	for b.sim.Stats().Faults["canceled"] == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if b.sim.Stats().Faults["canceled"] != 1 {
		t.Fatal("canceled request not counted")
	}
}

func TestMutationShiftsPages(t *testing.T) {
	t.Parallel()
	t.Run("adds duplicate items on the next page, newest first", func(t *testing.T) {
		b := setup(t, Options{Variant: Newer, SubmissionsPerForm: 50, MutateEvery: 1, AddPerMutation: 3})
		p1 := b.page(t, "contact", 1, 10)
		p2 := b.page(t, "contact", 2, 10)
		if p2.Meta.Pagination.Total != 53 {
			t.Fatalf("total after mutation %d", p2.Meta.Pagination.Total)
		}
		for i := range 3 {
			if *p2.Data[i].ID != *p1.Data[7+i].ID {
				t.Fatalf("page 2 item %d is %d, want page 1's %d", i, *p2.Data[i].ID, *p1.Data[7+i].ID)
			}
		}
		if st := b.sim.Stats(); st.Added != 6 {
			t.Fatalf("added %d", st.Added)
		}
		b.sim.SetMutation(0, 0, 0)
		b.page(t, "contact", 3, 10)
		if st := b.sim.Stats(); st.Added != 6 {
			t.Fatalf("added %d after mutation stopped", st.Added)
		}
		b.sim.SetMutation(1, 3, 0)
		// New submissions are newer than everything and sit at the head
		// (this request's own mutation comes after it is served).
		p1 = b.page(t, "contact", 1, 10)
		subs := b.sim.Submissions("contact")
		if *p1.Data[0].ID != subs[len(subs)-4].ID || !subs[len(subs)-1].CreatedAt.After(subs[len(subs)-4].CreatedAt) {
			t.Fatal("added submissions are not at the head")
		}
	})
	t.Run("adds at the tail oldest first do not shift earlier pages", func(t *testing.T) {
		b := setup(t, Options{Variant: Newer, Order: OldestFirst, SubmissionsPerForm: 50, MutateEvery: 1, AddPerMutation: 3})
		p1 := b.page(t, "contact", 1, 10)
		p2 := b.page(t, "contact", 2, 10)
		if *p2.Data[0].ID != *p1.Data[9].ID+1 {
			t.Fatal("page 2 shifted by additions at the tail")
		}
	})
	t.Run("deletions skip items", func(t *testing.T) {
		b := setup(t, Options{Seed: 5, Variant: Newer, Order: OldestFirst, SubmissionsPerForm: 50, MutateEvery: 1, DeletePerMutation: 4})
		served := map[int64]bool{}
		for pg := 1; pg <= 5; pg++ {
			for _, d := range b.page(t, "contact", pg, 10).Data {
				served[*d.ID] = true
			}
		}
		deleted := b.sim.Deleted("contact")
		live := b.sim.Submissions("contact")
		if len(deleted) != 20 || len(live) != 30 {
			t.Fatalf("deleted %d live %d", len(deleted), len(live))
		}
		missed := 0
		for _, s := range live {
			if !served[s.ID] {
				missed++
			}
		}
		if missed == 0 {
			t.Fatal("deletions during paging skipped nothing")
		}
	})
}

func TestAddAddAtDeleteSetSpam(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)} // before Start: Add must still go after the newest
	sim := New(Options{SubmissionsPerForm: 10, Now: clk.Now})
	before := sim.Submissions("contact")
	added := sim.Add("contact", 3)
	if len(added) != 3 || !added[0].CreatedAt.After(before[len(before)-1].CreatedAt) || !added[2].CreatedAt.After(added[1].CreatedAt) {
		t.Fatalf("Add: %+v", added)
	}
	mid := before[4].CreatedAt
	tied := sim.AddAt("contact", mid, 2)
	subs := sim.Submissions("contact")
	if len(subs) != 15 || subs[5].ID != tied[0].ID || subs[6].ID != tied[1].ID || !subs[5].CreatedAt.Equal(mid) {
		t.Fatalf("AddAt placed wrongly")
	}
	gone := sim.Delete("contact", 4)
	if len(gone) != 4 || len(sim.Submissions("contact")) != 11 || len(sim.Deleted("contact")) != 4 {
		t.Fatal("Delete")
	}
	if !sim.Restore("contact", gone[1].ID) || sim.Restore("contact", gone[1].ID) || len(sim.Deleted("contact")) != 3 {
		t.Fatal("Restore")
	}
	live := sim.Submissions("contact")
	if len(live) != 12 || !slices.ContainsFunc(live, func(s Submission) bool {
		return s.ID == gone[1].ID && s.CreatedAt.Equal(gone[1].CreatedAt) && string(s.Fields) == string(gone[1].Fields)
	}) ||
		!slices.IsSortedFunc(live, func(a, b Submission) int { return a.CreatedAt.Compare(b.CreatedAt) }) {
		t.Fatal("Restore: not served again in its place")
	}
	if !sim.Delete("contact", 1)[0].CreatedAt.After(time.Time{}) {
		t.Fatal("Delete after Restore")
	}
	id := sim.Submissions("contact")[0].ID
	if !sim.SetSpam("contact", id, true) || !sim.Submissions("contact")[0].IsSpam || sim.SetSpam("contact", 1, true) {
		t.Fatal("SetSpam")
	}
	if got := sim.Add("newform", 2); len(got) != 2 || !slices.Contains(sim.FormIDs(), "newform") {
		t.Fatal("Add to unknown form")
	}
	if st := sim.Stats(); st.Added != 7 || st.Deleted != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAddCopy(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{SubmissionsPerForm: 10, Variant: Older, Order: OldestFirst})
	orig := b.sim.Submissions("contact")[3]
	c, ok := b.sim.AddCopy("contact", orig.ID)
	if !ok || c.ID == orig.ID || !c.CreatedAt.Equal(orig.CreatedAt) || c.IsSpam != orig.IsSpam ||
		string(c.Fields) != string(orig.Fields) || string(c.Files) != string(orig.Files) {
		t.Fatalf("AddCopy(%d) = %+v, %v; want a copy of %+v under a new id", orig.ID, c, ok, orig)
	}
	if subs := b.sim.Submissions("contact"); len(subs) != 11 || subs[4].ID != c.ID {
		t.Fatalf("the copy is not served right after the submission it copies")
	}
	// Served as the same object in the older response form.
	p := b.page(t, "contact", 1, 0)
	if x, y := p.Data[3], p.Data[4]; x.ID != nil || y.ID != nil || x.CreatedAt != y.CreatedAt || x.IsSpam != y.IsSpam ||
		string(x.Fields) != string(y.Fields) || string(x.Files) != string(y.Files) {
		t.Errorf("copy served as %+v, the submission as %+v", y, x)
	}
	if _, ok := b.sim.AddCopy("contact", -1); ok {
		t.Error("AddCopy of no submission succeeded")
	}
}

func TestContent(t *testing.T) {
	t.Parallel()
	sim := New(Options{Seed: 9, SubmissionsPerForm: 3000, TieEvery: 2})
	for _, form := range sim.FormIDs() {
		subs := sim.Submissions(form)
		seen := map[string]bool{}
		spam, withFiles := 0, 0
		for _, s := range subs {
			k := string(s.Fields) + string(s.Files)
			if seen[k] {
				t.Fatalf("%s: duplicate content %s", form, k)
			}
			seen[k] = true
			var fields map[string]string
			if err := json.Unmarshal(s.Fields, &fields); err != nil || fields["name"] == "" || fields["email"] == "" {
				t.Fatalf("%s: fields %s: %v", form, s.Fields, err)
			}
			var files []struct {
				Name, Type, URL string
				Size            int64
			}
			if err := json.Unmarshal(s.Files, &files); err != nil {
				t.Fatalf("files %s: %v", s.Files, err)
			}
			if len(files) > 0 {
				withFiles++
				if files[0].Name == "" || files[0].URL == "" || files[0].Size <= 0 || files[0].Type == "" {
					t.Fatalf("file %s", s.Files)
				}
			}
			if s.IsSpam {
				spam++
			}
		}
		if spam < 90 || spam > 220 || withFiles < 200 || withFiles > 420 {
			t.Fatalf("%s: spam %d, with files %d of 3000", form, spam, withFiles)
		}
	}
	var fields map[string]string
	json.Unmarshal(sim.Submissions("feedback")[0].Fields, &fields)
	if _, ok := fields["How did you hear about us?"]; !ok {
		t.Fatalf("feedback fields %v", fields)
	}
}

func TestDeterminism(t *testing.T) {
	t.Parallel()
	opts := func(seed int64) Options {
		clk := &clock{t: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}
		return Options{Seed: seed, Variant: Newer, SubmissionsPerForm: 200, TieEvery: 5,
			RateLimitFaults: 0.2, RetryAfter: RetryAfterMixed, ServerErrors: 0.2, Truncate: 0.2,
			MutateEvery: 2, AddPerMutation: 2, DeletePerMutation: 1, Now: clk.Now}
	}
	run := func(seed int64) [][]byte {
		sim := New(opts(seed))
		var out [][]byte
		for i := range 60 {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/forms/%s/submissions?page=%d&limit=20", DefaultForms[i%3], 1+i%4), nil)
			req.Header.Set("Authorization", "Bearer "+DefaultToken)
			sim.ServeHTTP(w, req)
			out = append(out, fmt.Appendf(nil, "%d %q %s", w.Code, w.Header().Get("Retry-After"), w.Body.Bytes()))
		}
		return out
	}
	a, b := run(42), run(42)
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("request %d differs:\n%.200s\n%.200s", i, a[i], b[i])
		}
	}
	if c := run(43); slices.EqualFunc(a, c, bytes.Equal) {
		t.Fatal("another seed gave the same responses")
	}
}

func TestConcurrentRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Variant: Newer, SubmissionsPerForm: 500, MutateEvery: 3, AddPerMutation: 2, DeletePerMutation: 1, ServerErrors: 0.1})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 15 {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet,
					fmt.Sprintf("%s/api/forms/%s/submissions?page=%d&limit=25", b.base, DefaultForms[g%3], 1+i), nil)
				req.Header.Set("Authorization", "Bearer "+DefaultToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			b.sim.Add("contact", 1)
			b.sim.Delete("signup", 1)
			b.sim.SetVariant(Older)
			b.sim.SetVariant(Newer)
			_ = b.sim.Stats()
		}
	})
	wg.Wait()
	if st := b.sim.Stats(); st.Requests != 120 {
		t.Fatalf("requests %d", st.Requests)
	}
}

func TestRegisterFlags(t *testing.T) {
	t.Parallel()
	var o Options
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	o.RegisterFlags(fs)
	err := fs.Parse([]string{"-seed", "5", "-token", "s3cret-value", "-variant", "newer", "-order", "oldest",
		"-forms", "a, b,c", "-submissions", "0", "-tie-every", "3", "-rate-limit", "2.5", "-retry-after", "date",
		"-rate-limit-faults", "0.3", "-latency", "10ms", "-server-errors", "0.1", "-truncate", "0.05", "-stall", "0.01",
		"-stall-for", "2s", "-mutate-every", "4", "-add", "2", "-delete", "1",
		"-form-variant", "a=live, b=older", "-form-variant", "c=newer", "-plan-limit", "60", "-plan-window", "1500ms",
		"-first-id", "10000000", "-files-every", "3", "-files-per-submission", "2", "-file-size", "51200",
		"-file-expired", "0.1", "-file-slow", "0.02", "-file-slow-for", "5s", "-file-too-large", "0.03",
		"-file-large-size", "100", "-file-redirect", "0.04", "-file-size-mismatch", "0.05"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Seed: 5, Token: "s3cret-value", Variant: Newer, Order: OldestFirst, Forms: []string{"a", "b", "c"},
		SubmissionsPerForm: NoSubmissions, End: o.End, Spacing: 37 * time.Second, TieEvery: 3, RateLimit: 2.5,
		RetryAfter: RetryAfterDate, RateLimitFaults: 0.3, Latency: 10 * time.Millisecond, ServerErrors: 0.1,
		Truncate: 0.05, Stall: 0.01, StallFor: 2 * time.Second, MutateEvery: 4, AddPerMutation: 2, DeletePerMutation: 1,
		FormVariants: map[string]Variant{"a": Live, "b": Older, "c": Newer}, PlanLimit: 60, PlanWindow: 1500 * time.Millisecond,
		FirstID: 10_000_000, Files: FileOptions{Every: 3, PerSubmission: 2, Size: 51200, Expired: 0.1, Slow: 0.02,
			SlowFor: 5 * time.Second, TooLarge: 0.03, LargeSize: 100, Redirect: 0.04, SizeMismatch: 0.05}}
	if fmt.Sprintf("%+v", o) != fmt.Sprintf("%+v", want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", o, want)
	}
	// Without -start the data ends near now, not in January 2026.
	if o.End.IsZero() || !o.Start.IsZero() || time.Since(o.End) > time.Hour || time.Since(o.End) < 0 {
		t.Errorf("without -start: start %v, end %v: want the data to end a minute ago", o.Start, o.End)
	}
	if sim := New(o); sim.Len("a") != 0 || len(sim.FormIDs()) != 3 {
		t.Fatal("-submissions 0 must create empty forms")
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if strings.Contains(help.String(), "s3cret") {
		t.Fatal("--help shows the token")
	}
	for _, bad := range [][]string{{"-variant", "newest"}, {"-form-variant", "a"}, {"-form-variant", "=live"}, {"-form-variant", "a=x"}} {
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestFirstID: ids count up from FirstID across the forms in the order
// they are created, and from 1001 by default.
func TestFirstID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ first, want int64 }{{0, 1001}, {10_000_000, 10_000_000}} {
		sim := New(Options{Variant: Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 3, FirstID: tc.first})
		var ids []int64
		for _, f := range []string{"a", "b"} {
			for _, s := range sim.Submissions(f) {
				ids = append(ids, s.ID)
			}
		}
		slices.Sort(ids)
		if want := []int64{tc.want, tc.want + 1, tc.want + 2, tc.want + 3, tc.want + 4, tc.want + 5}; !slices.Equal(ids, want) {
			t.Errorf("FirstID %d: ids %v, want %v", tc.first, ids, want)
		}
	}
}

// TestShuffleTiesFollowSeed: the order shuffled ties are served in comes
// from Options.Seed like every other random choice, so a test that fails on
// one seed fails again on it; it still changes from request to request.
func TestShuffleTiesFollowSeed(t *testing.T) {
	t.Parallel()
	run := func() [][]byte {
		sim := New(Options{Seed: 9, Variant: Newer, Forms: []string{"f"}, SubmissionsPerForm: 200, TieEvery: 2, ShuffleTies: true})
		var out [][]byte
		for range 6 {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/api/forms/f/submissions?page=1&limit=100", nil)
			req.Header.Set("Authorization", "Bearer "+DefaultToken)
			sim.ServeHTTP(w, req)
			out = append(out, w.Body.Bytes())
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("request %d: two servers with the same Options served ties in different orders", i)
		}
	}
	if bytes.Equal(a[0], a[1]) && bytes.Equal(a[1], a[2]) {
		t.Fatal("ties served in the same order on every request")
	}
}

// TestShuffleTiesOlderKeepsMicroseconds: the older form serves six
// fractional digits, so submissions a few microseconds apart are no tie
// there: only those with the very same created_at change places, and every
// page stays in created_at order.
func TestShuffleTiesOlderKeepsMicroseconds(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Seed: 4, Variant: Older, Order: OldestFirst, SubmissionsPerForm: NoSubmissions, ShuffleTies: true})
	at := time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC)
	b.sim.AddAt("contact", at, 3)
	for i := 1; i <= 4; i++ {
		b.sim.AddAt("contact", at.Add(time.Duration(i*100)*time.Microsecond), 1)
	}
	orders := map[string]bool{}
	for range 20 {
		p := b.page(t, "contact", 1, 0)
		var firsts []string
		for i, d := range p.Data {
			if i > 0 && d.CreatedAt < p.Data[i-1].CreatedAt {
				t.Fatalf("older page out of created_at order: %s after %s", d.CreatedAt, p.Data[i-1].CreatedAt)
			}
			if i < 3 {
				firsts = append(firsts, string(d.Fields))
			}
		}
		orders[strings.Join(firsts, "|")] = true
	}
	if len(orders) < 2 {
		t.Fatal("submissions with the same created_at were always served in one order")
	}
}

// SetSubmissions serves the submissions given, in the server's order,
// with a nil fields member left out, and Submissions returns them.
func TestSetSubmissions(t *testing.T) {
	t.Parallel()
	sim := New(Options{Variant: Newer, Forms: []string{"f"}, SubmissionsPerForm: NoSubmissions})
	at := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	sim.SetSubmissions("f",
		Submission{ID: 7, CreatedAt: at.Add(-time.Hour), Fields: json.RawMessage(`{"a":"b"}`), Files: json.RawMessage(`[]`)},
		Submission{ID: 3, CreatedAt: at, IsSpam: true},
	)
	w := serveRecorder(sim, "/api/forms/f/submissions?page=1&limit=10")
	body := w.Body.String()
	if !strings.Contains(body, `{"id":3,"is_spam":true,"created_at":"9999-01-01T00:00:00.000Z"}`) ||
		!strings.Contains(body, `{"id":7,"fields":{"a":"b"},"files":[],"is_spam":false,`) {
		t.Errorf("served %s", body)
	}
	if i := strings.Index(body, `"id":3`); i < 0 || i > strings.Index(body, `"id":7`) {
		t.Errorf("not newest first: %s", body)
	}
	got := sim.Submissions("f")
	if len(got) != 2 || got[0].ID != 7 || got[1].Fields != nil {
		t.Errorf("Submissions = %+v", got)
	}
}

// TestAddAfterSetSubmissionsTakesNewIDs: a submission added after
// SetSubmissions never takes an id the caller gave.
func TestAddAfterSetSubmissionsTakesNewIDs(t *testing.T) {
	sim := New(Options{SubmissionsPerForm: 0})
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	sim.SetSubmissions("f", Submission{ID: 1001, CreatedAt: at}, Submission{ID: 5000, CreatedAt: at.Add(time.Second)})
	for _, s := range sim.Add("f", 2) {
		if s.ID <= 5000 {
			t.Errorf("added submission has id %d, not above the ids given", s.ID)
		}
	}
}

// TestEndDatesTheNewestSubmission: with End and no Start, each form's
// newest initial submission is at End, its others before; Start wins when
// both are set.
func TestEndDatesTheNewestSubmission(t *testing.T) {
	t.Parallel()
	end := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	sim := New(Options{End: end, Forms: []string{"a", "b"}, SubmissionsPerForm: 300, TieEvery: 7})
	for _, id := range []string{"a", "b"} {
		subs := sim.Submissions(id)
		newest, oldest := subs[0].CreatedAt, subs[0].CreatedAt
		for _, s := range subs {
			newest, oldest = maxTime(newest, s.CreatedAt), minTime(oldest, s.CreatedAt)
		}
		if !newest.Equal(end) || !oldest.Before(end.Add(-time.Hour)) {
			t.Errorf("form %s: newest %v, oldest %v, want the newest at %v", id, newest, oldest, end)
		}
	}
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := New(Options{Start: start, End: end, Forms: []string{"a"}}).Submissions("a"); !slices.ContainsFunc(got, func(s Submission) bool { return s.CreatedAt.Equal(start) }) {
		t.Error("with Start and End, the data does not start at Start")
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
