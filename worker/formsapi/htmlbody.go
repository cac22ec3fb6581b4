package formsapi

import (
	"bytes"
	"html"
	"regexp"
	"strings"
)

// htmlTitle finds an HTML page's title; maxHTMLScan bounds how much of a
// body is searched for it.
var htmlTitle = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)

const maxHTMLScan = 16 << 10

// htmlSummary says what an HTML error body is in a few words: a proxy's,
// a load balancer's or a web server's page (a wrong base URL) rather than
// the API's. Its markup says nothing to the reader of a log line: the
// page's title does ("404 Not Found"). ok is false when body is not HTML.
func htmlSummary(body []byte) (summary string, ok bool) {
	head := bytes.TrimSpace(body[:min(len(body), maxHTMLScan)])
	lower := bytes.ToLower(head[:min(len(head), 512)])
	if !bytes.HasPrefix(lower, []byte("<")) || !(bytes.Contains(lower, []byte("<html")) || bytes.HasPrefix(lower, []byte("<!doctype html")) || bytes.Contains(lower, []byte("<head")) || bytes.Contains(lower, []byte("<title"))) {
		return "", false
	}
	if m := htmlTitle.FindSubmatch(head); m != nil {
		if title := strings.Join(strings.Fields(html.UnescapeString(string(m[1]))), " "); title != "" {
			return "an HTML page titled " + title, true
		}
	}
	return "an HTML page", true
}
