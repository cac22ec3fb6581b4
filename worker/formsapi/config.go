package formsapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/internal/loopback"
)

// Version is the formsync version sent in the default User-Agent. It is
// stamped at build time with -ldflags "-X .../worker/formsapi.Version=...".
var Version = "dev"

// Defaults applied by New to zero-valued Config fields.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultRateLimit      = 5.0
	DefaultMaxWait        = 2 * time.Minute
	DefaultMaxRetryAfter  = 60 * time.Second
	DefaultInitialBackoff = 500 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultMaxBodyBytes   = 32 << 20

	// MaxLimit is the largest page size the API accepts (newer form).
	MaxLimit = 100

	// MinRateLimit is the lowest RateLimit accepted: one request per 100 s.
	MinRateLimit = 0.01
)

// redacted replaces secrets wherever a Config is printed.
const redacted = Redacted

// Config configures a Client. Zero values take the documented defaults.
type Config struct {
	// BaseURL is the API's base address, e.g. https://forms.example.com
	// (a path prefix is kept). Plain http is accepted only for loopback
	// hosts (127.0.0.0/8, ::1, localhost), so that tests and the local
	// simulator work while the token never crosses a network in clear.
	BaseURL string
	// Token is the personal access token sent as "Authorization: Bearer
	// <Token>". It never appears in errors, String, GoString or LogValue.
	Token Secret
	// UserAgent defaults to "formsync/" + Version.
	UserAgent string
	// RequestTimeout bounds one attempt, including reading the body, so a
	// stalled body is cut off and retried. Defaults to 30s.
	RequestTimeout time.Duration
	// RateLimit is the ceiling of the request rate (per second) shared by
	// all forms of one Client, retries included: starts are spaced at least
	// 1/RateLimit apart. Below it the Client follows the server's own
	// X-RateLimit-Limit/-Remaining and Retry-After, so a high ceiling gets
	// close to the plan's full rate without knowing it. Defaults to 5; must
	// be finite and at least MinRateLimit.
	RateLimit float64
	// MaxWait is the total of retry waits one Page call may spend,
	// counting, after a 429, the time the limiter holds the retry until
	// the server's rate-limit window closes (pacing under RateLimit or
	// under the window of successful requests is not counted). When the
	// next wait would exceed it, the call returns the last error.
	// Defaults to 2m.
	MaxWait time.Duration
	// MaxRetryAfter caps an honoured Retry-After, and a wait for the
	// server's rate-limit window to close. Defaults to 60s.
	MaxRetryAfter time.Duration
	// InitialBackoff and MaxBackoff shape the exponential backoff used when
	// the server gives no usable Retry-After. Default 500ms and 30s.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxBodyBytes bounds a response body; a larger one is malformed, and
	// not retried (refused on its Content-Length when it announces one).
	// Defaults to 32 MiB.
	MaxBodyBytes int64
	// HTTPClient defaults to a client with dial, TLS and header timeouts.
	// New uses a shallow copy that refuses redirects: a redirect must not
	// carry the token anywhere the caller did not configure.
	HTTPClient *http.Client
	// Observer, when set, is called synchronously after every attempt (for
	// metrics and per-form counts). It must be quick and safe for
	// concurrent use.
	Observer func(Event)
	// Now, Sleep and Rand are injectable for deterministic tests (the
	// limiter uses Now and Sleep too). Defaults:
	// time.Now, a timer that also returns when ctx is done, and
	// math/rand/v2.Float64.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Rand  func() float64
}

// Event describes one attempt of a Page call.
type Event struct {
	FormID  string
	Page    int
	Attempt int // 1-based
	// Status is the HTTP status, 0 when no response arrived.
	Status   int
	Duration time.Duration
	Err      error
	// Wait is the wait before the next attempt, 0 if there is none.
	Wait time.Duration
	// RetryAfter is the parsed Retry-After header, 0 if none or unusable.
	RetryAfter time.Duration
}

// String prints the configuration with the token redacted.
func (c Config) String() string {
	return fmt.Sprintf("formsapi.Config{BaseURL:%q Token:%s UserAgent:%q RequestTimeout:%s RateLimit:%g MaxWait:%s MaxRetryAfter:%s InitialBackoff:%s MaxBackoff:%s MaxBodyBytes:%d}",
		redactURL(c.BaseURL), c.tokenMark(), c.UserAgent, c.RequestTimeout, c.RateLimit, c.MaxWait, c.MaxRetryAfter, c.InitialBackoff, c.MaxBackoff, c.MaxBodyBytes)
}

// GoString makes %#v redact the token too.
func (c Config) GoString() string { return c.String() }

// LogValue makes slog print the configuration with the token redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", redactURL(c.BaseURL)),
		slog.String("token", c.tokenMark()),
		slog.String("user_agent", c.UserAgent),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.Float64("rate_limit", c.RateLimit),
		slog.Duration("max_wait", c.MaxWait),
		slog.Duration("max_retry_after", c.MaxRetryAfter),
		slog.Duration("initial_backoff", c.InitialBackoff),
		slog.Duration("max_backoff", c.MaxBackoff),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
	)
}

var _ slog.LogValuer = Config{}

func (c Config) tokenMark() string {
	if c.Token == "" {
		return `""`
	}
	return redacted
}

// redactURL hides any password in a URL (New refuses userinfo, but a
// Config may be printed before it is validated).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	return u.String()
}

// Validate reports every problem of c at once (errors.Join of
// *config.FieldError, naming the fields of Config, wrapped), its zero
// fields standing for their defaults: what New refuses, for a caller to
// check settings before it builds a Client.
func (c Config) Validate() error {
	_, _, err := c.withDefaults()
	return err
}

// withDefaults fills zero fields and returns every problem with what is set
// (errors.Join of *config.FieldError).
func (c Config) withDefaults() (Config, *url.URL, error) {
	var problems []error
	bad := func(field string, err error) { problems = append(problems, &config.FieldError{Field: field, Err: err}) }
	base, err := parseBaseURL(c.BaseURL)
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() { // each problem of the URL on its own
			bad("BaseURL", e)
		}
	} else if err != nil {
		bad("BaseURL", err)
	}
	switch {
	case c.Token == "":
		bad("Token", errors.New("the API token is empty"))
	case strings.ContainsFunc(c.Token.Reveal(), isSpaceOrControl):
		// Said without echoing the token: it may be almost right.
		bad("Token", errors.New("the API token contains whitespace or control characters: a stray newline, or a \"Bearer \" prefix? give the bare token"))
	}
	if strings.ContainsFunc(c.UserAgent, isControl) {
		bad("UserAgent", errors.New("the user agent contains control characters"))
	}
	// 0 means the default. Below MinRateLimit a sync would take hours per
	// page, which is a typo (0.001 for 1), not a choice.
	if c.RateLimit != 0 && !(c.RateLimit >= MinRateLimit) || math.IsInf(c.RateLimit, 0) {
		bad("RateLimit", fmt.Errorf("rate limit must be a finite number of at least %g requests per second, got %g", MinRateLimit, c.RateLimit))
	}
	for _, d := range []struct {
		field, name string
		v           time.Duration
	}{
		{"RequestTimeout", "request timeout", c.RequestTimeout},
		{"MaxWait", "max wait", c.MaxWait},
		{"MaxRetryAfter", "max Retry-After", c.MaxRetryAfter},
		{"InitialBackoff", "initial backoff", c.InitialBackoff},
		{"MaxBackoff", "max backoff", c.MaxBackoff},
	} {
		if d.v < 0 {
			bad(d.field, fmt.Errorf("%s must not be negative, got %s", d.name, d.v))
		}
	}
	if c.MaxBodyBytes < 0 {
		bad("MaxBodyBytes", fmt.Errorf("max body bytes must not be negative, got %d", c.MaxBodyBytes))
	}
	if len(problems) > 0 {
		return c, nil, fmt.Errorf("formsapi: invalid configuration: %w", errors.Join(problems...))
	}

	c.UserAgent = cmp.Or(c.UserAgent, "formsync/"+Version)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.RateLimit = cmp.Or(c.RateLimit, DefaultRateLimit)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, DefaultMaxRetryAfter)
	c.InitialBackoff = cmp.Or(c.InitialBackoff, DefaultInitialBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.MaxBackoff = max(c.MaxBackoff, c.InitialBackoff)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	if c.HTTPClient == nil {
		c.HTTPClient = defaultHTTPClient(c.RequestTimeout)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleepContext
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c, base, nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("the API base URL is empty: set it to e.g. https://forms.example.com")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("the API base URL %q does not parse: %w", redactURL(raw), errors.Unwrap(err))
	}
	var problems []error
	if u.Scheme == "" || u.Host == "" {
		problems = append(problems, fmt.Errorf("the API base URL %q is not absolute: give scheme and host, e.g. https://forms.example.com", redactURL(raw)))
	}
	if u.User != nil {
		problems = append(problems, fmt.Errorf("the API base URL %q carries user credentials: remove them, the token is configured on its own", redactURL(raw)))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		problems = append(problems, fmt.Errorf("the API base URL %q has a query or fragment: give only scheme, host and an optional path prefix", redactURL(raw)))
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if u.Host != "" && !loopback.Host(u.Hostname()) {
			problems = append(problems, fmt.Errorf("the API base URL %q uses plain http, which would send the token in clear: use https (http is allowed only for loopback hosts): %w", redactURL(raw), ErrInsecureURL))
		}
	case "":
	default:
		problems = append(problems, fmt.Errorf("the API base URL %q has scheme %q: use https: %w", redactURL(raw), u.Scheme, ErrInsecureURL))
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func isSpaceOrControl(r rune) bool { return isControl(r) || r == ' ' }

func defaultHTTPClient(responseHeaderTimeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
	}}
}

// sleepContext waits for d or until ctx is done, whichever comes first.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
