package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/formsync/formsync/testkit/filestest"
	"github.com/google/go-cmp/cmp"
)

// fileServer serves files on loopback and records each request's path
// and Authorization header.
type fileServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "path auth"
}

func newFileServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *fileServer {
	t.Helper()
	fs := &fileServer{}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		fs.seen = append(fs.seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		fs.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *fileServer) requests() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]string(nil), fs.seen...)
}

// newFetcher is a fetcher allowed loopback, retrying without waiting.
func newFetcher(t *testing.T, cfg FetcherConfig) *Fetcher {
	t.Helper()
	cfg.AllowLoopback = true
	// Never the network: names resolve only through the test's table
	// (localhost alone by default), and the dialer connects to 127.0.0.1
	// alone, failing the test for any other address.
	if cfg.Resolver == nil {
		cfg.Resolver = &filestest.Resolver{T: t, Hosts: map[string][]string{"localhost": {"127.0.0.1"}}}
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &filestest.Dialer{T: t, Loopback: true}
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 2
	}
	cfg.NewBackOff = func() backoff.BackOff { return &backoff.ZeroBackOff{} }
	f, err := NewFetcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.CloseIdleConnections)
	return f
}

func memStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(t.Context(), "mem://", StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func entry(url string) Entry { return Entry{URL: &url} }

var fileBytes = bytes.Repeat([]byte("0123456789abcdef"), 50<<10/16)

// TestFetch: a file is fetched and stored under the digest of its bytes,
// with the entry's name and type; a size that differs from the entry's is
// recorded.
func TestFetch(t *testing.T) {
	t.Parallel()
	srv := newFileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(fileBytes)
	})
	f, s := newFetcher(t, FetcherConfig{}), memStore(t)
	e := entry(srv.URL + "/cv.pdf")
	e.Name, e.Type, e.Size = str("cv.pdf"), str("application/pdf"), i64(int64(len(fileBytes)))
	res, err := f.Fetch(t.Context(), e, s)
	if err != nil {
		t.Fatal(err)
	}
	sha := digest(fileBytes)
	want := Result{Object: Object{SHA256: sha, Size: int64(len(fileBytes)), URI: s.URI(sha)}, URL: srv.URL + "/cv.pdf", ContentType: "application/pdf"}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Fetch (-want +got):\n%s", diff)
	}
	attrs, err := s.Attributes(t.Context(), sha)
	if err != nil || attrs.Name != "cv.pdf" || attrs.ContentType != "application/pdf" {
		t.Errorf("Attributes = %+v, %v", attrs, err)
	}

	// Declared 5 MB, got 50 KB: stored as received, the mismatch recorded.
	e.Size = i64(5_000_000)
	res, err = f.Fetch(t.Context(), e, s)
	if err != nil {
		t.Fatal(err)
	}
	if !res.SizeMismatch || !res.Existed || res.SHA256 != sha {
		t.Errorf("Fetch with a wrong size = %+v, want the same object and a mismatch", res)
	}
	// The type from the server when the entry has none.
	e.Type = nil
	if res, err = f.Fetch(t.Context(), e, s); err != nil || res.ContentType != "application/octet-stream" {
		t.Errorf("Fetch without a type = %+v, %v", res, err)
	}
}

// TestFetchFailures: each way a file is not stored gives its reason, and
// only transient failures are tried again.
func TestFetchFailures(t *testing.T) {
	t.Parallel()
	var flaky atomic.Int32
	srv := newFileServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.NotFound(w, r)
		case "/410":
			w.WriteHeader(http.StatusGone)
		case "/500", "/500-again":
			w.WriteHeader(http.StatusInternalServerError)
		case "/403":
			w.WriteHeader(http.StatusForbidden)
		case "/flaky": // 503 once, then the file
			if flaky.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte("at last"))
		case "/large": // announced too large
			w.Write(bytes.Repeat([]byte("x"), 5000))
		case "/large-chunked": // no length announced; too large once read
			for range 5 {
				w.Write(bytes.Repeat([]byte("x"), 1000))
				w.(http.Flusher).Flush()
			}
		case "/slow": // some bytes, then nothing until the client gives up
			w.Write([]byte("first bytes"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/empty-location":
			w.WriteHeader(http.StatusFound)
		}
	})
	f := newFetcher(t, FetcherConfig{MaxBytes: 4096})
	// Only the slow server meets the short timeout; the others answer
	// in full however loaded the machine.
	slow := newFetcher(t, FetcherConfig{MaxBytes: 4096, Timeout: 200 * time.Millisecond})
	for _, tc := range []struct {
		path     string
		reason   string
		requests int
	}{
		{"/404", ReasonExpired, 1},
		{"/410", ReasonExpired, 1},
		{"/500", ReasonFailed, 2},
		{"/403", ReasonFailed, 1},
		{"/flaky", "", 2},
		{"/large", ReasonTooLarge, 1},
		{"/large-chunked", ReasonTooLarge, 1},
		{"/slow", ReasonFailed, 2},
		{"/loop", ReasonFailed, 1 + DefaultMaxRedirects},
		{"/empty-location", ReasonFailed, 1},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			s, f := memStore(t), f
			if tc.path == "/slow" {
				f = slow
			}
			res, err := f.Fetch(t.Context(), entry(srv.URL+tc.path), s)
			if got := Reason(err); got != tc.reason {
				t.Fatalf("Fetch = %+v, %v: reason %q, want %q", res, err, got, tc.reason)
			}
			n := 0
			for _, r := range srv.requests() {
				if strings.HasPrefix(r, tc.path+" ") {
					n++
				}
			}
			if n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if err != nil {
				if got := keys(t, s); len(got) != 0 {
					t.Errorf("objects after a failed fetch: %v", got)
				}
			}
		})
	}
	var failed *FailedError
	if _, err := f.Fetch(t.Context(), entry(srv.URL+"/500-again"), memStore(t)); !errors.As(err, &failed) || failed.StatusCode != 500 || failed.Attempts != 2 {
		t.Errorf("Fetch of a 500 = %v, want a FailedError of HTTP 500 after 2 attempts", err)
	}
}

// TestFetchToken: the API token goes to the API's origin only, never to
// another origin (another port on the same host is another origin), and
// never on a redirect to one.
func TestFetchToken(t *testing.T) {
	t.Parallel()
	var api, other *fileServer
	serve := func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/to-other":
			http.Redirect(w, r, other.URL+"/file", http.StatusFound)
		case r.URL.Path == "/to-api":
			http.Redirect(w, r, api.URL+"/file", http.StatusTemporaryRedirect)
		default:
			w.Write([]byte("bytes"))
		}
	}
	api, other = newFileServer(t, serve), newFileServer(t, serve)
	f := newFetcher(t, FetcherConfig{APIOrigin: strings.Replace(api.URL, "http://", "HTTP://", 1), Token: "secret"})
	for _, u := range []string{api.URL + "/file", api.URL + "/to-other", other.URL + "/file", other.URL + "/to-api"} {
		if _, err := f.Fetch(t.Context(), entry(u), memStore(t)); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"/file Bearer secret", "/to-other Bearer secret", "/file Bearer secret"}, api.requests()); diff != "" {
		t.Errorf("requests to the API's origin (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/file ", "/file ", "/to-api "}, other.requests()); diff != "" {
		t.Errorf("requests to another origin (-want +got):\n%s", diff)
	}
}

// TestFetchLoopbackRefused: without the allowance a loopback URL is
// refused before any connection: the listener sees none.
func TestFetchLoopbackRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	resolver := &filestest.Resolver{T: t, Hosts: map[string][]string{"localhost": {"127.0.0.1"}}}
	f, err := NewFetcher(FetcherConfig{Resolver: resolver})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, u := range []string{"http://" + ln.Addr().String() + "/f", "http://localhost:" + port + "/f", "https://127.0.0.1:" + port + "/f"} {
		var refused *RefusedError
		if _, err := f.Fetch(t.Context(), entry(u), memStore(t)); !errors.As(err, &refused) || Reason(err) != ReasonRefused {
			t.Errorf("Fetch(%s) = %v, want refused", u, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections reached the listener", n)
	}
}

// TestFetchRefusedAddresses: hosts that resolve to a private, link-local
// (metadata) or mapped loopback address, URLs that name one, the metadata
// server's name and schemes other than https are refused with no dial.
func TestFetchRefusedAddresses(t *testing.T) {
	t.Parallel()
	resolver := &filestest.Resolver{T: t, Hosts: map[string][]string{
		"ten.test":    {"10.0.0.1"},
		"meta.test":   {"169.254.169.254"},
		"mapped.test": {"::ffff:127.0.0.1"},
		"cgnat.test":  {"100.64.0.7"},
		"mixed.test":  {"203.0.113.7", "10.0.0.1"},
		"ula.test":    {"fd00::1"},
		"zero.test":   {"0.0.0.0"},
	}}
	dialer := &filestest.Dialer{T: t}
	f, err := NewFetcher(FetcherConfig{Resolver: resolver, Dialer: dialer, NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"https://ten.test/f", "https://meta.test/latest/meta-data/", "https://mapped.test/f", "https://cgnat.test/f",
		"https://mixed.test/f", "https://ula.test/f", "https://zero.test/f",
		"https://169.254.169.254/computeMetadata/v1/", "https://[::ffff:10.0.0.1]/f", "https://[::ffff:a9fe:a9fe]/f",
		"https://[fe80::1%25eth0]/f", "https://0.0.0.0/f", "https://metadata.google.internal/computeMetadata/v1/",
		"http://ten.test/f", "http://203.0.113.7/f", "ftp://ten.test/f", "file:///etc/passwd", "https://user:pw@ten.test/f",
		"/relative", "",
	} {
		var refused *RefusedError
		if _, err := f.Fetch(t.Context(), entry(u), memStore(t)); !errors.As(err, &refused) || Reason(err) != ReasonRefused {
			t.Errorf("Fetch(%q) = %v, want refused", u, err)
		}
	}
	if _, err := f.Fetch(t.Context(), Entry{}, memStore(t)); Reason(err) != ReasonRefused {
		t.Errorf("Fetch of an entry without url = %v, want refused", err)
	}
	if got := dialer.Calls(); len(got) != 0 {
		t.Errorf("dialled %v", got)
	}
	for _, host := range resolver.Asked() {
		if host == "metadata.google.internal" || strings.Contains(host, ":") {
			t.Errorf("resolved %q", host)
		}
	}

	// Allowed, they are dialled.
	f, err = NewFetcher(FetcherConfig{AddressPolicy: AddressPolicy{AllowPrivate: true}, Resolver: resolver, Dialer: &filestest.Dialer{T: t, Fake: true}, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(t.Context(), entry("https://ten.test/f"), memStore(t)); Reason(err) != ReasonFailed || !errors.Is(err, filestest.ErrNoRoute) {
		t.Errorf("Fetch of a private address allowed = %v, want the dialer's failure", err)
	}
}

// TestFetchRedirectRefused: a redirect is checked as the first URL is:
// to a host resolving to the metadata address, to a private literal, or
// to plain http elsewhere, it is refused with no dial.
func TestFetchRedirectRefused(t *testing.T) {
	t.Parallel()
	srv := newFileServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	resolver := &filestest.Resolver{T: t, Hosts: map[string][]string{"meta.test": {"169.254.169.254"}, "ten.test": {"10.0.0.1"}}}
	dialer := &filestest.Dialer{T: t, Loopback: true}
	f := newFetcher(t, FetcherConfig{Resolver: resolver, Dialer: dialer})
	for _, to := range []string{"https://meta.test/latest/", "https://10.0.0.1/f", "http://ten.test/f", "https://[::ffff:169.254.169.254]/f", "https://metadata.google.internal/"} {
		var refused *RefusedError
		_, err := f.Fetch(t.Context(), entry(srv.URL+"/r?to="+to), memStore(t))
		if !errors.As(err, &refused) {
			t.Errorf("redirect to %s: %v, want refused", to, err)
			continue
		}
		if !strings.HasPrefix(refused.URL, strings.SplitN(to, "/", 4)[0]+"//") {
			t.Errorf("redirect to %s refused as %s", to, refused.URL)
		}
	}
	for _, addr := range dialer.Calls() {
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("dialled %s", addr)
		}
	}
}

// TestFetchDialsCheckedAddress: what is dialled is the address checked,
// as a literal: a host that resolves to a public address first and to
// loopback next (DNS rebinding) is dialled at the first only, and
// refused at the second.
func TestFetchDialsCheckedAddress(t *testing.T) {
	t.Parallel()
	var lookups atomic.Int32
	resolver := &filestest.Resolver{T: t, Next: func(string) []string {
		if lookups.Add(1) == 1 {
			return []string{"203.0.113.7"}
		}
		return []string{"127.0.0.1"}
	}}
	dialer := &filestest.Dialer{T: t, Fake: true}
	f, err := NewFetcher(FetcherConfig{Resolver: resolver, Dialer: dialer, Attempts: 3, NewBackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(t.Context(), entry("https://files.test/f"), memStore(t))
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("Fetch = %v, want refused at 127.0.0.1", err)
	}
	if diff := cmp.Diff([]string{"203.0.113.7:443"}, dialer.Calls()); diff != "" {
		t.Errorf("dialled (-want +got):\n%s", diff)
	}
}

// failingPutter is a store that fails.
type failingPutter struct{}

var errStoreDown = errors.New("store down")

func (failingPutter) Put(ctx context.Context, r io.Reader, _ PutOptions) (Object, error) {
	io.CopyN(io.Discard, r, 10)
	return Object{}, errStoreDown
}

// TestFetchStoreFails: the store failing is not the file's fault: no
// reason to record, no retry, the store's error kept.
func TestFetchStoreFails(t *testing.T) {
	t.Parallel()
	srv := newFileServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write(fileBytes) })
	f := newFetcher(t, FetcherConfig{})
	_, err := f.Fetch(t.Context(), entry(srv.URL+"/f"), failingPutter{})
	if !errors.Is(err, errStoreDown) || Reason(err) != "" {
		t.Errorf("Fetch = %v (reason %q), want the store's error and no reason", err, Reason(err))
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	// A cancelled run is not the file's either.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.Fetch(ctx, entry(srv.URL+"/f"), memStore(t)); !errors.Is(err, context.Canceled) || Reason(err) != "" {
		t.Errorf("Fetch with a cancelled context = %v", err)
	}
}

func TestReason(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		nil:                                     "",
		&GoneError{}:                            "expired",
		fmt.Errorf("x: %w", &GoneError{}):       "expired",
		&TooLargeError{}:                        "too_large",
		&RefusedError{}:                         "refused",
		&FailedError{Err: filestest.ErrNoRoute}: "failed",
		errStoreDown:                            "",
		context.Canceled:                        "",
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestNewFetcherSettings(t *testing.T) {
	t.Parallel()
	for _, cfg := range []FetcherConfig{{APIOrigin: "api.example.com"}, {APIOrigin: "ftp://x"}, {MaxBytes: -1}, {Timeout: -time.Second}} {
		if _, err := NewFetcher(cfg); err == nil {
			t.Errorf("NewFetcher(%+v) accepted", cfg)
		}
	}
}

// TestFetchIntoStores: files fetched from loopback land in each kind of
// store under the digest of the bytes served, once per content.
func TestFetchIntoStores(t *testing.T) {
	t.Parallel()
	other := bytes.Repeat([]byte("another file "), 1000)
	srv := newFileServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/other" {
			w.Write(other)
			return
		}
		w.Write(fileBytes)
	})
	f := newFetcher(t, FetcherConfig{})
	for kind, s := range openStores(t, nil) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var existed []bool
			for _, path := range []string{"/a", "/other", "/same-as-a"} {
				res, err := f.Fetch(t.Context(), entry(srv.URL+path), s)
				if err != nil {
					t.Fatal(err)
				}
				existed = append(existed, res.Existed)
			}
			if diff := cmp.Diff([]bool{false, false, true}, existed); diff != "" {
				t.Errorf("Existed (-want +got):\n%s", diff)
			}
			for _, want := range [][]byte{fileBytes, other} {
				r, err := s.Open(t.Context(), digest(want))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(r)
				r.Close()
				if err != nil || digest(got) != digest(want) {
					t.Errorf("stored bytes differ from those served (%v)", err)
				}
			}
			if got := keys(t, s); len(got) != 2 {
				t.Errorf("objects: %v, want the two files only", got)
			}
		})
	}
}
