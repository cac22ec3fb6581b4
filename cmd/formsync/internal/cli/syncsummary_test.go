package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/formsync/formsync/internal/apisim"
)

// terminalBuffer is a buffer that says it is a terminal.
type terminalBuffer struct{ bytes.Buffer }

func (*terminalBuffer) Terminal() bool { return true }

// TestSyncEndsWithASummaryOnATerminal: run by a person, sync ends with
// plain sentences: the forms, the rows new and updated, where they went,
// the form that failed with its error and what to do. Piped (a Job's
// log), it prints none: the log says it all.
func TestSyncEndsWithASummaryOnATerminal(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 1, Variant: apisim.Newer, Forms: []string{"a", "b", "gone"}, SubmissionsPerForm: 30})
	sim.SetFormStatus("gone", 404)
	db := syncEnv(t, sim, "a", "b", "gone")
	var out terminalBuffer
	var errOut bytes.Buffer
	if code := Main(t.Context(), []string{"sync"}, &out, &errOut); code != exitFailed {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, errOut.String())
	}
	for _, want := range []string{"Synced 2 of 3 forms into SQLite file " + db + ": 60 rows new, 0 updated, in ",
		"1 form failed (their watermarks stay", "  gone: ", "FORMSYNC_FORMS", "then run 'formsync sync' again"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	t.Setenv("FORMSYNC_FORMS", "a,b")
	out.Reset()
	if code := Main(t.Context(), []string{"sync"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut.String())
	}
	if want := "Synced 2 of 2 forms into SQLite file " + db + ": 0 rows new, 0 updated"; !strings.Contains(out.String(), want) || strings.Contains(out.String(), "failed") {
		t.Errorf("summary of a good sync, want %q:\n%s", want, out.String())
	}
	if code, piped, _ := run(t, "sync"); code != exitOK || piped != "" {
		t.Errorf("piped: exit %d, stdout %q: want no summary", code, piped)
	}
}

// TestSummaryWrapsAtWords: on a terminal of a known width the summary's
// lines break between words, within the width, continued indented.
func TestSummaryWrapsAtWords(t *testing.T) {
	t.Parallel()
	in := "Synced 1 of 2 forms into SQLite file /tmp/op_cap/s80.db: 20000 rows new, 0 updated, in 3s.\n  nosuchform: form \"nosuchform\" page 1: form not found (HTTP 404): it does not exist or was deleted\n"
	got := wrapWords(in, 40)
	for l := range strings.Lines(got) {
		if n := utf8.RuneCountInString(strings.TrimSuffix(l, "\n")); n >= 40 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(in), " ") || !strings.Contains(got, "\n    ") || !strings.Contains(got, "\n  /tmp/op_cap/s80.db") {
		t.Errorf("wrapped:\n%s", got)
	}
	if wrapWords(in, 0) != in {
		t.Error("width 0 changed the text")
	}
}
