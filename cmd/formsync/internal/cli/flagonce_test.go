package cli

import (
	"strings"
	"testing"
)

// TestFormGivenTwiceIsRefused: `backfill --form a --form b` read b alone,
// silently; a second --form is refused (exit 2) by every command taking one.
func TestFormGivenTwiceIsRefused(t *testing.T) {
	clearEnv(t)
	for _, cmd := range []string{"backfill", "reconcile", "forget", "remove"} {
		code, _, errOut := run(t, cmd, "--form", "a", "--form", "b")
		if code != exitUsage || !strings.Contains(errOut, `given twice ("a" and "b")`) {
			t.Errorf("%s --form a --form b: exit %d, want %d:\n%s", cmd, code, exitUsage, errOut)
		}
	}
}
