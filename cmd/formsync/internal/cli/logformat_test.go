package cli

import (
	"io"
	"strings"
	"testing"
)

// TestLogFormatAuto: by default (auto) a person at a terminal reads text
// lines and a Job's log gets JSON; json and text force either.
func TestLogFormatAuto(t *testing.T) {
	clearEnv(t)
	cfg, err := LoadConfig()
	if err == nil && cfg.LogFormat != "auto" {
		t.Errorf("FORMSYNC_LOG_FORMAT defaults to %q, want auto", cfg.LogFormat)
	}
	for _, tc := range []struct {
		format string
		tty    bool
		json   bool
	}{
		{"auto", true, false},
		{"auto", false, true},
		{"json", true, true},
		{"text", false, false},
	} {
		var out strings.Builder
		p := newProgressPrinter(&env{})
		p.tty = &out
		var w io.Writer = &out
		if tc.tty {
			w = lineClearer{p}
		}
		newLogger(w, Config{LogFormat: tc.format}).Info("hello", "form", "f")
		if got := strings.HasPrefix(out.String(), "{"); got != tc.json {
			t.Errorf("FORMSYNC_LOG_FORMAT=%s, terminal %v: %q, want JSON %v", tc.format, tc.tty, out.String(), tc.json)
		}
	}
}
