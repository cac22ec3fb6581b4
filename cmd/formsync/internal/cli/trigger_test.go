package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
)

const hookSecret = "0123456789abcdef0123456789abcdef"

// startWithHooks runs `formsync run` on sim's forms with the webhook
// endpoint on a loopback port, and returns the endpoint's base URL.
func startWithHooks(t *testing.T, sim *apisim.Server, forms ...string) (db, base string, logs *syncBuffer, stop func() int) {
	t.Helper()
	db = syncEnv(t, sim, forms...)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FORMSYNC_SCHEDULE", "0 0 1 1 *") // the first tick is months away
	t.Setenv("FORMSYNC_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("FORMSYNC_TRIGGER_ADDR", "127.0.0.1:0")
	t.Setenv("FORMSYNC_TRIGGER_SECRET_FILE", secretFile)
	logs, stop = start(t, "run")
	addr := regexp.MustCompile(`"webhook_addr":"([^"]+)"`)
	waitFor(t, "formsync run did not say where its webhook endpoint listens", func() bool { return addr.MatchString(logs.String()) })
	base = "http://" + addr.FindStringSubmatch(logs.String())[1] + "/hooks/"
	waitFor(t, "no sync at start", func() bool { return strings.Contains(logs.String(), `"message":"sync finished"`) })
	return db, base, logs, stop
}

// post sends a webhook as the service does, and returns the status.
func post(t *testing.T, url, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// storedRows counts the rows of form in the SQLite file db.
func storedRows(t *testing.T, db, form string) int {
	t.Helper()
	s, err := sqlite.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.ReadRows(context.Background(), form)
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// TestRunSyncsAFormAWebhookNames: a webhook for a configured form syncs
// that form, soon, and only it; a wrong secret, an unconfigured form and a
// 10 MB body are refused with nothing synced; the secret is never logged.
func TestRunSyncsAFormAWebhookNames(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 11, Variant: apisim.Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 10})
	db, base, logs, stop := startWithHooks(t, sim, "a", "b")
	sim.Add("a", 3)
	sim.Add("b", 2)

	for _, c := range []struct {
		url, body string
		want      int
	}{
		{base + "wrong-secret-0123456789abcdef/a", "{}", 404},
		{base + hookSecret + "/nosuchform", "{}", 404},
		{base + hookSecret + "/a", strings.Repeat("x", 10<<20), 413},
	} {
		if got := post(t, c.url, c.body); got != c.want {
			t.Errorf("POST %s: %d, want %d", strings.Replace(c.url, hookSecret, "SECRET", 1), got, c.want)
		}
	}
	time.Sleep(300 * time.Millisecond) // longer than the queue's gathering
	if strings.Contains(logs.String(), "syncing forms a webhook named") || storedRows(t, db, "a") != 10 {
		t.Fatalf("a refused request synced something:\n%s", logs)
	}

	if got := post(t, base+hookSecret+"/a", `{"payload":{"name":"x"},"files":{}}`); got != http.StatusAccepted {
		t.Fatalf("POST for a: %d, want 202", got)
	}
	waitFor(t, "the triggered form was not synced", func() bool { return storedRows(t, db, "a") == 13 })
	if n := storedRows(t, db, "b"); n != 10 {
		t.Errorf("form b has %d rows: only a was named", n)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit %d:\n%s", code, logs)
	}
	if strings.Contains(logs.String(), hookSecret) {
		t.Errorf("the log holds the webhook secret:\n%s", logs)
	}
	for _, outcome := range []string{"bad_secret", "unknown_form", "too_large"} {
		if !strings.Contains(logs.String(), `"outcome":"`+outcome+`"`) {
			t.Errorf("no log line for the %s refusal", outcome)
		}
	}
}

// TestRunTriggersDuringSyncsLoseNothing: submissions arriving while their
// form's triggered sync reads and commits, each followed by its webhook,
// all end in the table: a trigger during a sync queues one more.
func TestRunTriggersDuringSyncsLoseNothing(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 12, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 5})
	db, base, logs, stop := startWithHooks(t, sim, "a")
	for i := range 30 {
		sim.Add("a", 1+i%3)
		if got := post(t, base+hookSecret+"/a", "{}"); got != http.StatusAccepted {
			t.Fatalf("POST %d: %d", i, got)
		}
		time.Sleep(time.Duration(i%4) * 15 * time.Millisecond)
	}
	want := sim.Len("a")
	waitFor(t, "rows that came with a webhook are missing", func() bool { return storedRows(t, db, "a") == want })
	if code := stop(); code != 0 {
		t.Errorf("exit %d:\n%s", code, logs)
	}
	if n := strings.Count(logs.String(), "syncing forms a webhook named"); n == 0 || n > 30 {
		t.Errorf("%d triggered syncs for 30 webhooks", n)
	}
}

// TestTriggerSecretProblemsListed: a secret file that is missing, too
// short or not a path segment is a configuration problem of run, listed
// with the rest (exit 2), and never printed.
func TestTriggerSecretProblemsListed(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 1, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 1})
	dir := t.TempDir()
	for name, content := range map[string]string{"short": "abc123", "slash": "0123456789abcdef/0123456789", "missing": ""} {
		t.Run(name, func(t *testing.T) {
			syncEnv(t, sim, "a")
			path := filepath.Join(dir, name)
			if content != "" {
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("FORMSYNC_TRIGGER_SECRET_FILE", path)
			t.Setenv("FORMSYNC_PAGE_SIZE", "0")
			code, out, errOut := run(t, "env", "-check", "run")
			if code != exitUsage || !strings.Contains(out+errOut, "FORMSYNC_TRIGGER_SECRET_FILE") || !strings.Contains(out+errOut, "FORMSYNC_PAGE_SIZE") {
				t.Errorf("env -check run: exit %d:\n%s%s", code, out, errOut)
			}
			if content != "" && strings.Contains(out+errOut, content) {
				t.Errorf("the secret is printed:\n%s%s", out, errOut)
			}
		})
	}
}
