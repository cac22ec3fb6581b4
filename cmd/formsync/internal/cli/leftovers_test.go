//go:build unix

package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
)

// aged creates a file of name in dir, modified age ago.
func aged(t *testing.T, dir, name string, age time.Duration) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-age)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	return p
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

func TestLeftoversOfGoneProcessesOnly(t *testing.T) {
	dir := t.TempDir()
	// Another formsync that registered two hours ago and is still running
	// (a lock held on another open file: flock does not tell them apart
	// from another process's).
	other, err := register(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.release()
	twoHours := time.Now().Add(-2 * time.Hour)
	os.Chtimes(other.path, twoHours, twoHours)
	// A process that registered and died (its file is not locked).
	dead := aged(t, dir, "formsync-live-dead.lock", 5*time.Hour)

	gone := aged(t, dir, "formsync-spool-111.ndjson", 3*time.Hour)     // before every live process
	maybeOther := aged(t, dir, "formsync-spool-222.ndjson", time.Hour) // could be the other's
	fresh := aged(t, dir, "formsync-spool-333.ndjson", 0)
	unrelated := aged(t, dir, "other-file.ndjson", 10*time.Hour)
	live, err := sink.NewSpool(dir) // a spool being written right now
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()

	me, err := register(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer me.release()
	n, _, err := removeLeftovers(dir, me)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || exists(gone) {
		t.Errorf("removed %d files, want only %s", n, filepath.Base(gone))
	}
	for _, p := range []string{maybeOther, fresh, unrelated, other.path, me.path} {
		if !exists(p) {
			t.Errorf("%s was removed", filepath.Base(p))
		}
	}
	if exists(dead) {
		t.Error("the registration of a process that is gone was kept")
	}
	if err := live.Append(sink.Row{}); err != nil || live.Finish() != nil {
		t.Errorf("the live spool was disturbed: %v", err)
	}

	// Once the other process is gone, its spools go too.
	other.release()
	if n, _, _ := removeLeftovers(dir, me); n != 1 || exists(maybeOther) || !exists(fresh) {
		t.Errorf("after the other process ended: removed %d, want %s", n, filepath.Base(maybeOther))
	}
}

// TestSyncRemovesLeftovers: a sync removes the spools a killed run left.
func TestSyncRemovesLeftovers(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "a")
	tmp := t.TempDir()
	t.Setenv("FORMSYNC_TMP_DIR", tmp)
	left := aged(t, tmp, "formsync-spool-4242.ndjson", 2*time.Hour)
	code, _, errOut := run(t, "sync")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if exists(left) || !strings.Contains(errOut, "removed spool files left by formsync processes that are gone") {
		t.Errorf("the leftover spool is still there or not logged:\n%s", errOut)
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 0 {
		t.Errorf("the sync left %d files in the staging directory: %v", len(entries), entries)
	}
}
