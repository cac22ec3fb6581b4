package formsapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// jitterFactor spreads backoff waits over ±50% so that forms (and pods)
// that failed together do not retry together.
const jitterFactor = 0.5

// maxMalformedAttempts stops retrying bodies that do not decode: a
// truncated transfer is transient, a server that always sends garbage is not.
const maxMalformedAttempts = 3

// maxErrorBodyRead is how much of an error response is read to quote from.
const maxErrorBodyRead = 4 << 10

// bodyTooLargeError is a body over MaxBodyBytes: the same page is as
// large on the next attempt, so it is not retried.
type bodyTooLargeError struct{ limit int64 }

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("body exceeds the %d byte limit", e.limit)
}

// Client reads pages of form submissions. It is safe for concurrent use;
// all its calls share one limiter (see the package doc, Pacing).
type Client struct {
	cfg     Config
	base    *url.URL
	http    *http.Client
	limiter *limiter
	tok     *tokenMatcher
	// rejected is set by the first 401: the token is the same for every
	// form, so every later call fails at once instead of spending a request
	// (and a rate-limit slot) to hear the same answer.
	rejected atomic.Pointer[Error]
	// reached is set by the first response of any kind: from then on a
	// refused connection is the API going away for a while, retried,
	// rather than a base URL that points nowhere (unreachable).
	reached atomic.Bool
}

// New validates cfg, fills its defaults and returns a Client. The error
// lists every problem at once.
func New(cfg Config) (*Client, error) {
	cfg, base, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hc := *cfg.HTTPClient
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{
		cfg:     cfg,
		base:    base,
		http:    &hc,
		limiter: newLimiter(cfg.RateLimit, cfg.MaxRetryAfter, cfg.Now, cfg.Sleep),
		tok:     newTokenMatcher(cfg.Token.Reveal()),
	}, nil
}

// Config returns the effective configuration, defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// Response is what one Page call cost: every attempt it made, retries
// included. It is returned even when the call fails, so that callers can
// account for the requests a failure spent.
type Response struct {
	// Requests counts the HTTP requests made, retries included.
	Requests int
	// RateLimited counts the requests answered 429.
	RateLimited int
	// Waited is the time spent in retry waits: the backoff or Retry-After
	// wait after a failed attempt and, after a 429, the rate limiter's
	// hold until the server's window closes. It is what MaxWait bounds.
	Waited time.Duration
	// Paced is the rest of the time spent in the rate limiter: the
	// ceiling's spacing, and waits for a window that successful requests
	// spent to close.
	Paced time.Duration
}

// Page fetches one page of a form's submissions:
// {base}/api/forms/{formID}/submissions?page=N&limit=M. limit 0 leaves the
// page size to the server; the older form ignores limit anyway, so callers
// must use the returned PerPage. Transient failures (429, 5xx, transport,
// malformed or truncated bodies) are retried within MaxWait (see
// Response.Waited for what it counts); the returned error is then the last
// attempt's *Error.
func (c *Client) Page(ctx context.Context, formID string, page, limit int) (*Page, *Response, error) {
	resp := &Response{}
	var problems []string
	if formID == "" {
		problems = append(problems, "form id is empty")
	}
	if page < 1 {
		problems = append(problems, fmt.Sprintf("page must be >= 1, got %d", page))
	}
	if limit < 0 || limit > MaxLimit {
		problems = append(problems, fmt.Sprintf("limit must be between 0 (server default) and %d, got %d", MaxLimit, limit))
	}
	if len(problems) > 0 {
		return nil, resp, fmt.Errorf("formsapi: form %q page %d: %s", formID, page, strings.Join(problems, "; "))
	}
	u := *c.base
	prefix := strings.TrimRight(c.base.EscapedPath(), "/")
	escaped := prefix + "/api/forms/" + url.PathEscape(formID) + "/submissions"
	if err := setEscapedPath(&u, escaped); err != nil {
		return nil, resp, fmt.Errorf("formsapi: form %q page %d: building URL: %w", formID, page, err)
	}
	q := url.Values{}
	q.Set("page", strconv.Itoa(page))
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	u.RawQuery = q.Encode()
	p, err := c.get(ctx, formID, page, &u, resp)
	return p, resp, err
}

func setEscapedPath(u *url.URL, escaped string) error {
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return err
	}
	u.Path, u.RawPath = p, escaped
	return nil
}

// get runs attempts until one succeeds, one fails for good, the wait
// budget runs out or ctx is done.
func (c *Client) get(ctx context.Context, formID string, page int, u *url.URL, resp *Response) (*Page, error) {
	// Backoff's own jitter reads the global math/rand and cannot be
	// injected, so it runs without randomisation and jitter is applied here
	// from Config.Rand.
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(c.cfg.InitialBackoff),
		backoff.WithMaxInterval(c.cfg.MaxBackoff),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0), // the budget is MaxWait, counted below
	)
	var waited time.Duration
	var last *Error
	malformed := 0
	// After a 429 the limiter holds the retry until the server's window
	// closes, which can be far longer than the backoff: that hold is part
	// of the retry's wait and is spent from MaxWait. Holds for any other
	// reason (the ceiling, or a window spent by successful requests) are
	// pacing, which the budget does not cover.
	after429 := false
	for attempt := 1; ; attempt++ {
		if e := c.unauthorized(formID, page); e != nil {
			return nil, e
		}
		maxHold := noHoldLimit
		if after429 {
			maxHold = c.cfg.MaxWait - waited
		}
		sl, spaced, held, err := c.limiter.wait(ctx, maxHold)
		resp.Paced += spaced
		if after429 {
			waited += held
			resp.Waited = waited
		} else {
			resp.Paced += held
		}
		if errors.Is(err, errHoldBudget) {
			// The window would close only after the budget is spent:
			// give up as when the backoff alone would exceed it.
			last.Attempts = attempt - 1
			return nil, last
		}
		if err != nil {
			return nil, c.cancelled(formID, page, err, last)
		}
		// Again: another form may have been refused while this one waited.
		// The slot is handed back unused: it may be the one probe other
		// callers wait on.
		if e := c.unauthorized(formID, page); e != nil {
			c.limiter.observe(sl, 0, nil, 0)
			return nil, e
		}
		start := c.cfg.Now()
		resp.Requests++
		p, hdr, e := c.attempt(ctx, formID, page, u)
		if e == nil {
			c.limiter.observe(sl, http.StatusOK, hdr, 0)
		} else {
			c.limiter.observe(sl, e.Status, hdr, e.RetryAfter)
		}
		ev := Event{FormID: formID, Page: page, Attempt: attempt, Duration: c.cfg.Now().Sub(start)}
		if e == nil {
			ev.Status = http.StatusOK
			c.observe(ev)
			return p, nil
		}
		ev.Status, ev.Err, ev.RetryAfter = e.Status, e, e.RetryAfter
		switch e.Kind {
		case KindRateLimited:
			resp.RateLimited++
		case KindUnauthorized:
			c.rejected.CompareAndSwap(nil, e)
		}
		if ctx.Err() != nil {
			// The caller gave up; the failure is theirs, not the server's,
			// and the attempt's own error (a transport error) only says so.
			c.observe(ev)
			return nil, c.cancelled(formID, page, context.Cause(ctx), last)
		}
		last = e
		if e.Kind == KindMalformed {
			malformed++
		}
		var wait time.Duration
		after429 = e.Kind == KindRateLimited
		final := !e.Kind.retryable() || malformed >= maxMalformedAttempts || lasting(e) || (!c.reached.Load() && unreachable(e.Err))
		if !final {
			wait = c.nextWait(bo, e.RetryAfter)
			var hold time.Duration
			if after429 {
				// Known before sleeping: a retry held until a window
				// that closes after the budget is spent is not made.
				hold = c.limiter.holdAt(c.cfg.Now().Add(wait))
			}
			final = waited+wait+hold > c.cfg.MaxWait
		}
		if final {
			e.Attempts = attempt
			c.observe(ev)
			return nil, e
		}
		ev.Wait = wait
		c.observe(ev)
		waited += wait
		resp.Waited = waited
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return nil, c.cancelled(formID, page, err, last)
		}
	}
}

// lasting reports a failure of a retryable kind that the next attempt
// would meet again: a body over the size limit, or a server certificate
// that does not verify (untrusted, expired, for another name).
func lasting(e *Error) bool {
	var tooLarge *bodyTooLargeError
	var cert *tls.CertificateVerificationError
	return errors.As(e.Err, &tooLarge) || errors.As(e.Err, &cert)
}

// unauthorized returns, once a 401 has been seen, the error for a call
// that is not sent.
func (c *Client) unauthorized(formID string, page int) *Error {
	first := c.rejected.Load()
	if first == nil {
		return nil
	}
	return &Error{FormID: formID, Page: page, Status: first.Status, Kind: KindUnauthorized,
		Err: fmt.Errorf("not sent: the API already refused the token for form %q", first.FormID)}
}

// nextWait honours a usable Retry-After exactly (capped at MaxRetryAfter),
// and otherwise takes the next jittered exponential backoff.
func (c *Client) nextWait(bo *backoff.ExponentialBackOff, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, c.cfg.MaxRetryAfter)
	}
	d := bo.NextBackOff()
	r := c.cfg.Rand()
	if !(r >= 0 && r < 1) {
		r = 0.5
	}
	jittered := time.Duration(float64(d) * (1 - jitterFactor + 2*jitterFactor*r))
	return max(min(jittered, c.cfg.MaxBackoff), 0)
}

func (c *Client) observe(ev Event) {
	if c.cfg.Observer != nil {
		c.cfg.Observer(ev)
	}
}

func (c *Client) cancelled(formID string, page int, cause error, last *Error) error {
	if last != nil {
		return fmt.Errorf("formsapi: form %q page %d: stopped: %w (last attempt: %w)", formID, page, cause, last)
	}
	return fmt.Errorf("formsapi: form %q page %d: stopped: %w", formID, page, cause)
}

// attempt makes one request under RequestTimeout, body included, and
// classifies the outcome.
func (c *Client) attempt(ctx context.Context, formID string, page int, u *url.URL) (*Page, http.Header, *Error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	fail := func(kind Kind, status int, err error) *Error {
		return &Error{FormID: formID, Page: page, Status: status, Kind: kind, Err: c.redact(err)}
	}

	req, err := http.NewRequestWithContext(actx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, fail(KindTransport, 0, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token.Reveal())
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)

	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fail(KindTransport, 0, c.timeoutText(actx, err))
	}
	c.reached.Store(true)
	defer resp.Body.Close()

	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyRead))
		e := fail(statusKind(resp.StatusCode), resp.StatusCode, nil)
		e.Body = errorText(body, c.tok)
		if ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), c.cfg.Now()); ok {
			e.RetryAfter = ra
		}
		return nil, resp.Header, e
	}

	// An announced length says it before the body is read.
	if resp.ContentLength > c.cfg.MaxBodyBytes {
		return nil, resp.Header, fail(KindMalformed, resp.StatusCode, &bodyTooLargeError{c.cfg.MaxBodyBytes})
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBodyBytes+1))
	if err != nil {
		if actx.Err() != nil {
			return nil, resp.Header, fail(KindTransport, resp.StatusCode, c.timeoutText(actx, err))
		}
		return nil, resp.Header, fail(KindMalformed, resp.StatusCode, fmt.Errorf("body cut off after %d bytes (truncated transfer): %w", len(body), err))
	}
	if int64(len(body)) > c.cfg.MaxBodyBytes {
		return nil, resp.Header, fail(KindMalformed, resp.StatusCode, &bodyTooLargeError{c.cfg.MaxBodyBytes})
	}
	p, err := decodePage(formID, page, body)
	if err != nil {
		return nil, resp.Header, c.decodeError(formID, page, resp.StatusCode, body, err)
	}
	return p, resp.Header, nil
}

// decodeError makes a decode failure safe to store. Its message quotes
// server values cut to a few dozen characters, and a cut token no longer
// matches the token: when the body holds the token, the message is taken
// from decoding the body with the token redacted, before any cut.
func (c *Client) decodeError(formID string, page, status int, body []byte, err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{FormID: formID, Page: page, Kind: KindMalformed, Err: err}
	}
	if c.tok.contains(string(body)) {
		var safe *Error
		if _, err2 := decodePage(formID, page, []byte(c.tok.redact(string(body)))); errors.As(err2, &safe) && safe.Kind == e.Kind {
			e = safe
		} else {
			e.Err = errors.New("the body quotes the API token, so the details are withheld")
		}
	}
	e.Status = status
	e.Err = c.redact(e.Err)
	return e
}

func (c *Client) timeoutText(actx context.Context, err error) error {
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no complete response within the %s request timeout: %w", c.cfg.RequestTimeout, err)
	}
	return err
}

func statusKind(status int) Kind {
	switch {
	case status == http.StatusBadRequest:
		return KindAccessDisabled
	case status == http.StatusUnauthorized:
		return KindUnauthorized
	case status == http.StatusForbidden:
		return KindForbidden
	case status == http.StatusNotFound:
		return KindFormNotFound
	case status == http.StatusGone:
		return KindGone
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status >= 500 && status <= 599:
		return KindServer
	}
	return KindUnexpectedStatus
}

// redact is the last line of defence: an error whose text would contain
// the token in any encoding (echoed by a server into a body we quote, say)
// is wrapped so that its text does not, while errors.Is/As still see
// through it.
func (c *Client) redact(err error) error {
	if err == nil || !c.tok.contains(err.Error()) {
		return err
	}
	return &redactedError{err: err, tok: c.tok}
}

type redactedError struct {
	err error
	tok *tokenMatcher
}

func (r *redactedError) Error() string { return r.tok.redact(r.err.Error()) }
func (r *redactedError) Unwrap() error { return r.err }
