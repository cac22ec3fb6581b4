package trigger

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/time/rate"
)

// Outcome is what the handler did with a request; Config.Observe gets one
// per request, for metrics.
type Outcome string

const (
	// Accepted: the form is now pending.
	Accepted Outcome = "accepted"
	// Coalesced: the form was pending already; nothing more to do.
	Coalesced Outcome = "coalesced"
	// BadSecret: the path's secret was wrong or missing (404).
	BadSecret Outcome = "bad_secret"
	// UnknownForm: the secret was right, the form is not configured (404).
	UnknownForm Outcome = "unknown_form"
	// TooLarge: the body was larger than Config.MaxBody (413).
	TooLarge Outcome = "too_large"
	// Limited: more requests than Config.Rate allows (429).
	Limited Outcome = "rate_limited"
	// BadRequest: not a POST to /hooks/<secret>/<form id> (404 or 405).
	BadRequest Outcome = "bad_request"
)

// Outcomes lists every Outcome, for metrics that start each at zero.
var Outcomes = []Outcome{Accepted, Coalesced, BadSecret, UnknownForm, TooLarge, Limited, BadRequest}

// Prefix is the path under which the handler serves.
const Prefix = "/hooks/"

// MinSecretLen is the shortest secret NewHandler accepts, in bytes.
const MinSecretLen = 16

// Config configures a Handler.
type Config struct {
	// Secret is the path segment that proves a request comes from
	// whoever was given the webhook URL. Required, at least MinSecretLen
	// bytes; it never appears in a log line or a metric.
	Secret string
	// Forms are the form ids a trigger may name, as configured
	// (account:form with several accounts).
	Forms []string
	// Queue receives the triggered forms. Required.
	Queue *Queue
	// MaxBody is the largest body read, in bytes; a larger one is refused
	// with 413. The service's webhooks carry the submitted values, files
	// as links. Defaults to 1 MiB.
	MaxBody int64
	// Rate and Burst bound the requests the handler takes, of any outcome:
	// beyond them it answers 429 without looking at the request. Default
	// to 50 a second with bursts of 200.
	Rate  rate.Limit
	Burst int
	// Observe, when set, is told the outcome of every request.
	Observe func(Outcome)
	// Log receives one line per request that is not accepted and a debug
	// line per accepted one, never with the path. Defaults to
	// slog.Default().
	Log *slog.Logger
}

// Handler is the webhook endpoint. See the package documentation.
type Handler struct {
	secret  [sha256.Size]byte
	forms   map[string]bool
	queue   *Queue
	maxBody int64
	limit   *rate.Limiter
	observe func(Outcome)
	log     *slog.Logger
}

// CheckSecret says what is wrong with secret as the path segment of the
// endpoint: too short to resist guessing, or holding a character that a
// URL path cannot carry as is.
func CheckSecret(secret string) error {
	if len(secret) < MinSecretLen {
		return errors.New("the secret must be at least " + strconv.Itoa(MinSecretLen) + " bytes ('openssl rand -hex 24' makes one)")
	}
	for _, r := range secret {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return errors.New("the secret must hold only letters, digits and - . _ ~: it is a path segment of the webhook URL ('openssl rand -hex 24' makes one)")
		}
	}
	return nil
}

// NewHandler checks cfg and returns the endpoint, to be served at Prefix.
func NewHandler(cfg Config) (*Handler, error) {
	if err := CheckSecret(cfg.Secret); err != nil {
		return nil, fmt.Errorf("trigger: %w", err)
	}
	if cfg.Queue == nil {
		return nil, errors.New("trigger: no queue")
	}
	h := &Handler{
		secret:  sha256.Sum256([]byte(cfg.Secret)),
		forms:   make(map[string]bool, len(cfg.Forms)),
		queue:   cfg.Queue,
		maxBody: cfg.MaxBody,
		observe: cfg.Observe,
		log:     cfg.Log,
	}
	for _, f := range cfg.Forms {
		h.forms[f] = true
	}
	if h.maxBody <= 0 {
		h.maxBody = 1 << 20
	}
	r, b := cfg.Rate, cfg.Burst
	if r == 0 {
		r = 50
	}
	if b == 0 {
		b = 200
	}
	h.limit = rate.NewLimiter(r, b)
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.observe == nil {
		h.observe = func(Outcome) {}
	}
	return h, nil
}

// ServeHTTP answers one trigger: 202 once the form is pending, or the
// status that says what was wrong.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outcome, status := h.serve(w, r)
	h.observe(outcome)
	switch outcome {
	case Accepted, Coalesced:
		h.log.Debug("webhook trigger", "outcome", string(outcome))
	default:
		// The path holds the secret, and maybe a form id a stranger made
		// up: neither is logged.
		h.log.Warn("webhook trigger refused", "outcome", string(outcome), "status", status, "remote", r.RemoteAddr)
	}
	if status == http.StatusAccepted {
		w.WriteHeader(status)
		io.WriteString(w, "accepted: the form will be synced shortly\n")
		return
	}
	http.Error(w, http.StatusText(status), status)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) (Outcome, int) {
	if !h.limit.Allow() {
		w.Header().Set("Retry-After", "1")
		return Limited, http.StatusTooManyRequests
	}
	secret, form, ok := split(r.URL.EscapedPath())
	if !ok {
		return BadRequest, http.StatusNotFound
	}
	// Compared as digests, in constant time: neither the secret's bytes
	// nor its length leak through the time an answer takes.
	given := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(given[:], h.secret[:]) != 1 {
		return BadSecret, http.StatusNotFound
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return BadRequest, http.StatusMethodNotAllowed
	}
	if !h.forms[form] {
		return UnknownForm, http.StatusNotFound
	}
	// The body is read to its end, so that the connection can be reused,
	// and dropped: nothing in it is trusted.
	if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, h.maxBody)); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return TooLarge, http.StatusRequestEntityTooLarge
		}
		return BadRequest, http.StatusBadRequest
	}
	if !h.queue.Add(form) {
		return Coalesced, http.StatusAccepted
	}
	return Accepted, http.StatusAccepted
}

// split reads /hooks/<secret>/<form id> from an escaped path; the form id
// is unescaped (a form id may hold any character).
func split(path string) (secret, form string, ok bool) {
	rest, ok := strings.CutPrefix(path, Prefix)
	if !ok {
		return "", "", false
	}
	secret, escaped, ok := strings.Cut(rest, "/")
	if !ok || escaped == "" || strings.Contains(escaped, "/") {
		return "", "", false
	}
	form, err := url.PathUnescape(escaped)
	if err != nil {
		return "", "", false
	}
	return secret, form, true
}
