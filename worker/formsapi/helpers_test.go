package formsapi

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// testToken is the secret every scenario uses; TestMain asserts that no
// error or event text produced anywhere in the package's tests contains it.
const testToken = "tok-S3CRET-9f2c7e"

var leaks struct {
	sync.Mutex
	texts []string
}

// record keeps an error's text for the token check in TestMain.
func record(err error) error {
	if err != nil {
		leaks.Lock()
		leaks.texts = append(leaks.texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		leaks.Unlock()
	}
	return err
}

func recordText(s string) {
	leaks.Lock()
	leaks.texts = append(leaks.texts, s)
	leaks.Unlock()
}

func TestMain(m *testing.M) {
	code := m.Run()
	leaks.Lock()
	n := len(leaks.texts)
	for _, s := range leaks.texts {
		if strings.Contains(s, testToken) {
			fmt.Fprintf(os.Stderr, "FAIL: token leaked into error/event text: %q\n", s)
			code = 1
		}
	}
	leaks.Unlock()
	// Only a full run must have recorded plenty (not -run X or -fuzz).
	full := flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.fuzz").Value.String() == ""
	if code == 0 && full && n < 50 {
		fmt.Fprintf(os.Stderr, "FAIL: token check saw only %d texts; recording is broken\n", n)
		code = 1
	}
	os.Exit(code)
}

// fakeClock is a settable clock whose Sleep advances time instead of
// waiting, recording every wait.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	return nil
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeClock) Sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// bundle is what a client test needs: the client, its clock and the events
// it reported.
type bundle struct {
	client *Client
	clock  *fakeClock
	mu     sync.Mutex
	events []Event
}

func (b *bundle) Events() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Event(nil), b.events...)
}

func (b *bundle) Waits() []time.Duration {
	var w []time.Duration
	for _, e := range b.Events() {
		if e.Wait > 0 {
			w = append(w, e.Wait)
		}
	}
	return w
}

// setup builds a client for baseURL with a fake clock, no jitter (Rand 0.5
// is the midpoint) and a fast limiter, then applies mods.
func setup(t *testing.T, baseURL string, mods ...func(*Config)) *bundle {
	t.Helper()
	b := &bundle{clock: newFakeClock()}
	cfg := Config{
		BaseURL:   baseURL,
		Token:     testToken,
		RateLimit: 1000,
		Now:       b.clock.Now,
		Sleep:     b.clock.Sleep,
		Rand:      func() float64 { return 0.5 },
		Observer: func(e Event) {
			if e.Err != nil {
				recordText(e.Err.Error())
			}
			b.mu.Lock()
			b.events = append(b.events, e)
			b.mu.Unlock()
		},
	}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", record(err))
	}
	b.client = c
	return b
}

// server starts a loopback server that counts hits.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	hits int
}

func (s *server) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// newServer serves handler; attempt is the 1-based number of the request.
func newServer(t *testing.T, handler func(w http.ResponseWriter, r *http.Request, attempt int)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits++
		n := s.hits
		s.mu.Unlock()
		handler(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

const olderPage = `{"data":[
 {"fields":{"name":"Ada","email":"ada@example.com","message":"hi"},"files":[],"is_spam":false,"created_at":"2026-02-28T10:00:00.123456Z"},
 {"fields":{"name":"Bob"},"files":[{"name":"cv.pdf"}],"is_spam":true,"created_at":"2026-02-28T09:00:00.000001Z"}
],"meta":{"pagination":{"total":27,"count":2,"per_page":25,"current_page":2,"total_pages":2,"links":{}}}}`

const newerPage = `{"data":[
 {"id":1042,"fields":{"name":"Ada"},"files":[],"is_spam":false,"created_at":"2026-02-28T10:00:00.123Z"},
 {"id":1041,"fields":{"name":"Bob"},"files":[],"is_spam":false,"created_at":"2026-02-28T09:59:59.999Z"}
],"meta":{"pagination":{"total":3,"count":2,"per_page":2,"current_page":1,"total_pages":2,
 "links":{"previous":null,"next":"https://forms.example.com/api/forms/f1/submissions?page=2&limit=2"}}}}`

func writeJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

var currentPage = regexp.MustCompile(`"current_page":\d+`)

// writePage writes a canned page body as the page r asked for (1 when it
// names none), so that the client's current_page check passes.
func writePage(w http.ResponseWriter, r *http.Request, body string) {
	page := r.URL.Query().Get("page")
	if page == "" {
		page = "1"
	}
	writeJSON(w, currentPage.ReplaceAllString(body, `"current_page":`+page))
}

// liveExample is the example page of the live service's API reference,
// byte for byte: values under data, no files or is_spam, three fractional
// digits, a total that is not a multiple of the page size.
const liveExample = `{"data": [{"id": 123, "data": {"name": "John Doe", "email": "john@example.com", "message": "Hello!"},
           "created_at": "2024-05-11T10:30:00.000Z"}],
 "meta": {"pagination": {"total": 150, "count": 10, "per_page": 10, "current_page": 1, "total_pages": 15,
          "links": {"previous": null, "next": "https://…/submissions?page=2"}}}}`
