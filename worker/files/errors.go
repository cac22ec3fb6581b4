package files

import (
	"errors"
	"fmt"
	"net/netip"
)

// GoneError is a file the service no longer has (404 or 410): it expired.
// Record it once; fetching it again will not bring it back.
type GoneError struct {
	URL        string
	StatusCode int
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("fetching %s: the file is gone (HTTP %d)", e.URL, e.StatusCode)
}

// TooLargeError is a file larger than the fetcher's cap.
type TooLargeError struct {
	URL   string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("fetching %s: the file is larger than the cap of %d bytes", e.URL, e.Limit)
}

// RefusedError is a file URL the fetcher will not fetch: its scheme, or
// an address its host (or a redirect's) resolves to. Nothing was sent to
// the address refused.
type RefusedError struct {
	URL string
	// Addr is the address refused; invalid when the URL itself was.
	Addr netip.Addr
	Why  string
}

func (e *RefusedError) Error() string {
	if e.Addr.IsValid() {
		return fmt.Sprintf("fetching %s: refused: %s (%s)", e.URL, e.Why, e.Addr)
	}
	return fmt.Sprintf("fetching %s: refused: %s", e.URL, e.Why)
}

// FailedError is a file that could not be fetched: the network, or an
// HTTP status other than success and gone, after the retries a transient
// failure gets.
type FailedError struct {
	URL string
	// StatusCode is the last HTTP status, 0 when none came.
	StatusCode int
	Attempts   int
	Err        error
}

func (e *FailedError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("fetching %s: HTTP %d after %d attempts", e.URL, e.StatusCode, e.Attempts)
	}
	return fmt.Sprintf("fetching %s: failed after %d attempts: %v", e.URL, e.Attempts, e.Err)
}

func (e *FailedError) Unwrap() error { return e.Err }

// The words Reason gives, which a table stores.
const (
	ReasonExpired  = "expired"
	ReasonTooLarge = "too_large"
	ReasonRefused  = "refused"
	ReasonFailed   = "failed"
)

// Reason is why a file is not stored, in the stable words a table
// keeps: "expired", "too_large", "refused" or "failed". It is "" for nil
// and for an error that is not the file's (the store failing, the run
// cancelled): such a file stays pending, to be fetched by a later run.
func Reason(err error) string {
	var (
		gone     *GoneError
		tooLarge *TooLargeError
		refused  *RefusedError
		failed   *FailedError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &gone):
		return ReasonExpired
	case errors.As(err, &tooLarge):
		return ReasonTooLarge
	case errors.As(err, &refused):
		return ReasonRefused
	case errors.As(err, &failed):
		return ReasonFailed
	}
	return ""
}
