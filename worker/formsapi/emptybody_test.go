package formsapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestEmptyBodySaysItIsEmpty: a 200 without a body is said to be empty,
// not a transfer cut short after 0 bytes.
func TestEmptyBodySaysItIsEmpty(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {})
	b := setup(t, srv.URL, func(*Config) {})
	_, _, err := b.client.Page(t.Context(), "f", 1, 0)
	record(err)
	if err == nil || !strings.Contains(err.Error(), "empty body") || strings.Contains(err.Error(), "truncated") {
		t.Errorf("error %v: want it said to be empty", err)
	}
}
