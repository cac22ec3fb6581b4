package cli

import (
	"strings"
	"testing"
)

// TestInMemorySQLiteIsAConfigurationError: FORMSYNC_SQLITE_PATH=:memory:
// is refused as every other configuration problem is: exit 2, listed
// with the others, before anything is opened.
func TestInMemorySQLiteIsAConfigurationError(t *testing.T) {
	for _, path := range []string{":memory:", "file:f.db?mode=memory"} {
		clearEnv(t)
		t.Setenv("FORMSYNC_SQLITE_PATH", path)
		t.Setenv("FORMSYNC_API_TOKEN", "t")
		t.Setenv("FORMSYNC_FORMS", "a")
		for _, cmd := range []string{"sync", "status"} {
			code, _, errOut := run(t, cmd)
			if code != exitUsage || !strings.Contains(errOut, "FORMSYNC_SQLITE_PATH") || !strings.Contains(errOut, "the configuration has problems") {
				t.Errorf("%s with FORMSYNC_SQLITE_PATH=%s: exit %d, want %d:\n%s", cmd, path, code, exitUsage, errOut)
			}
		}
	}
}
