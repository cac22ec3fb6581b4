package files

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/formsync/formsync/internal/loopback"
)

// Defaults of FetcherConfig.
const (
	DefaultMaxBytes       = 25 << 20
	DefaultConnectTimeout = 10 * time.Second
	DefaultTimeout        = 2 * time.Minute
	DefaultMaxRedirects   = 5
	DefaultAttempts       = 4
	DefaultConcurrency    = 4
)

// FetcherConfig are a Fetcher's settings.
type FetcherConfig struct {
	// APIOrigin is the API's scheme://host[:port]. The token goes to a
	// file URL on exactly this origin, and to no other.
	APIOrigin string
	// Token is the API's bearer token.
	Token string
	// AddressPolicy says which addresses files may come from.
	AddressPolicy
	// MaxBytes caps a file's size. Defaults to 25 MiB (the service takes
	// files up to 5 MB).
	MaxBytes int64
	// ConnectTimeout caps each connection's dial and TLS handshake.
	// Defaults to 10s.
	ConnectTimeout time.Duration
	// Timeout caps one attempt at a file, from the request to the last
	// byte stored. Defaults to 2m.
	Timeout time.Duration
	// MaxRedirects caps the redirects one fetch follows. Defaults to 5.
	MaxRedirects int
	// Attempts is how many times a transient failure (the network, 408,
	// 429, 5xx) is tried in all. Defaults to 4.
	Attempts int
	// Concurrency caps the fetches in flight at once. Defaults to 4.
	Concurrency int
	// NewBackOff gives the waits between attempts. Defaults to an
	// exponential backoff from 500ms with jitter.
	NewBackOff func() backoff.BackOff
	// Resolver resolves host names. Defaults to net.DefaultResolver.
	Resolver Resolver
	// Dialer connects to the checked addresses. Defaults to a net.Dialer.
	Dialer Dialer
	// TLSConfig is the client's TLS configuration (a test server's roots).
	// Defaults to the system's.
	TLSConfig *tls.Config
}

// Fetcher fetches the files submissions name, safely: https only (http
// on loopback), every address checked before it is dialled, redirects
// re-checked, bodies capped and streamed, the API token kept to the API.
// It is safe for concurrent use.
type Fetcher struct {
	cfg       FetcherConfig
	apiOrigin string
	client    *http.Client
	slots     chan struct{}
}

// NewFetcher makes a Fetcher.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultMaxBytes)
	cfg.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, DefaultConnectTimeout)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxRedirects = cmp.Or(cfg.MaxRedirects, DefaultMaxRedirects)
	cfg.Attempts = cmp.Or(cfg.Attempts, DefaultAttempts)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	if cfg.NewBackOff == nil {
		cfg.NewBackOff = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 500*time.Millisecond, 10*time.Second, 0
			return b
		}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &net.Dialer{KeepAlive: 30 * time.Second}
	}
	var errs []error
	if cfg.MaxBytes < 0 || cfg.ConnectTimeout < 0 || cfg.Timeout < 0 || cfg.MaxRedirects < 0 || cfg.Attempts < 0 || cfg.Concurrency < 0 {
		errs = append(errs, errors.New("a size, timeout or count is negative"))
	}
	f := &Fetcher{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency)}
	if cfg.APIOrigin != "" {
		u, err := url.Parse(cfg.APIOrigin)
		if err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
			errs = append(errs, fmt.Errorf("the API origin %q is not scheme://host[:port]", cfg.APIOrigin))
		} else {
			f.apiOrigin = origin(u)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the file fetcher's settings: %w", err)
	}
	dial := &guardedDialer{policy: cfg.AddressPolicy, resolver: cfg.Resolver, dialer: cfg.Dialer}
	f.client = &http.Client{
		Transport: &http.Transport{
			// Never a proxy: the addresses checked must be the ones dialled.
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
				defer cancel()
				return dial.DialContext(ctx, network, addr)
			},
			TLSClientConfig:     cfg.TLSConfig.Clone(),
			TLSHandshakeTimeout: cfg.ConnectTimeout,
			ForceAttemptHTTP2:   true,
			// The bytes as served: what is hashed and capped is the file.
			DisableCompression:  true,
			MaxIdleConnsPerHost: cfg.Concurrency,
			IdleConnTimeout:     90 * time.Second,
		},
		// Redirects are followed by hand, each hop checked and given the
		// token or not by its own origin.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return f, nil
}

// CloseIdleConnections closes the connections kept for reuse.
func (f *Fetcher) CloseIdleConnections() { f.client.CloseIdleConnections() }

// Putter is where a fetched file's bytes stream to: a *Store.
type Putter interface {
	Put(ctx context.Context, r io.Reader, opts PutOptions) (Object, error)
}

// Result is a fetched and stored file.
type Result struct {
	Object
	// URL is where the bytes came from, after redirects.
	URL string
	// ContentType is the type the file was stored with, as given.
	ContentType string
	// SizeMismatch says the entry declared a size and the bytes received
	// are not that many: recorded, not trusted; the object is named by
	// the bytes received.
	SizeMismatch bool
}

// Fetch fetches the file of entry e and puts it to dst as it streams in.
// Its error is one of *GoneError, *TooLargeError, *RefusedError and
// *FailedError (Reason gives the word to record), or another when the
// store failed or ctx ended.
func (f *Fetcher) Fetch(ctx context.Context, e Entry, dst Putter) (Result, error) {
	if e.URL == nil || *e.URL == "" {
		return Result{}, &RefusedError{Why: "the entry has no url"}
	}
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	var (
		res      Result
		attempts int
		status   int
	)
	op := func() error {
		attempts++
		var err error
		res, status, err = f.attempt(ctx, e, dst)
		if err == nil || retryable(err) {
			return err
		}
		return backoff.Permanent(err)
	}
	b := backoff.WithContext(backoff.WithMaxRetries(f.cfg.NewBackOff(), uint64(max(f.cfg.Attempts-1, 0))), ctx)
	err := backoff.Retry(op, b)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("fetching %s: %w", *e.URL, context.Cause(ctx))
	case retryable(err):
		return Result{}, &FailedError{URL: *e.URL, StatusCode: status, Attempts: attempts, Err: err}
	}
	var failed *FailedError
	if errors.As(err, &failed) {
		failed.Attempts = attempts
	}
	return Result{}, err
}

// transientError is a failure worth another attempt.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

// storeError is the store failing, not the file.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// attempt is one try at a file: the request, its redirects, and the body
// streamed to dst. It gives the last HTTP status seen.
func (f *Fetcher) attempt(ctx context.Context, e Entry, dst Putter) (Result, int, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	target := *e.URL
	u, err := url.Parse(target)
	if err != nil {
		return Result{}, 0, &RefusedError{URL: target, Why: "not a URL"}
	}
	for hop := 0; ; hop++ {
		if err := checkURL(u); err != nil {
			return Result{}, 0, &RefusedError{URL: u.String(), Why: err.Error()}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return Result{}, 0, &RefusedError{URL: u.String(), Why: err.Error()}
		}
		req.Header.Set("User-Agent", "formsync")
		req.Header.Set("Accept", "*/*")
		if f.cfg.Token != "" && f.apiOrigin != "" && origin(u) == f.apiOrigin {
			req.Header.Set("Authorization", "Bearer "+f.cfg.Token)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			var refused *RefusedError
			if errors.As(err, &refused) {
				refused.URL = u.String()
				return Result{}, 0, refused
			}
			return Result{}, 0, &transientError{err}
		}
		switch code := resp.StatusCode; {
		case code >= 200 && code < 300:
			res, err := f.store(ctx, u, resp, e, dst)
			return res, code, err
		case isRedirect(code):
			loc := resp.Header.Get("Location")
			drain(resp)
			if hop >= f.cfg.MaxRedirects {
				return Result{}, code, &FailedError{URL: target, StatusCode: code, Attempts: 1, Err: fmt.Errorf("more than %d redirects", f.cfg.MaxRedirects)}
			}
			next, err := u.Parse(loc)
			if loc == "" || err != nil {
				return Result{}, code, &FailedError{URL: target, StatusCode: code, Attempts: 1, Err: fmt.Errorf("a redirect to %q", loc)}
			}
			u = next
		case code == http.StatusNotFound || code == http.StatusGone:
			drain(resp)
			return Result{}, code, &GoneError{URL: u.String(), StatusCode: code}
		case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
			drain(resp)
			return Result{}, code, &transientError{fmt.Errorf("HTTP %d", code)}
		default:
			drain(resp)
			return Result{}, code, &FailedError{URL: u.String(), StatusCode: code, Attempts: 1, Err: fmt.Errorf("HTTP %d", code)}
		}
	}
}

// store streams a successful response's body to dst.
func (f *Fetcher) store(ctx context.Context, u *url.URL, resp *http.Response, e Entry, dst Putter) (Result, error) {
	defer resp.Body.Close()
	if resp.ContentLength > f.cfg.MaxBytes {
		return Result{}, &TooLargeError{URL: u.String(), Limit: f.cfg.MaxBytes}
	}
	// The entry's type is what the service recorded at upload; a file
	// server often answers with a generic one.
	ctype := resp.Header.Get("Content-Type")
	if e.Type != nil && mediaType(*e.Type) != "" {
		ctype = *e.Type
	}
	body := &cappedReader{r: resp.Body, left: f.cfg.MaxBytes}
	opts := PutOptions{ContentType: ctype}
	if e.Name != nil {
		opts.Name = *e.Name
	}
	obj, err := dst.Put(ctx, body, opts)
	switch {
	case body.tooLarge:
		return Result{}, &TooLargeError{URL: u.String(), Limit: f.cfg.MaxBytes}
	case body.err != nil:
		return Result{}, &transientError{fmt.Errorf("reading %s: %w", u, body.err)}
	case err != nil:
		return Result{}, &storeError{err}
	}
	return Result{
		Object:       obj,
		URL:          u.String(),
		ContentType:  mediaType(ctype),
		SizeMismatch: e.Size != nil && *e.Size >= 0 && *e.Size != obj.Size,
	}, nil
}

// cappedReader fails once more than left bytes come, and remembers a
// failure of the body it reads, so that one can be told from the store's.
type cappedReader struct {
	r        io.Reader
	left     int64
	tooLarge bool
	err      error
}

var errTooLarge = errors.New("the file is larger than the cap")

func (c *cappedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if c.left -= int64(n); c.left < 0 {
		c.tooLarge = true
		return 0, errTooLarge
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// drain reads a little of a body so its connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

// checkURL is the scheme rule: https, or http to a loopback host, as the
// API client allows. Addresses are checked when dialled.
func checkURL(u *url.URL) error {
	switch {
	case u.User != nil:
		return errors.New("a URL with credentials in it")
	case u.Host == "":
		return errors.New("no host")
	case strings.EqualFold(u.Scheme, "https"):
		return nil
	case strings.EqualFold(u.Scheme, "http") && loopback.Host(u.Hostname()):
		return nil
	}
	return fmt.Errorf("the scheme %q (only https, or http on loopback)", u.Scheme)
}

// origin is a URL's scheme://host:port, the port spelled out and the
// scheme and host in lower case, so that equal origins compare equal.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
