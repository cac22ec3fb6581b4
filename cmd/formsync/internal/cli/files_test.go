package cli

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
)

// TestFilesThroughTheCommands: with FORMSYNC_FILES_STORE, sync keeps the
// files of the rows stored before the store was set and logs how many, status lists them per form, and forget deletes the
// forgotten submission's objects and says which; without a store, status
// says how many stored submissions name files that will expire.
func TestFilesThroughTheCommands(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 12,
		Files: apisim.FileOptions{Every: 3, PerSubmission: 1}})
	syncEnv(t, sim, "contact")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d:\n%s", code, errOut)
	}
	code, out, errOut := run(t, "status")
	if code != exitOK || !strings.Contains(out, "Files: 4 stored submissions name files that the service deletes 30 days after upload; set FORMSYNC_FILES_STORE") {
		t.Errorf("status without a store: exit %d:\n%s%s", code, out, errOut)
	}
	store := filepath.Join(t.TempDir(), "files")
	t.Setenv("FORMSYNC_FILES_STORE", "file://"+store)
	t.Setenv("FORMSYNC_FILES_ALLOW_LOOPBACK", "true")
	// The rows are stored already: the files are caught up.
	code, out, errOut = run(t, "sync")
	if code != exitOK || !strings.Contains(errOut, `"message":"sync finished"`) || !strings.Contains(errOut, `"files_stored":4,`) || !strings.Contains(errOut, `"files_pending":0`) {
		t.Errorf("sync with a store: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, "status", "--json")
	if code != exitOK || !strings.Contains(out, `"files": {`) || !strings.Contains(out, `"stored": 4,`) || !strings.Contains(out, `"pending": 0,`) {
		t.Errorf("status --json: exit %d:\n%s%s", code, out, errOut)
	}
	// On a terminal, the summary says what became of the files.
	sim.Add("contact", 3)
	var term terminalBuffer
	var termErr bytes.Buffer
	if code := Main(t.Context(), []string{"sync"}, &term, &termErr); code != exitOK || !strings.Contains(term.String(), "Kept 1 file (") ||
		!strings.Contains(term.String(), "1 new) in file://"+store+"; 0 pending.") {
		t.Errorf("summary: exit %d:\n%s%s", code, term.String(), termErr.String())
	}
	files := sim.Files("contact")
	first := files[0]
	code, out, errOut = run(t, "forget", "--form", "contact", "--key", strconv.FormatInt(first.ID, 10))
	if code != exitOK || !strings.Contains(out, "Deleted 1 file(s) from the files store: "+first.SHA256+"\n") {
		t.Errorf("forget: exit %d:\n%s%s", code, out, errOut)
	}
	t.Setenv("FORMSYNC_FILES_STORE", "")
	code, out, _ = run(t, "forget", "--form", "contact", "--key", strconv.FormatInt(files[1].ID, 10))
	if code != exitFailed || !strings.Contains(out, "Not deleted from the files store: no files store is configured") || !strings.Contains(out, files[1].SHA256) {
		t.Errorf("forget without the store: exit %d, want %d, the digest named:\n%s", code, exitFailed, out)
	}
}
