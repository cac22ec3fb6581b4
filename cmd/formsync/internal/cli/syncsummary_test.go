package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/testkit/apisim"
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
