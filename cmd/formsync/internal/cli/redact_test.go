package cli

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/worker/formsapi"
)

// leakToken has characters that JSON, URL and base64 encodings treat
// apart ('/', '+', '_').
const leakToken = "fs_live_9aK3x/Qz+7Lm2Pq8wR"

// tokenEchoes are the ways a server or proxy that echoes request headers
// may quote the token, by name; each is served by a form of its own.
func tokenEchoes() map[string]string {
	entities := func(s string) string {
		var b strings.Builder
		for i, r := range s {
			if i%2 == 0 {
				fmt.Fprintf(&b, "&#%d;", r)
			} else {
				fmt.Fprintf(&b, "&#x%x;", r)
			}
		}
		return b.String()
	}
	jsonEscaped := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	return map[string]string{
		"raw":          leakToken,
		"upper":        strings.ToUpper(leakToken),
		"base64":       base64.StdEncoding.EncodeToString([]byte(leakToken)),
		"base64bearer": base64.StdEncoding.EncodeToString([]byte("Bearer " + leakToken)),
		"base64basic":  base64.StdEncoding.EncodeToString([]byte("user:" + leakToken)),
		"base64url":    base64.RawURLEncoding.EncodeToString([]byte("Bearer " + leakToken)),
		"hex":          hex.EncodeToString([]byte(leakToken)),
		"hexupper":     strings.ToUpper(hex.EncodeToString([]byte("Bearer " + leakToken))),
		"url":          url.QueryEscape(leakToken),
		"url2":         url.QueryEscape(url.QueryEscape(leakToken)),
		"html":         entities(leakToken),
		"json":         jsonEscaped(leakToken),
	}
}

// leaked returns what of the token, in any of the echoes, text holds.
func leaked(text string) []string {
	var out []string
	if strings.Contains(strings.ToLower(text), strings.ToLower(leakToken)) {
		out = append(out, "raw token")
	}
	for name, echo := range tokenEchoes() {
		// The middle of an echo: what redaction must have removed, wherever
		// the encoding's edges were cut.
		mid := echo[len(echo)/2-6 : len(echo)/2+6]
		if strings.Contains(text, mid) {
			out = append(out, name)
		}
	}
	return out
}

// jsonStrings returns every string inside a JSON document, decoded.
func jsonStrings(body []byte) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// TestTokenEchoedByTheAPIStaysInside: the API's error messages quote the
// token in every encoding a server or proxy may echo it in; it appears in
// no log line, no state column, no status output, and no request to
// BigQuery (whose job history keeps query parameters).
func TestTokenEchoedByTheAPIStaysInside(t *testing.T) {
	echoes := tokenEchoes()
	var forms []string
	for name := range echoes {
		forms = append(forms, "leak-"+name)
	}
	for _, sinkName := range []string{"sqlite", "bigquery"} {
		t.Run(sinkName, func(t *testing.T) {
			sim := apisim.New(apisim.Options{Seed: 23, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 5, Token: leakToken})
			db := syncEnv(t, sim, append([]string{"a"}, forms...)...)
			t.Setenv("FORMSYNC_API_TOKEN", leakToken)
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for name, echo := range echoes {
					if strings.HasPrefix(r.URL.Path, "/api/forms/leak-"+name+"/") {
						msg, _ := json.Marshal("HTTP API access is disabled; request had Authorization " + echo)
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusBadRequest)
						fmt.Fprintf(w, `{"message":%s}`, msg)
						return
					}
				}
				sim.ServeHTTP(w, r)
			}))
			t.Cleanup(api.Close)
			t.Setenv("FORMSYNC_API_BASE_URL", api.URL)
			var front *bqfake.Front
			var fake *bqfake.Server
			if sinkName == "bigquery" {
				fake = bigQueryEnv(t)
				front = bqfake.StartFront(t, fake, bqfake.Pass)
				t.Setenv("FORMSYNC_BQ_ENDPOINT", front.URL())
			}

			code, out, errOut := run(t, "sync")
			if code != exitFailed {
				t.Fatalf("sync: exit %d, want %d (the leak forms fail):\n%s", code, exitFailed, errOut)
			}
			check := func(where, text string) {
				t.Helper()
				if l := leaked(text); len(l) > 0 {
					t.Errorf("%s holds the token (%v):\n%s", where, l, text)
				}
			}
			check("sync's log", errOut+out)
			for _, args := range [][]string{{"status"}, {"status", "--json"}} {
				code, out, errOut := run(t, args...)
				if code != exitOK && code != exitFailed {
					t.Fatalf("%v: exit %d:\n%s", args, code, errOut)
				}
				check(strings.Join(args, " "), out+errOut)
			}

			var states map[string]state.Form
			if sinkName == "sqlite" {
				s, err := sqlite.Open(t.Context(), db)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if states, err = s.ReadState(t.Context(), nil); err != nil {
					t.Fatal(err)
				}
			} else {
				s, err := bigquery.OpenReadOnly(t.Context(), bigquery.Config{Project: "p", Endpoint: fake.URL()})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if states, err = s.ReadState(t.Context(), nil); err != nil {
					t.Fatal(err)
				}
				for i, r := range front.Requests() {
					check(fmt.Sprintf("BigQuery request %d (%s %s)", i, r.Method, r.URL), r.URL+"\n"+string(r.Body)+"\n"+strings.Join(jsonStrings(r.Body), "\n"))
				}
			}
			for _, f := range forms {
				st, ok := states[f]
				if !ok || !strings.Contains(st.LastError, "[REDACTED]") {
					t.Errorf("form %s: last_error %q, want the server's message with the token redacted (the test tests nothing otherwise)", f, st.LastError)
				}
				all, _ := json.Marshal(st)
				check("state of form "+f, string(all))
			}
		})
	}
}

// TestLogLinesAreRedacted: whatever a log line carries (message, string,
// error, list or grouped attribute), the token in any echo is not
// written.
func TestLogLinesAreRedacted(t *testing.T) {
	for name, echo := range tokenEchoes() {
		var b strings.Builder
		log := slog.New(&redactingHandler{inner: slog.NewJSONHandler(&b, nil), r: formsapi.NewRedactor(leakToken)})
		log.With("with", echo).Warn("message "+echo, "s", echo, "err", errors.New(echo), "list", []string{echo}, slog.Group("g", "s", echo))
		if l := leaked(b.String()); len(l) > 0 || strings.Count(b.String(), "[REDACTED]") != 6 {
			t.Errorf("%s: %v leaked or not every attribute redacted:\n%s", name, l, b.String())
		}
	}
}
