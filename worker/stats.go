package worker

import (
	"errors"
	"net/http"
	"sync"

	"github.com/formsync/formsync/worker/formsapi"
)

// RequestCounts counts one form's API requests.
type RequestCounts struct {
	Requests    int // attempts, retries included
	RateLimited int // answered 429
}

// RequestStats counts API requests per form. Its Observe method is meant to
// be the API client's observer, so that retries the client makes on its own
// are counted too. Safe for concurrent use.
type RequestStats struct {
	mu    sync.Mutex
	forms map[string]RequestCounts
	next  func(formsapi.Event)
}

// NewRequestStats returns empty counts. Every event observed is also passed
// to each of also (metrics, for instance).
func NewRequestStats(also ...func(formsapi.Event)) *RequestStats {
	s := &RequestStats{forms: map[string]RequestCounts{}}
	if len(also) > 0 {
		s.next = func(ev formsapi.Event) {
			for _, f := range also {
				f(ev)
			}
		}
	}
	return s
}

// Observe counts one request attempt.
func (s *RequestStats) Observe(ev formsapi.Event) {
	s.mu.Lock()
	c := s.forms[ev.FormID]
	c.Requests++
	if ev.Status == http.StatusTooManyRequests || errors.Is(ev.Err, formsapi.ErrRateLimited) {
		c.RateLimited++
	}
	s.forms[ev.FormID] = c
	s.mu.Unlock()
	if s.next != nil {
		s.next(ev)
	}
}

// Form returns the counts of one form so far.
func (s *RequestStats) Form(id string) RequestCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forms[id]
}
