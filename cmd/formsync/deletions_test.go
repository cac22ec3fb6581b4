package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/testkit/enginetest"
)

// deletedKeys reads the keys of db's rows of form that carry deleted_at.
func deletedKeys(t *testing.T, db, form string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT submission_key FROM submissions WHERE form_id = ? AND deleted_at IS NOT NULL ORDER BY submission_key`, form)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

func keysOf(subs []apisim.Submission) []string {
	out := make([]string, 0, len(subs))
	for _, s := range subs {
		out = append(out, strconv.FormatInt(s.ID, 10))
	}
	slices.Sort(out)
	return out
}

// run runs the binary with env and fails the test on a non-zero exit.
func run(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("formsync %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runCode runs the binary with env and returns its output and exit code.
func runCode(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("formsync %s: %v", strings.Join(args, " "), err)
	return "", -1
}

// TestReconcileSIGKILL kills `formsync reconcile` at many moments: after
// each run the rows marked deleted are those of before the run or those of
// a completed reconcile, never a part; a final clean run marks exactly the
// submissions deleted upstream.
func TestReconcileSIGKILL(t *testing.T) {
	t.Parallel()
	enginetest.Slow(t, "SIGKILLs 18 reconciles of 1,200 rows, 100 s with -race")
	bin := buildBinary(t)
	sim := apisim.New(apisim.Options{Seed: 41, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 1200, Latency: time.Millisecond})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "r.db")
	env := baseEnv(srv.URL, "a", db, t.TempDir(), "FORMSYNC_PAGE_SIZE=20", "FORMSYNC_RATE_LIMIT=400")
	run(t, bin, env, "sync")
	sim.Delete("a", 20)

	// Kill moments are fractions of how long a reconcile takes on this
	// machine, measured by the runs allowed to finish (0), so that they land
	// while reading, during the commit and after it, idle box or busy.
	fractions := []float64{0, 0.1, 0.5, 0.05, 0.3, 0.6, 0, 0.8, 0.9, 0.95, 1.0, 0.2, 0.7, 0, 0.85, 0.4, 0.75, 0.9}
	typical := 500 * time.Millisecond
	marked := deletedKeys(t, db, "a")
	kills, completed, changed := 0, 0, 0
	for _, f := range fractions {
		want := keysOf(sim.Deleted("a")) // what a completed reconcile marks
		killed, took := runOrKill(t, command(t, env, "reconcile"), f, typical)
		if killed {
			kills++
		} else if f == 0 {
			typical = took
		}
		got := deletedKeys(t, db, "a")
		switch {
		case slices.Equal(got, want):
			if !slices.Equal(got, marked) {
				changed++
			}
			if !killed {
				completed++
			}
		case slices.Equal(got, marked):
			if !killed {
				t.Fatalf("a reconcile that ended changed nothing: %d marked, want %d", len(got), len(want))
			}
		default:
			t.Fatalf("after a run (killed %v at %.2f of a run), %d rows are marked deleted: neither the %d of before nor the %d of a reconcile", killed, f, len(got), len(marked), len(want))
		}
		marked = got
		// Upstream moves on: one deleted submission comes back, two go.
		if gone := sim.Deleted("a"); len(gone) > 0 {
			sim.Restore("a", gone[0].ID)
		}
		sim.Delete("a", 2)
	}
	if kills < 4 || kills == len(fractions) || changed < 3 {
		t.Errorf("%d of %d runs killed, %d changed the marks: the kills did not straddle the commit", kills, len(fractions), changed)
	}
	run(t, bin, env, "reconcile")
	if got, want := deletedKeys(t, db, "a"), keysOf(sim.Deleted("a")); !slices.Equal(got, want) {
		t.Fatalf("after a clean reconcile %d rows are marked deleted, want the %d deleted upstream", len(got), len(want))
	}
	if n := countRows(t, db); n != len(sim.Submissions("a"))+len(sim.Deleted("a")) {
		t.Errorf("the table holds %d rows, want every submission ever served (%d)", n, len(sim.Submissions("a"))+len(sim.Deleted("a")))
	}
	t.Logf("%d SIGKILLs, %d completed runs, then a clean reconcile: exactly the %d deleted submissions are marked", kills, completed, len(sim.Deleted("a")))
}

// TestDeletionsAndPrivacyAsAUserWould runs the commands as the README
// gives them: sync, reconcile (the view leaves deleted rows out), status,
// forget by e-mail (a backfill does not bring the rows back), and a field
// policy that keeps e-mails and phones out of the database file.
func TestDeletionsAndPrivacyAsAUserWould(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	sim := apisim.New(apisim.Options{Seed: 42, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 300})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "formsync.db")
	env := baseEnv(srv.URL, "contact", db, t.TempDir())
	run(t, bin, env, "sync")
	sim.Delete("contact", 20)
	out := run(t, bin, env, "reconcile", "--form", "contact")
	if !strings.Contains(out, "20 rows newly marked deleted upstream") {
		t.Errorf("reconcile output does not say what it marked:\n%s", out)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var inView, inTable, marked int
	if err := conn.QueryRow(`SELECT (SELECT count(*) FROM form_contact), (SELECT count(*) FROM submissions), (SELECT count(deleted_at) FROM submissions)`).Scan(&inView, &inTable, &marked); err != nil {
		t.Fatal(err)
	}
	if inView != 280 || inTable != 300 || marked != 20 {
		t.Errorf("view %d rows, table %d, marked %d; want 280, 300, 20", inView, inTable, marked)
	}
	var st []struct {
		Deleted         int64      `json:"deleted_upstream"`
		Rows            int64      `json:"rows"`
		LastReconcileAt *time.Time `json:"last_reconcile_at"`
	}
	if err := json.Unmarshal([]byte(run(t, bin, env, "status", "--json")), &st); err != nil || len(st) != 1 || st[0].Deleted != 20 || st[0].Rows != 280 || st[0].LastReconcileAt == nil {
		t.Errorf("status --json: %+v (%v)", st, err)
	}

	// Forget one person by e-mail; a backfill of the whole form does not
	// bring them back.
	var email string
	live := sim.Submissions("contact")
	var fields map[string]string
	json.Unmarshal(live[10].Fields, &fields)
	email = fields["email"]
	dry := run(t, bin, env, "forget", "--form", "contact", "--field", "email="+email, "--dry-run")
	if !strings.Contains(dry, strconv.FormatInt(live[10].ID, 10)) {
		t.Errorf("forget --dry-run does not list submission %d:\n%s", live[10].ID, dry)
	}
	run(t, bin, env, "forget", "--form", "contact", "--field", "email="+email)
	run(t, bin, env, "backfill", "--form", "contact")
	var left int
	if err := conn.QueryRow(`SELECT count(*) FROM submissions WHERE json_extract(fields, '$.email') = ?`, email).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows with the forgotten e-mail after a backfill (%v)", left, err)
	}

	// A field policy, in a new database: no clear e-mail or phone in it.
	key := filepath.Join(dir, "hash-key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db2 := filepath.Join(dir, "private.db")
	env2 := baseEnv(srv.URL, "contact", db2, t.TempDir(), "FORMSYNC_FIELD_POLICY=email=hash,phone=drop")
	cmd := exec.Command(bin, "sync")
	cmd.Env = env2
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "FORMSYNC_FIELD_HASH_KEY_FILE") {
		t.Errorf("a policy that hashes ran without a key file: %v\n%s", err, out)
	}
	env2 = append(env2, "FORMSYNC_FIELD_HASH_KEY_FILE="+key)
	run(t, bin, env2, "sync")
	data, err := os.ReadFile(db2)
	if err != nil {
		t.Fatal(err)
	}
	if wal, err := os.ReadFile(db2 + "-wal"); err == nil {
		data = append(data, wal...)
	}
	for _, s := range live {
		var f map[string]string
		json.Unmarshal(s.Fields, &f)
		for _, n := range []string{"email", "phone"} {
			if v := f[n]; v != "" && strings.Contains(string(data), v) {
				t.Fatalf("the database file holds %s %q in clear", n, v)
			}
		}
	}
	// Forgetting by a hashed field needs the policy the rows were stored
	// under: without it nothing would match, and the erasure look done.
	env3 := baseEnv(srv.URL, "contact", db2, t.TempDir())
	if out, code := runCode(t, bin, env3, "forget", "--form", "contact", "--field", "email="+email); code != 1 || !strings.Contains(out, "field policy") {
		t.Errorf("forget --field without the form's field policy: exit %d, want 1 naming the policy:\n%s", code, out)
	}
	if dry := run(t, bin, env2, "forget", "--form", "contact", "--field", "email="+email, "--dry-run"); !strings.Contains(dry, strconv.FormatInt(live[10].ID, 10)) {
		t.Errorf("forget --field under the form's policy does not find submission %d:\n%s", live[10].ID, dry)
	}
	// A mistyped form is refused, not tombstoned.
	if out, code := runCode(t, bin, env2, "forget", "--form", "contcat", "--key", "1001"); code != 2 || !strings.Contains(out, "no such form") {
		t.Errorf("forget in a form never synced: exit %d, want 2:\n%s", code, out)
	}

	// The README's openssl line gives the hash stored for an address.
	if _, err := exec.LookPath("openssl"); err == nil {
		sh := exec.Command("sh", "-c", `printf '%s' "$1" | openssl dgst -sha256 -hmac "$(cat "$2")" | awk '{print $NF}'`, "sh", email, key)
		hexOut, err := sh.Output()
		if err != nil {
			t.Fatal(err)
		}
		conn2, err := sql.Open("sqlite", db2)
		if err != nil {
			t.Fatal(err)
		}
		defer conn2.Close()
		var n int
		conn2.QueryRow(`SELECT count(*) FROM submissions WHERE json_extract(fields, '$.email') = ?`, strings.TrimSpace(string(hexOut))).Scan(&n)
		if n == 0 {
			t.Errorf("the README's openssl command gives %s, which no stored e-mail hash equals", strings.TrimSpace(string(hexOut)))
		}
	}
}
