package cli

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
)

// TestSimulateListensOnLoopbackOnly: the simulator checks no real
// credentials, so it listens on loopback addresses and the name localhost
// (in any case) only.
func TestSimulateListensOnLoopbackOnly(t *testing.T) {
	clearEnv(t)
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "10.0.0.1:8080", "[::2]:8080", "example.com:8080", "localhost.example.com:8080", "127.0.0.1"} {
		if code, _, errOut := run(t, "simulate", "-addr", addr); code != exitUsage || !strings.Contains(errOut, "only listens on loopback") {
			t.Errorf("-addr %s: exit %d, want %d refusing it: %s", addr, code, exitUsage, errOut)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // stops as soon as it listens
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "LOCALHOST:0"} {
		var out syncBuffer
		if code := Main(ctx, []string{"simulate", "-addr", addr}, &out, &out); code != exitOK || !strings.Contains(out.String(), "API simulator: http://127.0.0.1:") {
			t.Errorf("-addr %s: exit %d: %s", addr, code, out.String())
		}
	}
}

// TestSimulateWaitsForRequestsInFlight: stopped while a response is half
// sent (a stalled body), simulate returns only once that request has
// ended, not as soon as it stops accepting new ones.
func TestSimulateWaitsForRequestsInFlight(t *testing.T) {
	clearEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"simulate", "-addr", "127.0.0.1:0", "-forms", "contact", "-stall", "1", "-stall-for", "1h"}, &out, &out)
	}()
	listening := regexp.MustCompile(`API simulator: http://(\S+)/api/forms/`)
	waitFor(t, "simulate does not say where it listens", func() bool { return listening.MatchString(out.String()) })
	addr := listening.FindStringSubmatch(out.String())[1]

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/api/forms/contact/submissions", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apisim.DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 1)); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("status %d, %v: want the first part of a stalled body", resp.StatusCode, err)
	}

	// The body stalls for an hour, so a simulate that waits for it cannot
	// return in this window: the wait can only miss a simulate that does
	// not wait, never fail one that does.
	cancel()
	select {
	case code := <-done:
		t.Fatalf("simulate returned (exit %d) while a request was in flight:\n%s", code, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	resp.Body.Close() // the client gives up, which ends the request
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after the last request ended, want %d:\n%s", code, exitOK, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("simulate did not return once the last request ended:\n%s", out.String())
	}
}

// TestSimulateSaysWhatItsSettingsMeanForASync: at start the simulator
// says its page size, the newest submission's date (near now by default)
// and how long a first sync takes at the client's default rate limit:
// 20,000 rows of the older form are 800 pages, 2m 40s at 5 requests/s.
func TestSimulateSaysWhatItsSettingsMeanForASync(t *testing.T) {
	clearEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // stops as soon as it listens
	var out syncBuffer
	if code := Main(ctx, []string{"simulate", "-addr", "127.0.0.1:0", "-forms", "big", "-submissions", "20000"}, &out, &out); code != exitOK {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"25 submissions a page whatever the limit asked (FORMSYNC_PAGE_SIZE)", "about 800 requests",
		"FORMSYNC_RATE_LIMIT=5 requests/s: about 2m 40s", "no rate limit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("simulate does not say %q:\n%s", want, out.String())
		}
	}
	newest := regexp.MustCompile(`the newest created at (\S+) `).FindStringSubmatch(out.String())
	if newest == nil {
		t.Fatalf("no newest date:\n%s", out.String())
	}
	if at, err := time.Parse(time.RFC3339, newest[1]); err != nil || time.Since(at) > time.Hour || time.Since(at) < 0 {
		t.Errorf("newest submission %s: want it near now (%v)", newest[1], err)
	}
}

// TestSimulateServesSeveralAccounts: -accounts acme,globex serves each
// account's forms with a token of its own, writes the token files and
// prints what to export; a sync with exactly those settings reads every
// form of both accounts. The temporary token directory goes with the
// simulator.
func TestSimulateServesSeveralAccounts(t *testing.T) {
	clearEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"simulate", "-addr", "127.0.0.1:0", "-accounts", "acme,globex", "-forms", "contact,signup", "-submissions", "30", "-variant", "newer"}, &out, &out)
	}()
	listening := regexp.MustCompile(`API simulator: http://(\S+)/api/forms/`)
	exports := regexp.MustCompile(`(?m)^  export (FORMSYNC_\w+)=(\S+)$`)
	waitFor(t, "simulate does not say what to export", func() bool { return len(exports.FindAllString(out.String(), -1)) == 2 })
	t.Setenv("FORMSYNC_API_BASE_URL", "http://"+listening.FindStringSubmatch(out.String())[1])
	var dir string
	for _, m := range exports.FindAllStringSubmatch(out.String(), -1) {
		t.Setenv(m[1], m[2])
		if m[1] == "FORMSYNC_API_TOKEN_DIR" {
			dir = m[2]
		}
	}
	for _, want := range []string{"acme: token file " + filepath.Join(dir, "acme") + ` (token "sim-token-acme")`,
		`globex: token file ` + filepath.Join(dir, "globex"), "acme:acme-contact,acme:acme-signup,globex:globex-contact,globex:globex-signup"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("simulate does not say %q:\n%s", want, out.String())
		}
	}
	t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "f.db"))
	t.Setenv("FORMSYNC_RATE_LIMIT", "1000")
	t.Setenv("FORMSYNC_TMP_DIR", t.TempDir())
	code, _, errOut := run(t, "sync")
	if code != exitOK || strings.Count(errOut, `"message":"form synced"`) != 4 || !strings.Contains(errOut, `"new":120`) {
		t.Fatalf("sync of both accounts: exit %d:\n%s", code, errOut)
	}
	// Each token file holds its account's token alone.
	if b, err := os.ReadFile(filepath.Join(dir, "globex")); err != nil || strings.TrimSpace(string(b)) != "sim-token-globex" {
		t.Errorf("globex's token file: %q, %v", b, err)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("simulate: exit %d:\n%s", code, out.String())
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary token directory %s is left behind (%v)", dir, err)
	}
	if code, _, errOut := run(t, "simulate", "-accounts", "acme,../x"); code != exitUsage || !strings.Contains(errOut, "not an account name") {
		t.Errorf("a bad account name: exit %d: %s", code, errOut)
	}
}
