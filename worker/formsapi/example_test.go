package formsapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/formsync/formsync/worker/formsapi"
)

// A page in the newer response form, as the service answers
// GET /api/forms/contact/submissions?page=1&limit=100.
const contactPage = `{
  "data": [
    {"id": 2, "created_at": "2026-03-01T10:05:00.000Z", "is_spam": false,
     "fields": {"email": "b@example.com"}, "files": []},
    {"id": 1, "created_at": "2026-03-01T10:00:00.000Z", "is_spam": true,
     "fields": {"email": "a@example.com"}, "files": []}
  ],
  "meta": {"pagination": {"total": 2, "count": 2, "per_page": 100,
    "current_page": 1, "total_pages": 1,
    "links": {"previous": null, "next": null}}}
}`

// Page fetches one page of a form, decoded, whichever response form the
// server speaks. Plain http is accepted here only because the server is on
// loopback.
func ExampleClient_Page() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer my-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, contactPage)
	}))
	defer srv.Close()

	client, err := formsapi.New(formsapi.Config{BaseURL: srv.URL, Token: "my-token"})
	if err != nil {
		fmt.Println(err)
		return
	}
	page, resp, err := client.Page(context.Background(), "contact", 1, 100)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("page %d of %d, %d submissions in all, %d request(s)\n",
		page.CurrentPage, page.TotalPages, page.Total, resp.Requests)
	for _, s := range page.Submissions {
		fmt.Println(*s.ID, s.CreatedAt.Format("2006-01-02T15:04:05Z"), s.IsSpam, string(s.Fields))
	}
	// Output:
	// page 1 of 1, 2 submissions in all, 1 request(s)
	// 2 2026-03-01T10:05:00Z false {"email": "b@example.com"}
	// 1 2026-03-01T10:00:00Z true {"email": "a@example.com"}
}

// A form whose "HTTP API Access" setting is off answers 400. The error
// fails that form only; callers branch on it with errors.Is, never on the
// body, whose shape the API does not document.
func ExampleError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()

	client, err := formsapi.New(formsapi.Config{BaseURL: srv.URL, Token: "my-token"})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _, err = client.Page(context.Background(), "contact", 1, 100)
	var apiErr *formsapi.Error
	if errors.As(err, &apiErr) {
		fmt.Println("status:", apiErr.Status)
		fmt.Println("access disabled:", errors.Is(err, formsapi.ErrAccessDisabled))
		fmt.Println("whole run stops:", errors.Is(err, formsapi.ErrUnauthorized))
	}
	// Output:
	// status: 400
	// access disabled: true
	// whole run stops: false
}

// Retry-After comes as seconds or as an HTTP date; zero and garbage are
// told apart from a usable wait.
func ExampleParseRetryAfter() {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sun, 01 Mar 2026 10:00:30 GMT", "0", "soon"} {
		d, ok := formsapi.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "Sun, 01 Mar 2026 10:00:30 GMT": 30s true
	// "0": 0s true
	// "soon": 0s false
}

// Both response forms' timestamps, six digits and three, parse to UTC
// microseconds.
func ExampleParseCreatedAt() {
	for _, v := range []string{"2026-03-01T10:05:00.123456Z", "2026-03-01T11:05:00.123+01:00"} {
		t, err := formsapi.ParseCreatedAt(v)
		fmt.Println(t.Format(time.RFC3339Nano), err)
	}
	// Output:
	// 2026-03-01T10:05:00.123456Z <nil>
	// 2026-03-01T10:05:00.123Z <nil>
}
