package cli

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestCommandHelpSaysWhatItDoes: `formsync sync -h` and `run -h` say what
// the command does and that it takes no flags (with no "[flags]" in their
// synopsis), not only "Usage of sync:"; flags are written --name, as the
// docs write them; only the commands that read FORMSYNC_* variables say
// they do.
func TestCommandHelpSaysWhatItDoes(t *testing.T) {
	for _, tc := range []struct{ cmd, synopsis, want string }{
		{"sync", "Usage: formsync sync\n", "One pass over every form"},
		{"run", "Usage: formsync run\n", "Long-running: sync on FORMSYNC_SCHEDULE"},
		{"backfill", "Usage: formsync backfill [flags]\n", "\n  --checkpoint-rows"},
		{"forget", "Usage: formsync forget [flags]\n", "\n  --form id"},
		{"status", "Usage: formsync status [flags]\n", "\n  --json"},
	} {
		code, _, errOut := run(t, tc.cmd, "-h")
		if code != exitOK || strings.Contains(errOut, "Usage of") || !strings.Contains(errOut, tc.synopsis) ||
			!strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "formsync help") ||
			strings.Contains(errOut, "flags]\n\nIt takes no flags") || strings.Contains(errOut, "\n  -") && !strings.Contains(errOut, "\n  --") {
			t.Errorf("%s -h: exit %d:\n%s", tc.cmd, code, errOut)
		}
	}
	for _, cmd := range []string{"demo", "simulate", "version"} {
		code, _, errOut := run(t, cmd, "-h")
		if code != exitOK || strings.Contains(errOut, "configured by FORMSYNC_*") || !strings.Contains(errOut, "reads no FORMSYNC_* environment variable") {
			t.Errorf("%s -h: exit %d:\n%s", cmd, code, errOut)
		}
	}
}

// TestUnknownCommandKeepsItsErrorInSight: the error and a one-line hint,
// not the whole help after it.
func TestUnknownCommandKeepsItsErrorInSight(t *testing.T) {
	code, out, errOut := run(t, "foo")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != exitUsage || out != "" || len(lines) != 2 || !strings.Contains(lines[0], `unknown command "foo"`) || !strings.Contains(lines[1], "formsync help") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
}

// TestVersionFromTheBuildStamp: without a version linked in, version says
// the module's version or the commit the binary was built from.
func TestVersionFromTheBuildStamp(t *testing.T) {
	t.Parallel()
	stamp := func(main string, kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/formsync/formsync", Version: main}}
		for i := 0; i+1 < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	clone := stamp("(devel)", "vcs", "git", "vcs.revision", "6b9586e1a2b3c4d5e6f708192a3b4c5d6e7f8091", "vcs.time", "2026-11-29T05:58:23Z", "vcs.modified", "false")
	for _, tc := range []struct {
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		{"v1.4.0", clone, "v1.4.0"},
		{"dev", clone, "dev, commit 6b9586e1a2b3 of 2026-11-29T05:58:23Z"},
		{"dev", stamp("(devel)", "vcs.revision", "6b9586e1a2b3", "vcs.modified", "true"), "dev, commit 6b9586e1a2b3, with uncommitted changes"},
		{"dev", stamp("v1.5.0"), "v1.5.0"},
		{"dev", stamp("(devel)", "-buildvcs", "false"), "dev (no commit stamped: built with -buildvcs=false or outside a clone)"},
		{"dev", nil, "dev"},
	} {
		if got := versionOf(tc.linked, tc.info, tc.info != nil); got != tc.want {
			t.Errorf("versionOf(%q, %v) = %q, want %q", tc.linked, tc.info, got, tc.want)
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
