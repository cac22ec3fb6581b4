package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formsync/formsync/worker/formsapi/apisim"
)

// TestStatusOfAMissingDatabase: a mistyped path is an error, and no file
// is created there.
func TestStatusOfAMissingDatabase(t *testing.T) {
	clearEnv(t)
	db := filepath.Join(t.TempDir(), "typo.db")
	t.Setenv("FORMSYNC_SQLITE_PATH", db)
	code, out, errOut := run(t, "status")
	if code != exitFailed || !strings.Contains(errOut, "no database at FORMSYNC_SQLITE_PATH") || strings.Contains(out, "No form") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("status created %s", db)
	}
}

// TestStatusReadsAReadOnlyCopy: status reads without writing.
func TestStatusReadsAReadOnlyCopy(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 5})
	db := syncEnv(t, sim, "a")
	if code, _, errOut := run(t, "sync"); code != 0 {
		t.Fatalf("sync: exit %d\n%s", code, errOut)
	}
	os.Chmod(db, 0o444)
	before, _ := os.ReadFile(db)
	code, out, errOut := run(t, "status")
	if code != 0 || !strings.Contains(out, "a ") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	if after, _ := os.ReadFile(db); string(after) != string(before) {
		t.Error("status changed the database file")
	}
}
