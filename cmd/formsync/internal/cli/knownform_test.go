package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
)

// TestFormFlagNamesAKnownForm: backfill and reconcile refuse a --form that
// is neither in FORMSYNC_FORMS nor ever read into the store (a typo, or a
// list), before any request and without writing a state for it or
// creating a store; a form read before but no longer listed is accepted.
func TestFormFlagNamesAKnownForm(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 20})
	db := syncEnv(t, sim, "a", "b")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d:\n%s", code, errOut)
	}
	t.Setenv("FORMSYNC_FORMS", "a")
	requests := sim.Stats().Requests
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"reconcile", "--form", "zz"}, "--form zz: not in FORMSYNC_FORMS, and never read into this store"},
		{[]string{"backfill", "--form", "zz"}, "--form zz: not in FORMSYNC_FORMS, and never read into this store"},
		{[]string{"backfill", "--form", "zz", "--dry-run"}, "--form zz: not in FORMSYNC_FORMS"},
		{[]string{"reconcile", "--form", "a,b"}, "--form a,b: name one form"},
		{[]string{"backfill", "--form", "a,b"}, "--form a,b: name one form"},
		{[]string{"reconcile", "--form", ""}, "--form is empty"},
	} {
		if code, _, errOut := run(t, c.args...); code != exitUsage || !strings.Contains(errOut, c.says) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", strings.Join(c.args, " "), code, exitUsage, c.says, errOut)
		}
	}
	if n := sim.Stats().Requests - requests; n != 0 {
		t.Errorf("the refused commands made %d requests", n)
	}
	s, err := sqlite.OpenReadOnly(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	states, err := s.ReadState(t.Context(), []string{"zz", "a,b"})
	s.Close()
	if err != nil || len(states) != 0 {
		t.Errorf("states of refused forms: %v, %v; want none", states, err)
	}

	// b is no longer listed, but was read into the store: still its own.
	for _, args := range [][]string{{"reconcile", "--form", "b"}, {"backfill", "--form", "b"}} {
		if code, _, errOut := run(t, args...); code != exitOK {
			t.Errorf("%s: exit %d:\n%s", strings.Join(args, " "), code, errOut)
		}
	}

	// No store yet: refused, and none is made.
	missing := filepath.Join(t.TempDir(), "none.db")
	t.Setenv("FORMSYNC_SQLITE_PATH", missing)
	if code, _, errOut := run(t, "backfill", "--form", "zz"); code != exitUsage {
		t.Errorf("backfill of an unknown form into no store: exit %d:\n%s", code, errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the refused backfill made %s (%v)", missing, err)
	}
}
