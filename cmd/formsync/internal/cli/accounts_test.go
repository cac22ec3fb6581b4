package cli

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/metrics"
)

// accountForms are the forms of the two simulated accounts.
var accountForms = map[string][]string{"acme": {"a1", "a2"}, "globex": {"g1", "g2", "g3"}}

// statusRecorder counts, by form, the requests answered 401.
type statusRecorder struct {
	h  http.Handler
	mu sync.Mutex
	// unauthorized counts the 401s by form.
	unauthorized map[string]int
}

type recordingWriter struct {
	http.ResponseWriter
	status int
}

func (w *recordingWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
	s.h.ServeHTTP(rw, r)
	if rw.status == http.StatusUnauthorized {
		form, _ := formOfTestPath(r.URL.Path)
		s.mu.Lock()
		s.unauthorized[form]++
		s.mu.Unlock()
	}
}

func formOfTestPath(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "/api/forms/")
	id, ok2 := strings.CutSuffix(rest, "/submissions")
	return id, ok && ok2
}

// accountsEnv serves the two accounts, each accepting only its own token,
// writes their tokens into a token directory as a mounted Secret holds
// them, and sets the environment of a sync of all their forms.
func accountsEnv(t *testing.T, globex apisim.Options) (*apisim.Accounts, *statusRecorder, string) {
	t.Helper()
	clearEnv(t)
	acme := apisim.Options{Seed: 1, Variant: apisim.Newer, Token: "acme-token-1234", Forms: accountForms["acme"], SubmissionsPerForm: 230}
	globex.Seed, globex.Variant, globex.Token, globex.Forms = 2, apisim.Newer, "globex-token-5678", accountForms["globex"]
	globex.SubmissionsPerForm = 230
	sims := apisim.NewAccounts(map[string]apisim.Options{"acme": acme, "globex": globex})
	rec := &statusRecorder{h: sims, unauthorized: map[string]int{}}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	// A mounted Secret: each key a link into a hidden, timestamped
	// directory, and ..data beside them.
	data := filepath.Join(dir, "..2026_11_26_16_00_00.000000001")
	must(t, os.Mkdir(data, 0o700))
	must(t, os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")))
	must(t, os.WriteFile(filepath.Join(data, "acme"), []byte("\ufeffacme-token-1234\n"), 0o600)) // an editor's BOM
	must(t, os.WriteFile(filepath.Join(data, "globex"), []byte("  globex-token-5678\r\n"), 0o600))
	for _, name := range []string{"acme", "globex"} {
		must(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}

	db := filepath.Join(t.TempDir(), "f.db")
	t.Setenv("FORMSYNC_API_BASE_URL", srv.URL)
	t.Setenv("FORMSYNC_API_TOKEN_DIR", dir)
	t.Setenv("FORMSYNC_FORMS", "acme:a1,acme:a2,globex:g1,globex:g2,globex:g3")
	t.Setenv("FORMSYNC_SQLITE_PATH", db)
	t.Setenv("FORMSYNC_RATE_LIMIT", "1000")
	t.Setenv("FORMSYNC_TMP_DIR", t.TempDir())
	return sims, rec, db
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// storedIDs are the submission ids stored for form, in order, duplicates
// kept.
func storedIDs(t *testing.T, db, form string) []int64 {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT submission_id FROM submissions WHERE form_id = ? ORDER BY submission_id`, form)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// servedIDs are the ids the simulator serves for form, sorted.
func servedIDs(sim *apisim.Server, form string) []int64 {
	var ids []int64
	for _, s := range sim.Submissions(form) {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestAccountsSyncEachFormWithItsOwnToken: one deployment syncs the forms
// of two accounts into the same tables, every form exactly, and no request
// reaches a form with the other account's token.
func TestAccountsSyncEachFormWithItsOwnToken(t *testing.T) {
	sims, rec, db := accountsEnv(t, apisim.Options{})
	code, _, errOut := run(t, "sync")
	if code != exitOK {
		t.Fatalf("sync: exit %d, want %d\n%s", code, exitOK, errOut)
	}
	for name, forms := range accountForms {
		sim := sims.Server(name)
		for _, f := range forms {
			if diff := diff(servedIDs(sim, f), storedIDs(t, db, f)); diff != "" {
				t.Errorf("account %s form %s: stored ids differ from served (-served +stored):\n%s", name, f, diff)
			}
		}
		if n := sim.Stats().ByStatus[http.StatusUnauthorized]; n != 0 {
			t.Errorf("account %s answered %d requests 401", name, n)
		}
	}
	if c := sims.Crossed(); len(c) != 0 {
		t.Errorf("requests reached a form with another account's token: %+v", c)
	}
	if len(rec.unauthorized) != 0 {
		t.Errorf("401s: %v", rec.unauthorized)
	}
	for _, want := range []string{`"form":"a1","account":"acme"`, `"form":"g3","account":"globex"`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the log lacks %s:\n%s", want, errOut)
		}
	}
	for _, tok := range []string{"acme-token-1234", "globex-token-5678"} {
		if strings.Contains(errOut, tok) {
			t.Errorf("the log holds a token")
		}
	}

	code, out, errOut := run(t, "status", "--json")
	var got []formStatus
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil {
		t.Fatalf("status --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	accounts := map[string]string{}
	for _, s := range got {
		accounts[s.Form] = s.Account
	}
	want := map[string]string{"a1": "acme", "a2": "acme", "g1": "globex", "g2": "globex", "g3": "globex"}
	if diff := diff(want, accounts); diff != "" {
		t.Errorf("status --json accounts (-want +got):\n%s", diff)
	}
	// The status pod mounts no Secret: the directory's path, in the
	// ConfigMap, is enough to read FORMSYNC_FORMS's accounts.
	t.Setenv("FORMSYNC_API_TOKEN_DIR", filepath.Join(t.TempDir(), "not-mounted"))
	if code, out, errOut := run(t, "status"); code != exitOK || !strings.HasPrefix(out, "ACCOUNT") || !strings.Contains(out, "globex") {
		t.Errorf("status: exit %d, want an ACCOUNT column:\n%s%s", code, out, errOut)
	}
}

// TestAccountsRevokedTokenFailsOnlyItsAccount: one account's token revoked
// during the run fails that account's forms after one request each; the
// other account's forms commit exactly; the run exits 1.
func TestAccountsRevokedTokenFailsOnlyItsAccount(t *testing.T) {
	// globex's token is revoked once it has served one page: its forms
	// have three pages each.
	sims, rec, db := accountsEnv(t, apisim.Options{RevokeAfter: 1})
	code, _, errOut := run(t, "sync")
	if code != exitFailed {
		t.Fatalf("sync: exit %d, want %d\n%s", code, exitFailed, errOut)
	}
	acme, globex := sims.Server("acme"), sims.Server("globex")
	for _, f := range accountForms["acme"] {
		if diff := diff(servedIDs(acme, f), storedIDs(t, db, f)); diff != "" {
			t.Errorf("acme form %s: stored ids differ from served (-served +stored):\n%s", f, diff)
		}
	}
	for _, f := range accountForms["globex"] {
		if n := rec.unauthorized[f]; n > 1 {
			t.Errorf("globex form %s: %d requests answered 401, want at most one", f, n)
		}
	}
	if n := globex.Stats().ByStatus[http.StatusUnauthorized]; n < 1 || n > len(accountForms["globex"]) {
		t.Errorf("globex answered %d requests 401, want 1 to %d", n, len(accountForms["globex"]))
	}
	if n := acme.Stats().ByStatus[http.StatusUnauthorized]; n != 0 {
		t.Errorf("acme answered %d requests 401", n)
	}
	if c := sims.Crossed(); len(c) != 0 {
		t.Errorf("requests reached a form with another account's token: %+v", c)
	}
	if !strings.Contains(errOut, `"message":"the API rejected an account's token: its forms failed, the other accounts' forms went on","account":"globex"`) {
		t.Errorf("the log does not say globex's token was rejected:\n%s", errOut)
	}

	code, out, _ := run(t, "status", "--json")
	var got []formStatus
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil {
		t.Fatalf("status --json: exit %d, %v", code, err)
	}
	for _, s := range got {
		failed := s.LastError != "" || s.LastSuccessAt == nil
		if want := s.Account == "globex"; failed != want {
			t.Errorf("form %s of %s: failed %v (last error %q), want %v", s.Form, s.Account, failed, s.LastError, want)
		}
		if s.Account == "globex" && s.Watermark != nil {
			t.Errorf("form %s of globex: the watermark moved to %v", s.Form, s.Watermark)
		}
	}
}

// TestAccountsCheck: env -check refuses what the accounts' configuration
// lacks, every problem at once, and warns of a token file no form uses.
func TestAccountsCheck(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "acme"), []byte("tok-a\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "initech"), []byte("tok-i\n"), 0o600))
	t.Setenv("FORMSYNC_API_BASE_URL", "https://api.example.com")
	t.Setenv("FORMSYNC_API_TOKEN_DIR", dir)

	t.Setenv("FORMSYNC_FORMS", "acme:f1,globex:f3")
	code, out, errOut := run(t, "env", "-check", "sync")
	if code != exitUsage || !strings.Contains(errOut, "account globex has no token file") {
		t.Errorf("an account without a token file: exit %d, want %d naming it\n%s%s", code, exitUsage, out, errOut)
	}

	t.Setenv("FORMSYNC_FORMS", "acme:f1,f2,acme:f3,globex:f3,../x:f4")
	t.Setenv("FORMSYNC_API_TOKEN", "tok")
	code, _, errOut = run(t, "env", "-check", "sync")
	for _, want := range []string{
		`entry 2 "f2" names no account`,
		`form id "f3" is configured under accounts acme and globex`,
		`account "../x" is not a token file name`,
		"FORMSYNC_API_TOKEN_DIR and FORMSYNC_API_TOKEN or FORMSYNC_API_TOKEN_FILE are all set",
	} {
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, want %d and %q:\n%s", code, exitUsage, want, errOut)
		}
	}
	os.Unsetenv("FORMSYNC_API_TOKEN")

	t.Setenv("FORMSYNC_FORMS", "acme:f1,acme:f2")
	code, out, errOut = run(t, "env", "-check", "sync")
	if code != exitOK || !strings.Contains(out, "token files no form uses (initech)") {
		t.Errorf("an unused token file: exit %d, want %d and a warning naming it\n%s%s", code, exitOK, out, errOut)
	}
	if code, out, _ := run(t, "env"); code != exitOK || !strings.Contains(out, "FORMSYNC_FORMS=acme:f1,acme:f2\n") {
		t.Errorf("env shows FORMSYNC_FORMS other than as written: exit %d\n%s", code, out)
	}

	// A backfill takes its form's account from FORMSYNC_FORMS.
	if code, _, errOut := run(t, "backfill", "--form", "f9", "--dry-run"); code != exitUsage || !strings.Contains(errOut, `form "f9" has no account`) {
		t.Errorf("backfill of a form of no account: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
}

// TestAccountsShardByFormID: sharding splits the forms by id, whatever
// their account, so that a form stays on its shard when accounts come.
func TestAccountsShardByFormID(t *testing.T) {
	clearEnv(t)
	t.Setenv("FORMSYNC_API_TOKEN_DIR", t.TempDir())
	t.Setenv("FORMSYNC_FORMS", "acme:f1,acme:f2,globex:f3,globex:f4,acme:f5")
	t.Setenv("FORMSYNC_SHARD_COUNT", "2")
	ids := []string{"f1", "f2", "f3", "f4", "f5"}
	var all []string
	for i := range 2 {
		t.Setenv("FORMSYNC_SHARD_INDEX", string(rune('0'+i)))
		cfg, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		got := shardForms(cfg)
		if diff := diff(worker.Shard(ids, i, 2), got); diff != "" {
			t.Errorf("shard %d (-by id +got):\n%s", i, diff)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	if diff := diff(ids, all); diff != "" {
		t.Errorf("the shards do not hold every form once (-want +got):\n%s", diff)
	}
}

// TestAccountFormWithoutTokenDirRefused: without FORMSYNC_API_TOKEN_DIR
// an account:form entry has no account to read it through; taken as a
// form id, colon included, it would be read and listed as a form that
// does not exist. Every command that reads FORMSYNC_FORMS refuses it.
func TestAccountFormWithoutTokenDirRefused(t *testing.T) {
	apiEnv(t)
	// Loopback, and nothing listens there: were the entry let through, no
	// request would leave the machine.
	t.Setenv("FORMSYNC_API_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("FORMSYNC_FORMS", "acme:contact,f2")
	t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "f.db"))
	for _, args := range [][]string{{"env", "-check", "sync"}, {"env", "-check", "status"}, {"status"}, {"sync"}} {
		code, _, errOut := run(t, args...)
		if code != exitUsage || !strings.Contains(errOut, `entry 1 "acme:contact" is written account:form, which needs FORMSYNC_API_TOKEN_DIR`) {
			t.Errorf("%v: exit %d, want %d naming FORMSYNC_API_TOKEN_DIR\n%s", args, code, exitUsage, errOut)
		}
	}
	t.Setenv("FORMSYNC_FORMS", "contact,f2")
	if code, _, errOut := run(t, "env", "-check", "sync"); code != exitOK {
		t.Errorf("bare form ids: exit %d\n%s", code, errOut)
	}
}

// TestAccountsTokenProblemsListedWithTheRest: a token file the client
// would refuse (two lines, a "Bearer " prefix) is a configuration problem
// listed with every other, naming the variable, the account and the file,
// by env -check too; an account with no form id after it is said so.
func TestAccountsTokenProblemsListedWithTheRest(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "acme"), []byte("tok-a\ntok-b\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "globex"), []byte("Bearer tok-g\n"), 0o600))
	t.Setenv("FORMSYNC_API_BASE_URL", "http://127.0.0.1:1") // loopback, nothing listens
	t.Setenv("FORMSYNC_API_TOKEN_DIR", dir)
	t.Setenv("FORMSYNC_FORMS", "acme:f1,globex:g1")
	t.Setenv("FORMSYNC_PAGE_SIZE", "0")
	for _, args := range [][]string{{"env", "-check", "sync"}, {"sync"}} {
		code, out, errOut := run(t, args...)
		for _, want := range []string{
			"FORMSYNC_PAGE_SIZE=",
			fmt.Sprintf("FORMSYNC_API_TOKEN_DIR=%q: account acme (file %s)", dir, filepath.Join(dir, "acme")),
			fmt.Sprintf("FORMSYNC_API_TOKEN_DIR=%q: account globex (file %s)", dir, filepath.Join(dir, "globex")),
		} {
			if code != exitUsage || !strings.Contains(errOut, want) {
				t.Errorf("%v: exit %d, want %d and %q:\n%s%s", args, code, exitUsage, want, out, errOut)
			}
		}
		if strings.Contains(errOut+out, "tok-") {
			t.Errorf("%v: a token is shown:\n%s%s", args, out, errOut)
		}
	}

	must(t, os.WriteFile(filepath.Join(dir, "acme"), []byte("tok-a\n"), 0o600))
	must(t, os.Remove(filepath.Join(dir, "globex")))
	t.Setenv("FORMSYNC_PAGE_SIZE", "")
	t.Setenv("FORMSYNC_FORMS", "acme:f1,acme:")
	code, _, errOut := run(t, "env", "-check", "sync")
	if want := `entry 2 "acme:" has no form id after the account acme`; code != exitUsage || !strings.Contains(errOut, want) || strings.Contains(errOut, "extra comma") {
		t.Errorf("acme: exit %d, want %d and %q, not an extra comma:\n%s", code, exitUsage, want, errOut)
	}
}

// diff says how got differs from want, "" when equal.
func diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return fmt.Sprintf("want %v\ngot  %v", want, got)
}

// TestAccountsRotatedTokenIsPickedUp: in `formsync run`, a rejected
// account's forms fail without a request while its token file is
// unchanged, and the next sync uses the token the file holds once it
// changes (a rotated Secret), with the log redacting it.
func TestAccountsRotatedTokenIsPickedUp(t *testing.T) {
	sims, _, db := accountsEnv(t, apisim.Options{})
	dir := os.Getenv("FORMSYNC_API_TOKEN_DIR")
	globexFile := filepath.Join(dir, "..data", "globex")
	must(t, os.WriteFile(globexFile, []byte("globex-revoked-0000\n"), 0o600))

	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(needs("run")); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	e := newEnv(&logs, &logs, cfg) // the redactor and logger Main makes
	m := metrics.New()
	p, err := wire(t.Context(), e, shardForms(cfg), m)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	globex := sims.Server("globex")
	pass := func() *worker.Report {
		t.Helper()
		rep, err := p.engine.Sync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		p.renewRejected(e, rep.Rejected)
		return rep
	}

	if rep := pass(); rep.Rejected["globex"] == nil {
		t.Fatalf("a wrong globex token was not rejected: %v", rep.Err())
	}
	before := globex.Stats().Requests
	if rep := pass(); rep.Rejected["globex"] == nil {
		t.Fatal("globex's token, unchanged, was accepted")
	}
	if n := globex.Stats().Requests - before; n != 0 {
		t.Errorf("with its token file unchanged, globex got %d requests, want none", n)
	}

	must(t, os.WriteFile(globexFile, []byte("globex-token-5678\n"), 0o600)) // rotated
	p.renewRejected(e, map[string]error{"globex": errors.New("rejected")})
	if rep := pass(); rep.Err() != nil {
		t.Fatalf("after the rotation: %v", rep.Err())
	}
	for _, f := range accountForms["globex"] {
		if d := diff(servedIDs(globex, f), storedIDs(t, db, f)); d != "" {
			t.Errorf("globex form %s after the rotation: %s", f, d)
		}
	}
	for _, tok := range []string{"globex-token-5678", "globex-revoked-0000", "acme-token-1234"} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the log holds a token")
		}
	}
}
