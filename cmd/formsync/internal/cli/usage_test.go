package cli

import (
	"strings"
	"testing"
	"time"
)

// TestCommandHelpSaysWhatItDoes: `formsync sync -h` and `run -h` say what
// the command does and that it takes no flags, not only "Usage of sync:".
func TestCommandHelpSaysWhatItDoes(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"sync", "One pass over every form"},
		{"run", "Long-running: sync on FORMSYNC_SCHEDULE"},
		{"backfill", "-checkpoint-rows"},
	} {
		code, _, errOut := run(t, tc.cmd, "-h")
		if code != exitOK || strings.Contains(errOut, "Usage of") || !strings.Contains(errOut, "Usage: formsync "+tc.cmd+" [flags]") ||
			!strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "formsync help") {
			t.Errorf("%s -h: exit %d:\n%s", tc.cmd, code, errOut)
		}
	}
}

// TestLagReadsAsAPersonSaysIt: the status table's LAG is "329d 3h", not
// "7899h11m2s".
func TestLagReadsAsAPersonSaysIt(t *testing.T) {
	t.Parallel()
	s := (7899*time.Hour + 11*time.Minute + 2*time.Second).Seconds()
	if got := fmtLag(&s); got != "329d 3h" {
		t.Errorf("fmtLag = %q, want 329d 3h", got)
	}
}
