package bigquery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"time"

	"github.com/formsync/formsync/internal/loopback"
	htransport "google.golang.org/api/transport/http"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/option"
)

// The Go client retries a refused connection, a reset one and every 5xx
// without end, sleeping up to 32 s between attempts, and has no bound of its
// own on a request that is never answered: a BigQuery that is down would
// hold a sync for ever, silently. So every request goes through a transport
// that bounds the wait for an answer (Config.Timeout: the dial, then the
// response headers once the request is written, so that a large upload is
// not cut off while it is sent), and every operation of the sink (Open,
// ReadState, Commit, ...) runs under a watchdog that ends it once BigQuery
// has failed for Timeout without a successful answer in between. A job that
// runs long keeps answering its polls, so only an outage trips it.

// ErrUnavailable: BigQuery did not answer, or answered only failures, for
// Config.Timeout. The error is also ErrRetryable: the next run tries again.
var ErrUnavailable = errors.New("bigquery: endpoint unavailable")

// Event is one BigQuery request that failed (no answer, or a 5xx or 429),
// for Config.Observer: the client or the sink tries it again until the
// operation's outage has lasted Config.Timeout.
type Event struct {
	// Endpoint is the server asked: Config.Endpoint, or Google's.
	Endpoint string
	// Method and Path are the request's, without its query.
	Method, Path string
	// Status is the HTTP status; 0 when no response arrived.
	Status int
	// Err says what went wrong.
	Err error
	// Down is how long the operation has had only failures; Left is what
	// remains of Config.Timeout before it gives up.
	Down, Left time.Duration
}

// outageKey carries an operation's *outage in the context of its requests.
type outageKey struct{}

// outage tracks the failures of one operation of the sink.
type outage struct {
	budget   time.Duration
	endpoint string
	cancel   context.CancelCauseFunc
	// now and after are the clock and the timer (time.Now and
	// time.AfterFunc unless a test stubs them).
	now   func() time.Time
	after func(time.Duration, func()) (stop func() bool)

	mu    sync.Mutex
	since time.Time // when the current run of failures began; zero if none
	last  error     // the latest failure
	// gen numbers the runs of failures: a watchdog fires only for the
	// run it was armed for. A timer that has already fired cannot be
	// stopped, and its call may reach fire after the run ended and a
	// new one began.
	gen       uint64
	stopTimer func() bool // the current run's timer
}

// newOutage is the watchdog of one operation, on the wall clock.
func newOutage(budget time.Duration, endpoint string, cancel context.CancelCauseFunc) *outage {
	return &outage{budget: budget, endpoint: endpoint, cancel: cancel, now: time.Now,
		after: func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }}
}

// failed records a failed request that began waiting for an answer at
// start; the first failure of a run arms the watchdog.
func (o *outage) failed(start time.Time, err error) (down, left time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = err
	if o.since.IsZero() {
		o.since = start
		o.gen++
		gen := o.gen
		o.stopTimer = o.after(max(o.budget-o.now().Sub(start), 0), func() { o.fire(gen) })
	}
	down = o.now().Sub(o.since)
	return down, max(o.budget-down, 0)
}

// answered ends a run of failures.
func (o *outage) answered() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.since = time.Time{}
	o.gen++
	if o.stopTimer != nil {
		o.stopTimer()
		o.stopTimer = nil
	}
}

// fire ends the operation, if the run of failures the timer was armed
// for (gen) is still the current one.
func (o *outage) fire(gen uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() || gen != o.gen {
		return // answered meanwhile
	}
	o.cancel(&unavailableError{endpoint: o.endpoint, budget: o.budget, last: o.last})
}

// spent returns the outage's error when failures have lasted the whole
// budget, else nil.
func (o *outage) spent() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() || o.now().Sub(o.since) < o.budget {
		return nil
	}
	return &unavailableError{endpoint: o.endpoint, budget: o.budget, last: o.last}
}

func (o *outage) stop() {
	o.answered()
	o.cancel(nil)
}

// unavailableError is why an operation was ended by its watchdog.
type unavailableError struct {
	endpoint string
	budget   time.Duration
	last     error
}

func (e *unavailableError) Error() string {
	msg := fmt.Sprintf("bigquery: %s answered no request for %s (FORMSYNC_BQ_TIMEOUT)", e.endpoint, e.budget)
	if e.last != nil {
		msg += "; last failure: " + e.last.Error()
	}
	return msg + "; check that BigQuery is reachable from here (network, proxy, FORMSYNC_BQ_ENDPOINT); no watermark moved, and the next run tries again"
}

func (e *unavailableError) Is(target error) bool {
	return target == ErrUnavailable || target == ErrRetryable
}

// guard runs op under an outage watchdog: op's context is cancelled once
// BigQuery has failed for Config.Timeout, and op's error is then the
// outage's, naming the endpoint.
func (s *Sink) guard(ctx context.Context, op func(context.Context) error) error {
	if o, ok := ctx.Value(outageKey{}).(*outage); ok && o != nil {
		return op(ctx) // nested: the outer watchdog covers it
	}
	ctx, cancel := context.WithCancelCause(ctx)
	o := newOutage(s.cfg.Timeout, s.endpointName(), cancel)
	defer o.stop()
	err := op(context.WithValue(ctx, outageKey{}, o))
	if err == nil {
		return nil
	}
	var ue *unavailableError
	if cause := context.Cause(ctx); errors.As(cause, &ue) {
		return cause
	}
	// The step may give up on its own as the budget runs out, before
	// the watchdog's timer has fired: the outage is still the cause.
	if ue := o.spent(); ue != nil {
		return ue
	}
	return err
}

// guardValue is guard for an operation that returns a value.
func guardValue[T any](s *Sink, ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	var v T
	err := s.guard(ctx, func(ctx context.Context) error {
		var err error
		v, err = op(ctx)
		return err
	})
	return v, err
}

// endpointName is the server the sink talks to, for messages.
func (s *Sink) endpointName() string {
	if s.cfg.Endpoint != "" {
		return apiRoot(s.cfg.Endpoint)
	}
	return "https://bigquery.googleapis.com"
}

// watchTransport reports each request's outcome to the operation that
// made it, and to Config.Observer.
type watchTransport struct {
	base     http.RoundTripper
	endpoint string
	observe  func(Event)
}

func (t *watchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	o, _ := req.Context().Value(outageKey{}).(*outage)
	var mu sync.Mutex
	start := time.Now()
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		// A large upload takes its time to send: the wait for an answer
		// starts once it is sent.
		mu.Lock()
		start = time.Now()
		mu.Unlock()
	}}
	resp, err := t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	status := 0
	fail := err
	if err == nil {
		status = resp.StatusCode
		if status >= 500 || status == http.StatusTooManyRequests {
			fail = fmt.Errorf("HTTP %d %s", status, http.StatusText(status))
		}
	}
	if fail == nil {
		if o != nil {
			o.answered()
		}
		return resp, err
	}
	if req.Context().Err() != nil {
		return resp, err // the operation ended: no failure of BigQuery's
	}
	mu.Lock()
	began := start
	mu.Unlock()
	var down, left time.Duration
	if o != nil {
		down, left = o.failed(began, fail)
	}
	if t.observe != nil {
		t.observe(Event{Endpoint: t.endpoint, Method: req.Method, Path: req.URL.Path, Status: status, Err: fail, Down: down, Left: left})
	}
	return resp, err
}

// transport is the sink's HTTP transport: dial and response headers
// bounded by Timeout, each outcome watched. Unless the endpoint is an
// emulator's (sendsCredentials) it carries the Application Default
// Credentials (or those of Config.ClientOptions), as the client's own
// would: Google's endpoint, a regional one, Private Service Connect.
func transport(ctx context.Context, cfg Config, endpoint string) (http.RoundTripper, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: min(cfg.Timeout, 30*time.Second), KeepAlive: 30 * time.Second}
	base.DialContext = dialer.DialContext
	base.ResponseHeaderTimeout = cfg.Timeout
	var rt http.RoundTripper = &watchTransport{base: base, endpoint: endpoint, observe: cfg.Observer}
	if !sendsCredentials(cfg.Endpoint) {
		return rt, nil
	}
	opts := append([]option.ClientOption{option.WithScopes(bq.Scope)}, cfg.ClientOptions...)
	rt, err := htransport.NewTransport(ctx, rt, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigquery: credentials: %w", err)
	}
	return rt, nil
}

// sendsCredentials reports whether requests to endpoint (Config.Endpoint)
// carry Google credentials: not to an emulator or fake, which is served
// over http or on a loopback host, and needs none; to any other https
// endpoint (a regional endpoint such as
// https://bigquery.europe-west3.rep.googleapis.com, Private Service
// Connect), which is BigQuery's and refuses a request without them.
func sendsCredentials(endpoint string) bool {
	if endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" {
		return false
	}
	return !loopback.Host(u.Hostname())
}
