package bigquery

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
	"golang.org/x/oauth2"
	"google.golang.org/api/option"
)

// outageBudget is Timeout in these tests; an operation must end within it
// plus this slack.
const (
	outageBudget = 2 * time.Second
	outageSlack  = 2 * time.Second
)

// events collects a sink's Observer events.
type events struct {
	mu  sync.Mutex
	got []Event
}

func (e *events) observe(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *events) all() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.got...)
}

// checkOutage asserts err is the outage failure, in time, after at least
// one failed request was reported.
func checkOutage(t *testing.T, err error, took time.Duration, front *bqfake.Front, evs *events) {
	t.Helper()
	if err == nil {
		t.Fatal("no error against an unreachable BigQuery")
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrRetryable) {
		t.Errorf("error is not ErrUnavailable and ErrRetryable: %v", err)
	}
	if !strings.Contains(err.Error(), front.URL()) || !strings.Contains(err.Error(), "FORMSYNC_BQ_TIMEOUT") {
		t.Errorf("error names neither the endpoint %s nor the setting: %v", front.URL(), err)
	}
	if took > outageBudget+outageSlack {
		t.Errorf("gave up after %v, budget %v", took, outageBudget)
	}
	got := evs.all()
	if len(got) == 0 {
		t.Error("no failed request reported to the Observer")
	}
	for _, ev := range got {
		if ev.Endpoint != front.URL() || ev.Err == nil || ev.Path == "" {
			t.Errorf("event without endpoint, error or path: %+v", ev)
		}
	}
}

// TestOpenWithBigQueryRefusing: Open against a port nobody listens on
// ends within Timeout, saying so.
func TestOpenWithBigQueryRefusing(t *testing.T) {
	fake := bqfake.Start(t, bqfake.Options{})
	front := bqfake.StartFront(t, fake, bqfake.Refuse)
	cfg := testConfig(fake)
	cfg.Endpoint = front.URL()
	cfg.Timeout = outageBudget
	evs := &events{}
	cfg.Observer = evs.observe
	start := time.Now()
	_, err := Open(t.Context(), cfg)
	checkOutage(t, err, time.Since(start), front, evs)
}

// TestCommitDuringOutage: a commit against a BigQuery that stops answering
// (refused, unanswered, 503) ends within Timeout with the outage error,
// writes nothing, and the next commit against BigQuery back commits
// exactly.
func TestCommitDuringOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode bqfake.Mode
	}{
		{"refused", bqfake.Refuse},
		{"never answered", bqfake.Hang},
		{"503", bqfake.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := bqfake.Start(t, bqfake.Options{})
			front := bqfake.StartFront(t, fake, bqfake.Pass)
			evs := &events{}
			b := setup(t, bqfake.Options{}, func(c *Config) {
				c.Endpoint = front.URL()
				c.Timeout = outageBudget
				c.Observer = evs.observe
			})
			b.fake = fake
			first := []sink.Row{b.row(t, "f", 1, 1, false)}
			b.mustCommit(t, b.t0, formRows{formState("f", first, "email"), first})
			before := readState(t, b.sink, "f")["f"]

			if err := front.Set(tc.mode); err != nil {
				t.Fatal(err)
			}
			more := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
			st := formState("f", more, "email")
			st.Revision = before.Revision
			start := time.Now()
			_, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, more...)}}})
			checkOutage(t, err, time.Since(start), front, evs)

			// BigQuery is back: nothing of the failed commit is in, and
			// the same commit again is exact.
			if err := front.Set(bqfake.Pass); err != nil {
				t.Fatal(err)
			}
			after := readState(t, b.sink, "f")["f"]
			if after.Revision != before.Revision || !after.Watermark.CreatedAt.Equal(before.Watermark.CreatedAt) || after.Watermark.ID != before.Watermark.ID {
				t.Errorf("state moved by the failed commit: revision %d -> %d, watermark %v -> %v", before.Revision, after.Revision, before.Watermark, after.Watermark)
			}
			checkRows(t, b.sink, "f", first)
			if _, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, more...)}}}); err != nil {
				t.Fatalf("commit after the outage: %v", err)
			}
			checkRows(t, b.sink, "f", more)
		})
	}
}

// TestCredentialsByEndpoint: an emulator's endpoint (http, or a loopback
// host) gets no credentials; Google's, a regional endpoint and a Private
// Service Connect one get them.
func TestCredentialsByEndpoint(t *testing.T) {
	t.Parallel()
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		endpoint string
		creds    bool
	}{
		{"", true},
		{"https://bigquery.europe-west3.rep.googleapis.com", true},
		{"https://bigquery-myendpoint.p.googleapis.com/bigquery/v2/", true},
		{"https://10.1.2.3", true},
		{"http://127.0.0.1:9050", false},
		{"http://bqfake.test:9050", false},
		{"https://localhost:9050", false},
		{"https://127.0.0.1:9050", false},
		{"https://[::1]:9050", false},
	} {
		if sendsCredentials(c.endpoint) != c.creds {
			t.Errorf("%q: credentials %v, want %v", c.endpoint, !c.creds, c.creds)
		}
		cfg := Config{Project: "p", Endpoint: c.endpoint,
			ClientOptions: []option.ClientOption{option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "tok"}))}}.withDefaults()
		rt, err := transport(t.Context(), cfg, "test")
		if err != nil {
			t.Fatalf("%q: %v", c.endpoint, err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%q: %v", c.endpoint, err)
		}
		resp.Body.Close()
		mu.Lock()
		auth := got[len(got)-1]
		mu.Unlock()
		if want := map[bool]string{true: "Bearer tok", false: ""}[c.creds]; auth != want {
			t.Errorf("%q: Authorization %q, want %q", c.endpoint, auth, want)
		}
	}
}

// TestWatchdogOfAnEndedRunDoesNotCancelTheNext: the watchdog of a run of
// failures fires at the instant an answer ends that run and a new failure
// begins the next, too late for answered to stop it. The old timer's call
// must not cancel the operation: the new run has its whole budget ahead.
func TestWatchdogOfAnEndedRunDoesNotCancelTheNext(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var timers []func()
	var cause error
	o := newOutage(time.Minute, "fake", func(err error) { cause = err })
	o.now = func() time.Time { return now }
	o.after = func(_ time.Duration, f func()) func() bool {
		timers = append(timers, f)
		return func() bool { return false } // already fired: cannot be stopped
	}

	o.failed(now, errors.New("HTTP 503"))
	now = now.Add(time.Minute)            // the first run's budget is spent: its timer fires...
	o.answered()                          // ...as an answer ends the run,
	o.failed(now, errors.New("HTTP 503")) // and a new failure re-arms it.
	timers[0]()                           // The first timer's call arrives now.
	if cause != nil {
		t.Fatalf("the first run's watchdog cancelled the second run as it began: %v", cause)
	}
	if err := o.spent(); err != nil {
		t.Fatalf("spent() = %v at the start of a run, want nil", err)
	}

	now = now.Add(time.Minute) // the second run's own budget is spent
	timers[1]()
	if !errors.Is(cause, ErrUnavailable) {
		t.Fatalf("the second run's watchdog: cause %v, want ErrUnavailable", cause)
	}
}
