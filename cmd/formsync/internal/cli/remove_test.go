package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// storeOf reads the configured store read-only: the states and the rows of
// a form.
func storeOf(t *testing.T, formID string) (map[string]state.Form, []sink.Row) {
	t.Helper()
	cfg, _ := LoadConfig()
	dst, err := openStatusSink(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	states, err := dst.ReadState(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := dst.(interface {
		ReadRows(context.Context, string) ([]sink.Row, error)
	}).ReadRows(t.Context(), formID)
	if err != nil {
		t.Fatal(err)
	}
	return states, rows
}

// statusForms are the forms `status --json` lists.
func statusForms(t *testing.T) []string {
	t.Helper()
	code, out, errOut := run(t, "status", "--json")
	if code != exitOK {
		t.Fatalf("status: exit %d:\n%s", code, errOut)
	}
	var got []formStatus
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.Form)
	}
	return ids
}

// TestRemoveAMistypedForm: a mistyped id in FORMSYNC_FORMS fails (404) and
// leaves a sync_state row. Once FORMSYNC_FORMS is fixed, status no longer
// lists it, and remove takes its state out; a form taken out of
// FORMSYNC_FORMS is removed with or without its rows, a dry run first
// saying what would go and changing nothing. In both sinks.
func TestRemoveAMistypedForm(t *testing.T) {
	for _, sinkName := range []string{"sqlite", "bigquery"} {
		t.Run(sinkName, func(t *testing.T) {
			sim := apisim.New(apisim.Options{Seed: 31, Variant: apisim.Newer, Forms: []string{"a", "b", "contcat"}, SubmissionsPerForm: 12})
			sim.SetFormStatus("contcat", 404)
			syncEnv(t, sim, "a", "b", "contcat")
			if sinkName == "bigquery" {
				bigQueryEnv(t)
			}
			if code, _, _ := run(t, "sync"); code != exitFailed {
				t.Fatalf("sync with a mistyped form: exit %d, want %d", code, exitFailed)
			}
			t.Setenv("FORMSYNC_FORMS", "a,b")
			if code, _, errOut := run(t, "sync"); code != exitOK {
				t.Fatalf("sync: exit %d:\n%s", code, errOut)
			}
			if got := strings.Join(statusForms(t), ","); got != "a,b" {
				t.Errorf("status lists %s once FORMSYNC_FORMS is fixed, want a,b", got)
			}
			code, out, _ := run(t, "status")
			if code != exitOK || !strings.Contains(out, "Not listed: the sync state of contcat") {
				t.Errorf("status does not say it left contcat out: exit %d\n%s", code, out)
			}

			// A dry run says what would go, and changes nothing.
			code, out, errOut := run(t, "remove", "--form", "contcat", "--dry-run")
			if code != exitOK || !strings.Contains(out, "Dry run: would remove form contcat") ||
				!strings.Contains(out, "sync state: would be removed (with its last error") || !strings.Contains(out, "stored rows: none") {
				t.Errorf("remove --dry-run: exit %d:\n%s%s", code, out, errOut)
			}
			if states, _ := storeOf(t, "contcat"); states["contcat"].LastError == "" {
				t.Fatalf("a dry run removed the state")
			}
			// Still configured: refused; a dry run reports, and says so.
			code, _, errOut = run(t, "remove", "--form", "a")
			if code != exitUsage || !strings.Contains(errOut, "--form a is in FORMSYNC_FORMS") {
				t.Errorf("remove of a configured form: exit %d, want %d:\n%s", code, exitUsage, errOut)
			}
			code, out, _ = run(t, "remove", "--form", "a", "--dry-run")
			if code != exitOK || !strings.Contains(out, "stored rows: 12 would stay") || !strings.Contains(out, "the removal itself is refused") {
				t.Errorf("remove --dry-run of a configured form: exit %d:\n%s", code, out)
			}
			// Without FORMSYNC_FORMS, status cannot tell: it lists every state.
			t.Setenv("FORMSYNC_FORMS", "")
			if got := strings.Join(statusForms(t), ","); got != "a,b,contcat" {
				t.Errorf("status without FORMSYNC_FORMS lists %s, want a,b,contcat", got)
			}
			t.Setenv("FORMSYNC_FORMS", "a,b")
			for _, args := range [][]string{{"remove"}, {"remove", "--form", "a,b"}, {"remove", "--form", "x", "--form", "y"}} {
				if code, _, errOut := run(t, args...); code != exitUsage {
					t.Errorf("%v: exit %d, want %d:\n%s", args, code, exitUsage, errOut)
				}
			}

			code, out, errOut = run(t, "remove", "--form", "contcat")
			if code != exitOK || !strings.Contains(out, "Removed form contcat") {
				t.Fatalf("remove: exit %d:\n%s%s", code, out, errOut)
			}
			if states, _ := storeOf(t, "contcat"); len(states) != 2 {
				t.Errorf("states after remove: %v, want a and b", states)
			}
			if code, out, _ := run(t, "remove", "--form", "contcat"); code != exitOK || !strings.Contains(out, "Nothing to remove") {
				t.Errorf("remove again: exit %d:\n%s", code, out)
			}
			if code, out, _ := run(t, "status"); code != exitOK || strings.Contains(out, "contcat") {
				t.Errorf("status still mentions contcat:\n%s", out)
			}

			// b leaves FORMSYNC_FORMS: its state goes, its rows stay
			// unless asked.
			t.Setenv("FORMSYNC_FORMS", "a")
			code, out, _ = run(t, "remove", "--form", "b", "--rows", "--dry-run")
			if code != exitOK || !strings.Contains(out, "stored rows: 12 would be removed (0 marked deleted upstream)") {
				t.Errorf("remove --rows --dry-run: exit %d:\n%s", code, out)
			}
			if _, rows := storeOf(t, "b"); len(rows) != 12 {
				t.Fatalf("a dry run removed rows: %d left", len(rows))
			}
			code, out, _ = run(t, "remove", "--form", "b")
			if code != exitOK || !strings.Contains(out, "stored rows: 12 stay in the table") {
				t.Errorf("remove: exit %d:\n%s", code, out)
			}
			states, rows := storeOf(t, "b")
			if _, ok := states["b"]; ok || len(rows) != 12 {
				t.Errorf("after remove without --rows: state kept %v, %d rows; want no state, 12 rows", ok, len(rows))
			}
			code, out, _ = run(t, "remove", "--form", "b", "--rows")
			if code != exitOK || !strings.Contains(out, "sync state: none") || !strings.Contains(out, "stored rows: 12 removed") {
				t.Errorf("remove --rows: exit %d:\n%s", code, out)
			}
			if _, rows := storeOf(t, "b"); len(rows) != 0 {
				t.Errorf("%d rows of b left after remove --rows", len(rows))
			}
			if _, rows := storeOf(t, "a"); len(rows) != 12 {
				t.Errorf("form a holds %d rows after removals of other forms, want 12", len(rows))
			}
			if got := strings.Join(statusForms(t), ","); got != "a" {
				t.Errorf("status lists %s, want a", got)
			}
		})
	}
}

// TestRemoveKeepsTombstones: a form whose submissions were forgotten keeps
// its tombstones when it is removed, so that, configured again, it does
// not store them again.
func TestRemoveKeepsTombstones(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 32, Variant: apisim.Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 6})
	syncEnv(t, sim, "a", "b")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d:\n%s", code, errOut)
	}
	key := sim.Submissions("b")[1].ID
	if code, _, errOut := run(t, "forget", "--form", "b", "--key", strconv.FormatInt(key, 10)); code != exitOK {
		t.Fatalf("forget: exit %d:\n%s", code, errOut)
	}
	t.Setenv("FORMSYNC_FORMS", "a")
	code, out, errOut := run(t, "remove", "--form", "b", "--rows")
	if code != exitOK || !strings.Contains(out, "but for the tombstones of 1 forgotten submission(s)") {
		t.Fatalf("remove: exit %d:\n%s%s", code, out, errOut)
	}
	if got := strings.Join(statusForms(t), ","); got != "a" {
		t.Errorf("status lists %s, want a", got)
	}
	t.Setenv("FORMSYNC_FORMS", "a,b")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync of the form configured again: exit %d:\n%s", code, errOut)
	}
	_, rows := storeOf(t, "b")
	if len(rows) != 5 {
		t.Errorf("form b holds %d rows once synced again, want 5 (6 less the forgotten one)", len(rows))
	}
	for _, r := range rows {
		if r.SubmissionKey == strconv.FormatInt(key, 10) {
			t.Errorf("the forgotten submission %s is stored again", r.SubmissionKey)
		}
	}
}

// TestStatusRowsAfterAHandDeletedState: the sync_state row of a form
// deleted by hand (to reset it) made every later sync fail as incomplete,
// the API counting more submissions than the counter of inserts, and
// status showed that counter. The next sync heals: it succeeds, and
// status shows the rows the table holds. Likewise a row_count of -1.
func TestStatusRowsAfterAHandDeletedState(t *testing.T) {
	for _, sinkName := range []string{"sqlite", "bigquery"} {
		t.Run(sinkName, func(t *testing.T) {
			sim := apisim.New(apisim.Options{Seed: 33, Variant: apisim.Newer, Forms: []string{"f1"}, SubmissionsPerForm: 8})
			db := syncEnv(t, sim, "f1")
			table, edit := "sync_state", func(q string) {
				t.Helper()
				h, err := sql.Open("sqlite", db)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				if _, err := h.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if sinkName == "bigquery" {
				fake := bigQueryEnv(t)
				table, edit = `"p.formsync.sync_state"`, func(q string) {
					t.Helper()
					if _, err := fake.EditByHand(q); err != nil {
						t.Fatal(err)
					}
				}
			}
			rows := func() int64 {
				t.Helper()
				code, out, errOut := run(t, "status", "--json")
				var got []formStatus
				if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got) != 1 {
					t.Fatalf("status: exit %d, %v:\n%s%s", code, err, out, errOut)
				}
				return got[0].Rows
			}
			if code, _, errOut := run(t, "sync"); code != exitOK {
				t.Fatalf("sync: exit %d:\n%s", code, errOut)
			}
			for _, q := range []string{
				`DELETE FROM ` + table + ` WHERE form_id = 'f1'`,
				`UPDATE ` + table + ` SET row_count = -1 WHERE form_id = 'f1'`,
			} {
				edit(q)
				if code, _, errOut := run(t, "sync"); code != exitOK {
					t.Errorf("sync after %s: exit %d:\n%s", q, code, errOut)
				}
				if n := rows(); n != 8 {
					t.Errorf("status after %s and a sync: rows %d, want 8", q, n)
				}
			}
		})
	}
}
