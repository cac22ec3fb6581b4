package formsapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestHTMLErrorBodyIsSummarised: a 404 answered with a web server's HTML
// page is quoted by its title, not by its markup.
func TestHTMLErrorBodyIsSummarised(t *testing.T) {
	t.Parallel()
	page := "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<style>body{font-family:sans-serif;margin:0 auto;max-width:40em}</style>\n<title>404 &mdash; Page Not Found</title>\n</head>\n<body>" +
		strings.Repeat("<p>Sorry, nothing here.</p>\n", 200) + "</body></html>"
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(page))
	})
	b := setup(t, srv.URL, func(*Config) {})
	_, _, err := b.client.Page(t.Context(), "f", 1, 0)
	record(err)
	if err == nil || !strings.Contains(err.Error(), `server said "an HTML page titled 404 — Page Not Found"`) || strings.Contains(err.Error(), "<") {
		t.Errorf("error %q: want the page's title and no markup", err)
	}
	for body, want := range map[string]string{
		"<html><body><h1>Bad Gateway</h1></body></html>": "an HTML page",
		`{"message":"Form not found."}`:                  "Form not found.",
		"Not Found":                                      "Not Found",
	} {
		if got := errorText([]byte(body), newTokenMatcher(testToken)); got != want {
			t.Errorf("errorText(%q) = %q, want %q", body, got, want)
		}
	}
}
