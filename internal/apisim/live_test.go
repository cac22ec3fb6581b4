package apisim

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLiveShape: the live form is the reference's shape exactly: id, data,
// created_at with three digits and nothing else per submission; links []
// for a single page, and previous/next left out rather than null.
func TestLiveShape(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Seed: 2, Variant: Newer, FormVariants: map[string]Variant{"contact": Live}, SubmissionsPerForm: 25})
	sub := regexp.MustCompile(`^\{"id":\d+,"data":\{.*\},"created_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"\}$`)
	links := func(r response) string {
		var env struct {
			Meta struct {
				Pagination struct {
					Links json.RawMessage `json:"links"`
				} `json:"pagination"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Fatalf("%v: %s", err, r.body)
		}
		return string(env.Meta.Pagination.Links)
	}
	for page, want := range map[int]string{
		1: `{"next":"http://HOST/api/forms/contact/submissions?page=2&limit=10"}`,
		2: `{"previous":"http://HOST/api/forms/contact/submissions?page=1&limit=10","next":"http://HOST/api/forms/contact/submissions?page=3&limit=10"}`,
		3: `{"previous":"http://HOST/api/forms/contact/submissions?page=2&limit=10"}`,
	} {
		r := b.get(t, "/api/forms/contact/submissions?page="+strconv.Itoa(page), DefaultToken)
		if got := strings.ReplaceAll(links(r), strings.TrimPrefix(b.base, "http://"), "HOST"); got != want {
			t.Errorf("page %d links = %s, want %s", page, got, want)
		}
		var env struct{ Data []json.RawMessage }
		_ = json.Unmarshal(r.body, &env)
		for _, s := range env.Data {
			if !sub.Match(s) {
				t.Errorf("submission %s is not the live shape", s)
			}
		}
	}
	if got := links(b.get(t, "/api/forms/contact/submissions?limit=100", DefaultToken)); got != `[]` {
		t.Errorf("single page links = %s, want []", got)
	}
	// The other forms keep the default variant.
	if p := b.page(t, "signup", 1, 10); p.Data[0].Fields == nil || p.Data[0].Files == nil {
		t.Errorf("signup lost the newer form: %+v", p.Data[0])
	}
	b.sim.SetFormVariant("signup", Live)
	if r := b.get(t, "/api/forms/signup/submissions", DefaultToken); !strings.Contains(string(r.body), `"data":{`) || strings.Contains(string(r.body), `"fields"`) {
		t.Errorf("SetFormVariant did not switch signup: %.200s", r.body)
	}
	// An empty live form: one empty page.
	empty := setup(t, Options{Variant: Live, SubmissionsPerForm: NoSubmissions})
	r := empty.get(t, "/api/forms/contact/submissions", DefaultToken)
	if !strings.Contains(string(r.body), `"total":0,"count":0,"per_page":10,"current_page":1,"total_pages":1,"links":[]`) {
		t.Errorf("empty live form: %s", r.body)
	}
}

// TestPlanLimit: the plan limit counts a fixed window from the first
// request, in whole seconds, and says so in the Laravel throttle's headers.
func TestPlanLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 400e6, time.UTC)
	b := setup(t, Options{Variant: Newer, PlanLimit: 3, PlanWindow: 10 * time.Second, Now: func() time.Time { return now }})
	get := func() response { return b.get(t, "/api/forms/contact/submissions", DefaultToken) }
	for i := range 3 {
		r := get()
		if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "3" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("request %d: %d %v", i, r.status, r.header)
		}
		now = now.Add(time.Second)
	}
	// 12:00:03.4: the window opened at 12:00:00 (whole second) closes at 12:00:10.
	r := get()
	if r.status != 429 || r.header.Get("Retry-After") != "7" || r.header.Get("X-RateLimit-Remaining") != "0" ||
		r.header.Get("X-RateLimit-Reset") != strconv.FormatInt(now.Unix()+7, 10) {
		t.Fatalf("over the limit: %d %v", r.status, r.header)
	}
	// Refused requests are not counted; at 12:00:10 a new window opens.
	now = time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)
	if r := get(); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("new window: %d %v", r.status, r.header)
	}
	// Error answers carry the headers too; an unauthenticated one does not.
	if r := b.get(t, "/api/forms/nope/submissions", DefaultToken); r.status != 404 || r.header.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("404: %d %v", r.status, r.header)
	}
	if r := b.get(t, "/api/forms/contact/submissions", "wrong"); r.status != 401 || r.header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("401: %d %v", r.status, r.header)
	}
	if n, w := b.sim.PlanLimit(); n != 3 || w != 10*time.Second {
		t.Errorf("PlanLimit() = %d, %v", n, w)
	}
	if _, w := New(Options{PlanLimit: 1, PlanWindow: 1500 * time.Millisecond}).PlanLimit(); w != 2*time.Second {
		t.Errorf("window 1.5s rounded to %v, want 2s", w)
	}
	if st := b.sim.Stats(); st.Faults["429-plan"] != 1 || st.ByStatus[http.StatusTooManyRequests] != 1 {
		t.Errorf("stats = %+v", st)
	}
}
