//go:build unix

package cli

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTokenFIFODoesNotBlock: a token file that is a FIFO with no writer
// is refused (in the token directory) or reads as empty (as
// FORMSYNC_API_TOKEN_FILE), rather than blocking the start for ever.
func TestTokenFIFODoesNotBlock(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "acme"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Setenv("FORMSYNC_API_BASE_URL", "https://api.example.com")
	t.Setenv("FORMSYNC_FORMS", "acme:f1")
	check := func(want string) {
		t.Helper()
		done := make(chan struct{})
		var code int
		var errOut string
		go func() {
			defer close(done)
			code, _, errOut = run(t, "env", "-check", "sync")
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("env -check blocked on a FIFO")
		}
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, want %d and %q:\n%s", code, exitUsage, want, errOut)
		}
	}
	t.Setenv("FORMSYNC_API_TOKEN_DIR", dir)
	check("token file acme is not a regular file")

	t.Setenv("FORMSYNC_API_TOKEN_DIR", "")
	t.Setenv("FORMSYNC_FORMS", "f1")
	t.Setenv("FORMSYNC_API_TOKEN_FILE", filepath.Join(dir, "acme"))
	check("the file is empty")
}
