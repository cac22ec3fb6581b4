package trigger_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/worker/trigger"
)

const secret = "s3cret-0123456789abcdef"

type bundle struct {
	h        *trigger.Handler
	q        *trigger.Queue
	logs     *bytes.Buffer
	outcomes map[trigger.Outcome]int
}

func setup(t *testing.T, mod func(*trigger.Config)) *bundle {
	t.Helper()
	b := &bundle{q: trigger.NewQueue(trigger.QueueConfig{}), logs: new(bytes.Buffer), outcomes: map[trigger.Outcome]int{}}
	var mu sync.Mutex
	cfg := trigger.Config{
		Secret:  secret,
		Forms:   []string{"contact", "acme:signup", "a b/c"},
		Queue:   b.q,
		Log:     slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observe: func(o trigger.Outcome) { mu.Lock(); b.outcomes[o]++; mu.Unlock() },
	}
	if mod != nil {
		mod(&cfg)
	}
	h, err := trigger.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.h = h
	return b
}

func (b *bundle) do(method, path string, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}

func TestHandlerAcceptsAConfiguredForm(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, path := range []string{"/hooks/" + secret + "/contact", "/hooks/" + secret + "/acme:signup", "/hooks/" + secret + "/a%20b%2Fc"} {
		if rec := b.do("POST", path, `{"payload":{"email":"x@example.com"},"files":{}}`); rec.Code != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202", path, rec.Code, rec.Body)
		}
	}
	if got := b.q.Pending(); got != 3 {
		t.Errorf("pending = %d, want 3", got)
	}
	if b.outcomes[trigger.Accepted] != 3 {
		t.Errorf("outcomes = %v", b.outcomes)
	}
}

// A stranger learns nothing: a wrong secret answers as an unknown path,
// for a configured form and for one that is not, and the secret holder's
// unknown form answers the same 404.
func TestHandlerRefusesWithoutRevealingForms(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cases := []struct {
		method, path string
		status       int
		outcome      trigger.Outcome
	}{
		{"POST", "/hooks/wrong-secret-0123456789/contact", 404, trigger.BadSecret},
		{"POST", "/hooks/wrong-secret-0123456789/nosuchform", 404, trigger.BadSecret},
		{"POST", "/hooks/" + secret[:len(secret)-1] + "/contact", 404, trigger.BadSecret},
		{"POST", "/hooks/" + secret + "/nosuchform", 404, trigger.UnknownForm},
		{"POST", "/hooks/" + secret + "/", 404, trigger.BadRequest},
		{"POST", "/hooks/" + secret, 404, trigger.BadRequest},
		{"POST", "/hooks/" + secret + "/contact/more", 404, trigger.BadRequest},
		{"GET", "/hooks/" + secret + "/contact", 405, trigger.BadRequest},
		{"GET", "/hooks/wrong-secret-0123456789/contact", 404, trigger.BadSecret},
	}
	var bodies []string
	for _, c := range cases {
		rec := b.do(c.method, c.path, "{}")
		if rec.Code != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.status)
		}
		if rec.Code == 404 {
			bodies = append(bodies, rec.Body.String())
		}
	}
	if len(slices.Compact(bodies)) != 1 {
		t.Errorf("404 bodies differ, telling apart what exists: %q", bodies)
	}
	if b.q.Pending() != 0 {
		t.Errorf("a refused request queued a sync")
	}
	if b.outcomes[trigger.BadSecret] != 4 || b.outcomes[trigger.UnknownForm] != 1 {
		t.Errorf("outcomes = %v", b.outcomes)
	}
}

func TestHandlerRefusesAHugeBody(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	rec := b.do("POST", "/hooks/"+secret+"/contact", strings.Repeat("x", 10<<20))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("10 MB body: %d, want 413", rec.Code)
	}
	if b.q.Pending() != 0 || b.outcomes[trigger.TooLarge] != 1 {
		t.Errorf("pending %d, outcomes %v", b.q.Pending(), b.outcomes)
	}
}

func TestHandlerLimitsAFlood(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *trigger.Config) { c.Rate, c.Burst = 0.001, 5 })
	codes := map[int]int{}
	for range 50 {
		codes[b.do("POST", "/hooks/"+secret+"/contact", "").Code]++
	}
	if codes[202] != 5 || codes[429] != 45 {
		t.Errorf("codes = %v, want 5 accepted and 45 refused", codes)
	}
	if b.q.Pending() != 1 || b.outcomes[trigger.Coalesced] != 4 {
		t.Errorf("pending %d, outcomes %v: the accepted ones coalesce into one", b.q.Pending(), b.outcomes)
	}
}

func TestHandlerNeverLogsTheSecret(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *trigger.Config) { c.Burst = 3 })
	for _, p := range []string{"/contact", "/nosuchform", "/contact", "/contact", "/contact"} {
		b.do("POST", "/hooks/"+secret+p, "")
	}
	b.do("GET", "/hooks/"+secret+"/contact", "")
	if b.logs.Len() == 0 {
		t.Fatal("nothing was logged")
	}
	if strings.Contains(b.logs.String(), secret) || strings.Contains(b.logs.String(), "nosuchform") {
		t.Errorf("the log holds the secret or a stranger's path:\n%s", b.logs)
	}
}

func TestNewHandlerChecksTheSecret(t *testing.T) {
	t.Parallel()
	q := trigger.NewQueue(trigger.QueueConfig{})
	for _, s := range []string{"", "short", "0123456789abcdef/x", "0123456789abcdef%2F"} {
		if _, err := trigger.NewHandler(trigger.Config{Secret: s, Queue: q}); err == nil {
			t.Errorf("secret %q accepted", s)
		}
	}
}

// A burst of triggers for three forms makes one batch of three; triggers
// that come while a batch syncs make exactly one more batch.
func TestQueueCoalesces(t *testing.T) {
	t.Parallel()
	q := trigger.NewQueue(trigger.QueueConfig{Gather: 20 * time.Millisecond})
	forms := []string{"a", "b", "c"}
	for i := range 1000 {
		q.Add(forms[i%3])
	}
	if q.Pending() != 3 {
		t.Fatalf("pending = %d, want 3", q.Pending())
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	batches := make(chan []string, 10)
	release := make(chan struct{})
	go q.Run(ctx, func(ctx context.Context, forms []string) {
		batches <- forms
		<-release
	})
	first := <-batches
	slices.Sort(first)
	if !slices.Equal(first, forms) {
		t.Fatalf("first batch %v, want %v", first, forms)
	}
	// During the sync: the same form again, many times.
	for range 100 {
		q.Add("b")
	}
	release <- struct{}{}
	if second := <-batches; !slices.Equal(second, []string{"b"}) {
		t.Fatalf("second batch %v, want [b]", second)
	}
	close(release)
	select {
	case extra := <-batches:
		t.Fatalf("a third batch %v for triggers already served", extra)
	case <-time.After(100 * time.Millisecond):
	}
}
