package formsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinels for errors.Is. An *Error matches the sentinel of its Kind.
var (
	ErrAccessDisabled = errors.New("formsapi: HTTP API access disabled for the form")
	ErrUnauthorized   = errors.New("formsapi: API token rejected")
	ErrFormNotFound   = errors.New("formsapi: form not found")
	ErrRateLimited    = errors.New("formsapi: rate limited")
	ErrServer         = errors.New("formsapi: server error")
	ErrMalformed      = errors.New("formsapi: malformed response")
	ErrTransport      = errors.New("formsapi: transport error")
	// ErrUnexpectedStatus is matched by KindUnexpectedStatus errors.
	ErrUnexpectedStatus = errors.New("formsapi: unexpected HTTP status")
	// ErrForbidden: 403, the token is valid but may not read this form
	// (another account's form, or a plan without API access).
	ErrForbidden = errors.New("formsapi: access to the form forbidden")
	// ErrGone: 410, the form or this version of the API was removed.
	ErrGone = errors.New("formsapi: form or API version gone")
	// ErrPaging: a page's pagination does not add up (current_page is not
	// the page asked for, or total_pages does not follow from total and
	// per_page). Retrying does not help: the server ignores paging.
	ErrPaging = errors.New("formsapi: pagination does not add up")
	// ErrInsecureURL: the base URL would send the token in clear.
	ErrInsecureURL = errors.New("formsapi: insecure base URL")
)

// Kind classifies an Error for callers that branch on it.
type Kind int

const (
	KindAccessDisabled   Kind = iota + 1 // 400: "HTTP API Access" off for the form
	KindUnauthorized                     // 401: token invalid
	KindFormNotFound                     // 404: form unknown or deleted
	KindRateLimited                      // 429
	KindServer                           // 5xx
	KindMalformed                        // body not a valid page, truncated or too large
	KindTransport                        // no complete response: timeout, connection error
	KindUnexpectedStatus                 // any other status
	KindPaging                           // 200, but the pagination does not add up
	KindForbidden                        // 403: token valid, form or plan not accessible
	KindGone                             // 410: form or API version removed
)

func (k Kind) String() string {
	switch k {
	case KindAccessDisabled:
		return "access disabled"
	case KindUnauthorized:
		return "unauthorized"
	case KindFormNotFound:
		return "form not found"
	case KindRateLimited:
		return "rate limited"
	case KindServer:
		return "server error"
	case KindMalformed:
		return "malformed response"
	case KindTransport:
		return "transport error"
	case KindUnexpectedStatus:
		return "unexpected status"
	case KindPaging:
		return "paging inconsistent"
	case KindForbidden:
		return "forbidden"
	case KindGone:
		return "gone"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

func (k Kind) sentinel() error {
	switch k {
	case KindAccessDisabled:
		return ErrAccessDisabled
	case KindUnauthorized:
		return ErrUnauthorized
	case KindFormNotFound:
		return ErrFormNotFound
	case KindRateLimited:
		return ErrRateLimited
	case KindServer:
		return ErrServer
	case KindMalformed:
		return ErrMalformed
	case KindTransport:
		return ErrTransport
	case KindUnexpectedStatus:
		return ErrUnexpectedStatus
	case KindPaging:
		return ErrPaging
	case KindForbidden:
		return ErrForbidden
	case KindGone:
		return ErrGone
	}
	return nil
}

// retryable reports whether another attempt may succeed.
func (k Kind) retryable() bool {
	switch k {
	case KindRateLimited, KindServer, KindTransport, KindMalformed:
		return true
	}
	return false
}

// Error is the failure of one page of one form. Its message names the form
// and page and says what the user can do about it.
type Error struct {
	FormID string
	Page   int // 0 when unknown (a body decoded without the page asked for)
	Status int // HTTP status; 0 when no response arrived
	Kind   Kind
	// RetryAfter is the server's parsed Retry-After, 0 if none.
	RetryAfter time.Duration
	Err        error
	// Body is a sanitised excerpt (at most maxExcerpt bytes) of an error
	// response body, or of its "message" member when it is a JSON object
	// with one, with the token redacted in any encoding. Its shape is
	// undocumented, so it is shown to people, never branched on.
	Body string
	// Attempts is how many attempts were made before giving up.
	Attempts int
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "form %q", e.FormID)
	if e.Page > 0 {
		fmt.Fprintf(&b, " page %d", e.Page)
	}
	b.WriteString(": ")
	switch e.Kind {
	case KindAccessDisabled:
		b.WriteString(`HTTP API access is disabled for this form (HTTP 400): enable "HTTP API Access" in the form's Settings tab in the dashboard`)
	case KindUnauthorized:
		b.WriteString("the API token was rejected (HTTP 401): it is invalid or revoked, or the Bearer prefix is missing; check FORMSYNC_API_TOKEN, the file FORMSYNC_API_TOKEN_FILE names, or the account's file in FORMSYNC_API_TOKEN_DIR")
	case KindFormNotFound:
		b.WriteString("form not found (HTTP 404): it does not exist or was deleted; check the form id (FORMSYNC_FORMS or --form), or FORMSYNC_API_BASE_URL if every form answers 404")
	case KindRateLimited:
		b.WriteString("rate limited by the API (HTTP 429)")
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, ", Retry-After %s", e.RetryAfter)
		}
		b.WriteString("; lower the client rate limit, sync fewer forms per run or run less often")
	case KindServer:
		fmt.Fprintf(&b, "server error (HTTP %d); usually transient, the next run retries", e.Status)
	case KindMalformed:
		b.WriteString("malformed response body; if it persists, check that the base URL points at the Form Submissions API")
	case KindTransport:
		b.WriteString("no complete response from the API; check network connectivity and the base URL")
	case KindUnexpectedStatus:
		fmt.Fprintf(&b, "unexpected HTTP status %d; check the base URL", e.Status)
	case KindForbidden:
		b.WriteString("access forbidden (HTTP 403): the token is valid but may not read this form; check that the form belongs to the token's account and that its plan includes API access")
	case KindGone:
		b.WriteString("gone (HTTP 410): the form was removed, or the service retired this version of the API; check the form id (FORMSYNC_FORMS or --form) and the service's API changelog")
	case KindPaging:
		b.WriteString("the page's pagination does not add up, so its pages cannot be trusted to cover the form; check that the base URL points at the Form Submissions API and that no cache or proxy in between ignores the page parameter")
	default:
		b.WriteString(e.Kind.String())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (gave up after %d attempts)", e.Attempts)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, "; server said %q", e.Body)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRateLimited) and friends work.
func (e *Error) Is(target error) bool {
	s := e.Kind.sentinel()
	return s != nil && target == s
}

// maxExcerpt bounds the part of an error body quoted in an Error.
const maxExcerpt = 200

// errorText is what an Error quotes of an error body: the message member
// when the body is a JSON object carrying one (Laravel's {"message": "..."}:
// the server's own words, without the JSON around them), else the start of
// the body. Either way it is made printable, short and token-free.
func errorText(body []byte, tok *tokenMatcher) string {
	var lv struct {
		Message *string `json:"message"`
	}
	if json.Unmarshal(body, &lv) == nil && lv.Message != nil && strings.TrimSpace(*lv.Message) != "" {
		// Redacted before decoding too: decoding undoes \u escapes, and the
		// raw form is what a partial match would hide in.
		return excerpt([]byte(*lv.Message), tok)
	}
	if page, ok := htmlSummary(body); ok {
		return excerpt([]byte(page), tok)
	}
	return excerpt(body, tok)
}

// excerpt turns the start of an untrusted body into a short, printable,
// token-free string. The token is removed before cutting, so a cut can
// never leave a prefix of it behind.
func excerpt(body []byte, tok *tokenMatcher) string {
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	s = tok.redact(s)
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	// Again: dropping unprintable runes can join a split token.
	s = tok.redact(s)
	if len(s) > maxExcerpt {
		cut := maxExcerpt
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
