package cli

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/google/go-cmp/cmp"
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

// TestStatusOfAMissingBigQueryDataset: on BigQuery too, a mistyped dataset
// is an error and nothing is created; the dataset a sync wrote is read.
func TestStatusOfAMissingBigQueryDataset(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 10})
	syncEnv(t, sim, "a")
	fake := bigQueryEnv(t)
	t.Setenv("FORMSYNC_BQ_DATASET", "formsnyc")
	code, out, errOut := run(t, "status")
	// The hint for a sync (which creates missing tables) is not given to
	// a command that creates none.
	if code != exitFailed || !strings.Contains(errOut, "has not synced into dataset formsnyc") || strings.Contains(out, "No form") ||
		strings.Contains(errOut, "creates missing tables") {
		t.Errorf("status of a dataset never written: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if ddl := fake.Stats().DDL; len(ddl) != 0 {
		t.Errorf("status created %v", ddl)
	}
	t.Setenv("FORMSYNC_BQ_DATASET", "formsync")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	fake.ResetStats()
	if code, out, errOut := run(t, "status"); code != exitOK || !strings.Contains(out, "a ") {
		t.Errorf("status after a sync: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if ddl := fake.Stats().DDL; len(ddl) != 0 {
		t.Errorf("status did DDL: %v", ddl)
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

// TestCopiesInTheLogAndStatus: a form of the older response form served a
// submission twice, indistinguishably, syncs with exit 0, its log line
// says so, and so does `status --json`.
func TestCopiesInTheLogAndStatus(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 6, Variant: apisim.Older, Forms: []string{"a"}, SubmissionsPerForm: 20})
	if _, ok := sim.AddCopy("a", sim.Submissions("a")[10].ID); !ok {
		t.Fatal("no submission to copy")
	}
	syncEnv(t, sim, "a")
	code, _, errOut := run(t, "sync")
	if code != exitOK || !strings.Contains(errOut, `"copies":1`) {
		t.Fatalf("sync: exit %d, log:\n%s", code, errOut)
	}
	code, out, errOut := run(t, "status", "--json")
	if code != exitOK || !strings.Contains(out, `"copies": 1`) || !strings.Contains(out, `"rows": 20`) {
		t.Errorf("status --json: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
}

// TestStatusShowsABackfillInProgress: an interrupted backfill's window and
// how far down it committed are in the table, in a last column shown only
// then, and in --json.
func TestStatusShowsABackfillInProgress(t *testing.T) {
	ctx := t.Context()
	sim := apisim.New(apisim.Options{Seed: 8, Variant: apisim.Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 10})
	db := syncEnv(t, sim, "a", "b")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	if code, out, errOut := run(t, "status"); code != exitOK || strings.Contains(out, "BACKFILL") {
		t.Errorf("status without a backfill: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// The state a backfill of March leaves when stopped after a checkpoint.
	s, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	states, err := s.ReadState(ctx, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	at := func(v string) time.Time {
		tm, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	a := states["a"]
	a.Backfill = &state.Backfill{Since: at("2026-03-01T00:00:00Z"), Until: at("2026-03-31T23:59:59Z"),
		Cursor: at("2026-03-15T12:00:00Z"), StartedAt: at("2026-11-24T10:00:00Z")}
	if _, err := s.Commit(ctx, &sink.Commit{Forms: []sink.FormCommit{{State: a}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run(t, "status")
	table, _, _ := strings.Cut(out, "\n\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if code != exitOK || len(lines) != 3 || !strings.HasSuffix(lines[0], "BACKFILL IN PROGRESS") ||
		!strings.HasSuffix(lines[1], "2026-03-01T00:00:00Z..2026-03-31T23:59:59Z, down to 2026-03-15T12:00:00Z") ||
		!strings.HasPrefix(lines[2], "b ") || !strings.HasSuffix(lines[2], " -") {
		t.Errorf("status with a backfill of a: exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}
	code, out, errOut = run(t, "status", "--json")
	var got []formStatus
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got) != 2 {
		t.Fatalf("status --json: exit %d, %v, stdout %q, stderr %q", code, err, out, errOut)
	}
	if p := got[0].BackfillProgress; !got[0].Backfill || p == nil || p.DownTo == nil || !p.DownTo.Equal(at("2026-03-15T12:00:00Z")) ||
		p.Since == nil || p.Until == nil || got[1].BackfillProgress != nil || !strings.Contains(out, `"down_to": "2026-03-15T12:00:00Z"`) {
		t.Errorf("status --json:\n%s", out)
	}

	// A dry run of the same backfill (the window as recorded: a time with
	// a fraction is taken as written) says it would resume, and estimates
	// what is left.
	code, out, errOut = run(t, "backfill", "--form", "a", "--since", "2026-03-01", "--until", "2026-03-31T23:59:59.0Z", "--dry-run")
	if code != exitOK || !strings.Contains(out, "an interrupted backfill of this window got down to 2026-03-15T12:00:00Z; run, it resumes there") {
		t.Errorf("dry run of the interrupted backfill: exit %d:\n%s%s", code, out, errOut)
	}
}

// failingWriter is a stdout that cannot be written, such as a closed pipe.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stdout: broken pipe")
}

// TestStatusJSONThatCannotBeWritten: a --json that cannot be written
// fails with a message saying why, not silently.
func TestStatusJSONThatCannotBeWritten(t *testing.T) {
	clearEnv(t)
	db := filepath.Join(t.TempDir(), "f.db")
	t.Setenv("FORMSYNC_SQLITE_PATH", db)
	s, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	code := Main(t.Context(), []string{"status", "--json"}, failingWriter{}, &errOut)
	if code != exitFailed || !strings.Contains(errOut.String(), "formsync status: writing the JSON: write /dev/stdout: broken pipe") {
		t.Errorf("exit %d, stderr %q: want %d and why", code, errOut.String(), exitFailed)
	}
}

// TestStatusListsConfiguredFormsNotSyncedYet: a form of FORMSYNC_FORMS
// that no run has read is listed as such, not left out as if it did not
// exist.
func TestStatusListsConfiguredFormsNotSyncedYet(t *testing.T) {
	syncedContact(t, 7)
	t.Setenv("FORMSYNC_FORMS", "contact,newform")
	code, out, errOut := run(t, "status")
	if code != exitOK || !regexp.MustCompile(`(?m)^newform\s.*not synced yet`).MatchString(out) || !strings.Contains(out, "contact ") {
		t.Errorf("status: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, "status", "--json")
	var got []formStatus
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil {
		t.Fatalf("status --json: exit %d, %v:\n%s%s", code, err, out, errOut)
	}
	if len(got) != 2 || got[0].Form != "contact" || got[0].NeverSynced || got[1].Form != "newform" || !got[1].NeverSynced || got[1].Rows != 0 {
		t.Errorf("status --json: %+v, want contact, then newform never synced", got)
	}
}

// TestStatusJSONListsViewColumns: status --json names each form's view
// and lists its field columns with the field each reads and its type,
// pinned (FORMSYNC_FIELD_TYPES) or seen.
func TestStatusJSONListsViewColumns(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 8, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 1})
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	sim.SetSubmissions("contact",
		apisim.Submission{ID: 1, CreatedAt: at, Fields: json.RawMessage(`{"Guests":"4","zip":"02134","when":"2026-04-01"}`), Files: json.RawMessage(`[]`)})
	syncEnv(t, sim, "contact")
	t.Setenv("FORMSYNC_FIELD_TYPES", `{"contact":{"zip":"string"}}`)
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	code, out, errOut := run(t, "status", "--json")
	var got []formStatus
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got) != 1 {
		t.Fatalf("status --json: exit %d, %v, stdout %q, stderr %q", code, err, out, errOut)
	}
	if got[0].View != "form_contact" || len(got[0].Columns) != 3 {
		t.Fatalf("status --json:\n%s", out)
	}
	want := []view.Column{
		{Name: got[0].Columns[0].Name, Field: "Guests", Type: fieldtype.Integer},
		{Name: "when", Field: "when", Type: fieldtype.Date},
		{Name: "zip", Field: "zip", Type: fieldtype.String, Pinned: true},
	}
	if diff := cmp.Diff(want, got[0].Columns); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if !strings.Contains(out, `"column": "zip",`) || !strings.Contains(out, `"pinned": true`) {
		t.Errorf("status --json:\n%s", out)
	}
}

// TestStatusListsFieldsAdded: a form that gained a field after its first
// rows lists it, with its type and when, in text and JSON; --fields-since
// after that time leaves it out, and a bad value is refused.
func TestStatusListsFieldsAdded(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 8, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 1})
	at := time.Now().UTC().Add(-time.Hour)
	first := apisim.Submission{ID: 1, CreatedAt: at, Fields: json.RawMessage(`{"name":"a"}`), Files: json.RawMessage(`[]`)}
	sim.SetSubmissions("contact", first)
	syncEnv(t, sim, "contact")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	sim.SetSubmissions("contact", first,
		apisim.Submission{ID: 2, CreatedAt: at.Add(time.Minute), Fields: json.RawMessage(`{"name":"b","guests":"3"}`), Files: json.RawMessage(`[]`)})
	before := time.Now().UTC()
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	code, out, errOut := run(t, "status")
	if code != exitOK || !regexp.MustCompile(`(?m)^Fields added since .* \(--fields-since 7d\)`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  contact: guests \(integer\), \d{4}-`).MatchString(out) {
		t.Errorf("status: exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}
	code, out, _ = run(t, "status", "--json")
	var got []formStatus
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got) != 1 {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	if f := got[0].FieldsAdded; len(f) != 1 || f[0].Field != "guests" || f[0].Type != "integer" || f[0].AddedAt.Before(before.Add(-time.Second)) {
		t.Errorf("fields_added %+v", f)
	}
	code, out, _ = run(t, "status", "--fields-since", time.Now().UTC().Add(time.Minute).Format(time.RFC3339))
	if code != exitOK || strings.Contains(out, "Fields added") {
		t.Errorf("status --fields-since after the field came: exit %d:\n%s", code, out)
	}
	if code, _, errOut := run(t, "status", "--fields-since", "yesterday"); code != exitUsage || !strings.Contains(errOut, "--fields-since") {
		t.Errorf("a bad --fields-since: exit %d, %s", code, errOut)
	}
}
