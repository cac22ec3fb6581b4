package cli

import (
	"bytes"
	"database/sql"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/bqfake"
)

// clearEnv unsets every FORMSYNC_ variable for the test.
func clearEnv(t *testing.T) {
	for _, n := range append(envNames(), "JOB_COMPLETION_INDEX") {
		t.Setenv(n, "") // restored when the test ends
		os.Unsetenv(n)
	}
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpListsEveryVariableAndNoSecret(t *testing.T) {
	clearEnv(t)
	t.Setenv("FORMSYNC_API_TOKEN", "tok-very-secret")
	code, out, _ := run(t, "help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for _, n := range envNames() {
		if !strings.Contains(out, n) {
			t.Errorf("help does not list %s", n)
		}
	}
	for _, want := range []string{"sync", "run", "backfill", "status", "demo", "simulate", "version", "100", "formsync.db"} {
		if !strings.Contains(out, want) {
			t.Errorf("help does not mention %q", want)
		}
	}
	if strings.Contains(out, "tok-very-secret") {
		t.Error("help printed the token")
	}
}

// TestREADMEDocumentsEveryVariable keeps the README's configuration table in
// step with the binary: a new or renamed variable fails here until its row
// is written.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range envNames() {
		if !strings.Contains(string(readme), "| `"+n+"` |") {
			t.Errorf("README.md has no configuration row for %s", n)
		}
	}
}

func TestConfigProblemsAreListedTogether(t *testing.T) {
	clearEnv(t)
	t.Setenv("FORMSYNC_PAGE_SIZE", "0")
	t.Setenv("FORMSYNC_SINK", "postgres")
	t.Setenv("FORMSYNC_API_TOKEN", "tok-very-secret")
	t.Setenv("FORMSYNC_API_BASE_URL", "ftp://x")
	code, _, errOut := run(t, "sync")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{"FORMSYNC_PAGE_SIZE", "FORMSYNC_SINK", "FORMSYNC_FORMS", "FORMSYNC_API_BASE_URL"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("problem list lacks %s:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "tok-very-secret") {
		t.Error("the token was printed")
	}
	t.Setenv("FORMSYNC_PAGE_SIZE", "many")
	if code, _, errOut := run(t, "sync"); code != exitUsage || !strings.Contains(errOut, "PAGE_SIZE") {
		t.Errorf("unparsable value: exit %d, %s", code, errOut)
	}
	if code, _, _ := run(t, "frobnicate"); code != exitUsage {
		t.Errorf("unknown command exit %d", code)
	}
}

func TestShardIndexFromIndexedJob(t *testing.T) {
	clearEnv(t)
	t.Setenv("JOB_COMPLETION_INDEX", "3")
	t.Setenv("FORMSYNC_SHARD_COUNT", "4")
	c, err := LoadConfig()
	if err != nil || c.ShardIndex != 3 {
		t.Fatalf("shard index %d, %v", c.ShardIndex, err)
	}
	t.Setenv("FORMSYNC_SHARD_INDEX", "1")
	if c, _ = LoadConfig(); c.ShardIndex != 1 {
		t.Errorf("FORMSYNC_SHARD_INDEX must win over JOB_COMPLETION_INDEX, got %d", c.ShardIndex)
	}
}

// syncEnv points formsync at a simulator and a fresh SQLite file.
func syncEnv(t *testing.T, sim *apisim.Server, forms ...string) string {
	clearEnv(t)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	db := filepath.Join(t.TempDir(), "f.db")
	t.Setenv("FORMSYNC_API_BASE_URL", srv.URL)
	t.Setenv("FORMSYNC_API_TOKEN", apisim.DefaultToken)
	t.Setenv("FORMSYNC_FORMS", strings.Join(forms, ","))
	t.Setenv("FORMSYNC_SQLITE_PATH", db)
	t.Setenv("FORMSYNC_RATE_LIMIT", "1000")
	t.Setenv("FORMSYNC_TMP_DIR", t.TempDir())
	return db
}

func TestSyncExitCodesAndSummaries(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 1, Variant: apisim.Newer, Forms: []string{"a", "b", "gone"}, SubmissionsPerForm: 30})
	sim.SetFormStatus("gone", 404)
	db := syncEnv(t, sim, "a", "b", "gone")
	code, _, errOut := run(t, "sync")
	if code != exitFailed {
		t.Fatalf("a failing form must exit %d, got %d", exitFailed, code)
	}
	for _, want := range []string{`"message":"form synced"`, `"form":"a"`, `"severity":"ERROR"`, `"severity":"WARNING","message":"sync finished"`, "FORMSYNC_FORMS"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("log lacks %s:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, apisim.DefaultToken) {
		t.Error("the token reached the log")
	}
	s, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := s.ReadRows(t.Context(), "a")
	s.Close()
	if len(rows) != 30 {
		t.Errorf("form a has %d rows, want 30 (a failing form must not stop the others)", len(rows))
	}
	sim.SetFormStatus("gone", 0)
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	code, out, _ := run(t, "status", "--json")
	if code != 0 || !strings.Contains(out, `"form_id": "gone"`) || strings.Contains(out, "last_error\"") {
		t.Errorf("status --json after recovery (exit %d):\n%s", code, out)
	}
	code, out, _ = run(t, "status")
	if code != 0 || !strings.Contains(out, "WATERMARK") || !strings.Contains(out, "gone") {
		t.Errorf("status table (exit %d):\n%s", code, out)
	}
}

// TestReconcileLogsAReconcile: the log lines of a reconcile name it, not
// a sync: a log-based alert on "sync failed" must not fire for one, nor a
// reader take it for a sync.
func TestReconcileLogsAReconcile(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 6, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "a")
	code, _, errOut := run(t, "reconcile")
	if code != exitOK {
		t.Fatalf("reconcile: exit %d:\n%s", code, errOut)
	}
	for _, want := range []string{`"message":"form reconciled"`, `"message":"reconcile finished"`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the log lacks %s:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "sync") {
		t.Errorf("a reconcile's log speaks of a sync:\n%s", errOut)
	}
}

// TestReconcileWithoutAFormSaysBothWays: reconcile takes its forms from
// --form or FORMSYNC_FORMS; with neither, the problem names both.
func TestReconcileWithoutAFormSaysBothWays(t *testing.T) {
	apiEnv(t)
	os.Unsetenv("FORMSYNC_FORMS")
	code, _, errOut := run(t, "reconcile")
	if code != exitUsage || !strings.Contains(errOut, "--form ID") || !strings.Contains(errOut, "FORMSYNC_FORMS") {
		t.Errorf("reconcile without a form: exit %d, want %d naming --form and FORMSYNC_FORMS:\n%s", code, exitUsage, errOut)
	}
	t.Setenv("FORMSYNC_FORMS", "a,,b")
	if code, _, errOut := run(t, "reconcile"); code != exitUsage || !strings.Contains(errOut, "entry 2 is empty") {
		t.Errorf("reconcile with a bad FORMSYNC_FORMS: exit %d, want %d:\n%s", code, exitUsage, errOut)
	}
}

// TestShortRetryAfterCapIsWarnedNotRefused: a Retry-After cap under a
// second works (tests and a known-conservative API use it) but cuts every
// wait the API asks for short, so the run says so and goes on.
func TestShortRetryAfterCapIsWarnedNotRefused(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_MAX_RETRY_AFTER", "50ms")
	code, _, errOut := run(t, "sync")
	if code != exitOK {
		t.Fatalf("exit %d, want %d:\n%s", code, exitOK, errOut)
	}
	if !strings.Contains(errOut, `"severity":"WARNING"`) || !strings.Contains(errOut, "FORMSYNC_MAX_RETRY_AFTER=50ms is under 1s") {
		t.Errorf("the log lacks the warning:\n%s", errOut)
	}
	t.Setenv("FORMSYNC_MAX_RETRY_AFTER", "2s")
	if _, _, errOut := run(t, "sync"); strings.Contains(errOut, "MAX_RETRY_AFTER") {
		t.Errorf("a cap of 2s is warned about:\n%s", errOut)
	}
}

func TestSyncWithTokenFile(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 2, Variant: apisim.Older, Forms: []string{"a"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "a")
	os.Unsetenv("FORMSYNC_API_TOKEN")
	t.Setenv("FORMSYNC_API_TOKEN_FILE", filepath.Join(t.TempDir(), "missing"))
	if code, _, errOut := run(t, "sync"); code != exitUsage || !strings.Contains(errOut, "FORMSYNC_API_TOKEN_FILE") {
		t.Errorf("missing token file: exit %d, %s", code, errOut)
	}
}

func TestDemoRunsWithoutConfiguration(t *testing.T) {
	clearEnv(t)
	db := filepath.Join(t.TempDir(), "demo.db")
	code, out, errOut := run(t, "demo", "-db", db, "-submissions", "120")
	if code != 0 {
		t.Fatalf("demo exited %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"First sync", "Second sync", "contact   137", "3 rows marked deleted upstream", "sqlite3"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// A form listed by mistake (a typo in FORMSYNC_FORMS, since corrected)
// failed with a 404, and the failure is recorded in a state of that id;
// forget must still refuse the id: nothing of the form was ever stored, so
// an erasure there would report a success that removed nothing.
func TestForgetRefusesAFormThatOnlyEverFailed(t *testing.T) {
	syncedContact(t, 3)
	t.Setenv("FORMSYNC_FORMS", "contact,contcat")
	if code, _, errOut := run(t, "reconcile", "--form", "contcat"); code != exitFailed {
		t.Fatalf("reconcile of a form the API does not have: exit %d, want %d:\n%s", code, exitFailed, errOut)
	}
	t.Setenv("FORMSYNC_FORMS", "contact")
	code, out, errOut := run(t, "forget", "--form", "contcat", "--key", "1001")
	if code != exitUsage || !strings.Contains(errOut, "no such form") {
		t.Errorf("forget in a form that never synced: exit %d, want %d naming it:\n%s%s", code, exitUsage, out, errOut)
	}
	if code, out, errOut := run(t, "forget", "--form", "contact", "--key", "1001", "--dry-run"); code != exitOK {
		t.Errorf("forget in a synced form: exit %d:\n%s%s", code, out, errOut)
	}
	// A dry run that matches nothing says it is one, as every dry run does.
	if code, out, errOut := run(t, "forget", "--form", "contact", "--field", "nosuchfield=x", "--dry-run"); code != exitOK || !strings.HasPrefix(out, "Dry run: ") {
		t.Errorf("dry run matching nothing: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestForgetAgainSaysNothingIsNew: the same forget by key run a second
// time (as forget asks when a reader held up the erasure) says the keys
// were forgotten before, not that it forgot them.
func TestForgetAgainSaysNothingIsNew(t *testing.T) {
	syncedContact(t, 3)
	if code, out, errOut := run(t, "forget", "--form", "contact", "--key", "1001,999999"); code != exitOK || !strings.Contains(out, "Forgot 1 stored row(s)") {
		t.Fatalf("forget: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut := run(t, "forget", "--form", "contact", "--key", "1001,999999")
	if code != exitOK || !strings.Contains(out, "Nothing new to forget in form contact") || !strings.Contains(out, "1001, 999999") ||
		strings.Contains(out, "Forgot") {
		t.Errorf("forget again: exit %d:\n%s%s", code, out, errOut)
	}
	// A dry run says the same of them, and tells a new key from those.
	code, out, errOut = run(t, "forget", "--form", "contact", "--key", "1001,777777", "--dry-run")
	if code != exitOK || !strings.Contains(out, "Keys tombstoned before, nothing to do: 1001") ||
		!strings.Contains(out, "Keys not stored (would be tombstoned anyway): 777777") || !strings.Contains(out, "check --form") {
		t.Errorf("dry run of a forget half done before: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestForgetDryRunReadsOnly: a dry run lists what would be forgotten
// without writing: it reads the database as status does, without
// migrating a file of the schema before this one, and leaves the file as
// it was (read-only too, which stops a user other than root, such as the
// image's 65534); on BigQuery it creates and writes nothing.
func TestForgetDryRunReadsOnly(t *testing.T) {
	db := syncedContact(t, 5)
	// The schema before this one, which a store opened for writing
	// migrates.
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ALTER TABLE sync_state DROP COLUMN copies`, `PRAGMA user_version = 5`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	os.Chmod(db, 0o444)
	before, _ := os.ReadFile(db)
	code, out, errOut := run(t, "forget", "--form", "contact", "--key", "1001", "--dry-run")
	if code != exitOK || !strings.Contains(out, "Dry run: would forget 1 stored row(s)") {
		t.Errorf("forget --dry-run on a read-only copy: exit %d, want %d listing the row:\n%s%s", code, exitOK, out, errOut)
	}
	if after, _ := os.ReadFile(db); string(after) != string(before) {
		t.Error("forget --dry-run changed the database file (migrated it)")
	}

	fake := bigQueryEnv(t)
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	fake.ResetStats()
	code, out, errOut = run(t, "forget", "--form", "contact", "--key", "1001", "--dry-run")
	if code != exitOK || !strings.Contains(out, "Dry run: would forget 1 stored row(s)") {
		t.Errorf("forget --dry-run on BigQuery: exit %d, want %d listing the row:\n%s%s", code, exitOK, out, errOut)
	}
	if st := fake.Stats(); len(st.DDL)+len(st.DML)+st.LoadJobs != 0 {
		t.Errorf("forget --dry-run wrote to BigQuery: DDL %v, DML %v, %d loads", st.DDL, st.DML, st.LoadJobs)
	}
}

// TestForgetUnderAReaderExitsOne: while another connection reads an older
// snapshot of the file, forget removes the rows but cannot erase their old
// bytes: it says so and exits 1, and the same command run again once the
// reader has finished erases them and exits 0. It waits out the 30 s that
// forget gives the reader, so it runs with FORMSYNC_SLOW_TESTS=1.
func TestForgetUnderAReaderExitsOne(t *testing.T) {
	if os.Getenv("FORMSYNC_SLOW_TESTS") != "1" {
		t.Skip("waits 30 s for a reader; set FORMSYNC_SLOW_TESTS=1")
	}
	db := syncedContact(t, 5)
	reader, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	tx, err := reader.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM submissions").Scan(&n); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "forget", "--form", "contact", "--key", "1001")
	if code != exitFailed || !strings.Contains(out, "Forgot 1 stored row(s)") || !strings.Contains(out, "Not erased from the file yet") ||
		!strings.Contains(out, "run this command again") {
		t.Errorf("forget under a reader: exit %d, want %d saying the bytes are not erased yet:\n%s%s", code, exitFailed, out, errOut)
	}
	tx.Rollback()
	code, out, errOut = run(t, "forget", "--form", "contact", "--key", "1001")
	if code != exitOK || strings.Contains(out, "Not erased") {
		t.Errorf("forget again once the reader ended: exit %d, want %d:\n%s%s", code, exitOK, out, errOut)
	}
}

// syncedContact syncs form contact of a newer-form simulator of 5
// submissions (seed seed) into a new SQLite file, as syncEnv sets up, and
// returns the file's path.
func syncedContact(t *testing.T, seed int64) string {
	t.Helper()
	sim := apisim.New(apisim.Options{Seed: seed, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 5})
	db := syncEnv(t, sim, "contact")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync exit %d:\n%s", code, errOut)
	}
	return db
}

// bigQueryEnv points the commands at a BigQuery fake, with the default
// dataset, and returns it.
func bigQueryEnv(t *testing.T) *bqfake.Server {
	t.Helper()
	fake := bqfake.Start(t, bqfake.Options{})
	t.Setenv("FORMSYNC_SINK", "bigquery")
	t.Setenv("FORMSYNC_BQ_PROJECT", "p")
	t.Setenv("FORMSYNC_BQ_ENDPOINT", fake.URL())
	return fake
}

// TestForgetInAMissingStore: an erasure run against a mistyped SQLite path
// or BigQuery dataset must not create an empty store there and report that
// nothing matched (or that the keys are tombstoned): the person's rows are
// elsewhere, untouched.
func TestForgetInAMissingStore(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 4, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 5})
	db := syncEnv(t, sim, "contact")
	typo := filepath.Join(filepath.Dir(db), "typo.db")
	t.Setenv("FORMSYNC_SQLITE_PATH", typo)
	for _, args := range [][]string{
		{"forget", "--form", "contact", "--field", "email=person@example.com"},
		{"forget", "--form", "contact", "--key", "1001"},
	} {
		code, out, errOut := run(t, args...)
		if code != exitFailed || !strings.Contains(errOut, "FORMSYNC_SQLITE_PATH") || strings.Contains(out, "orgot") || strings.Contains(out, "nothing changed") {
			t.Errorf("%v into a missing database: exit %d, want %d naming FORMSYNC_SQLITE_PATH:\n%s%s", args, code, exitFailed, out, errOut)
		}
		if _, err := os.Stat(typo); err == nil {
			t.Fatalf("%v created %s", args, typo)
		}
	}

	fake := bigQueryEnv(t)
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	t.Setenv("FORMSYNC_BQ_DATASET", "formsnyc")
	fake.ResetStats()
	code, out, errOut := run(t, "forget", "--form", "contact", "--key", "1001")
	if code != exitFailed || !strings.Contains(errOut, "formsnyc") || strings.Contains(out, "orgot") {
		t.Errorf("forget into a missing dataset: exit %d, want %d naming it:\n%s%s", code, exitFailed, out, errOut)
	}
	if ddl := fake.Stats().DDL; len(ddl) != 0 {
		t.Errorf("forget created %v", ddl)
	}
	t.Setenv("FORMSYNC_BQ_DATASET", "formsync")
	if code, out, errOut := run(t, "forget", "--form", "contact", "--key", "1001", "--dry-run"); code != exitOK {
		t.Errorf("forget in the synced dataset: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestDemoRefusesNoSubmissions: the simulator takes 0 for its default (100),
// so the demo said it served forms "of 0 submissions" while serving 100,
// some dated in the future, and a negative count failed the demo halfway.
func TestDemoRefusesNoSubmissions(t *testing.T) {
	clearEnv(t)
	for _, n := range []string{"0", "-5"} {
		db := filepath.Join(t.TempDir(), "demo.db")
		code, out, errOut := run(t, "demo", "-db", db, "-submissions", n)
		if code != exitUsage || !strings.Contains(errOut, "-submissions") {
			t.Errorf("demo -submissions %s: exit %d, want %d naming the flag:\n%s%s", n, code, exitUsage, out, errOut)
		}
	}
}
