package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/google/go-cmp/cmp"
	"github.com/kelseyhightower/envconfig"
)

// TestEveryProblemAtOnce sets one bad value in each part of the
// configuration: `formsync run` must report all of them in one message,
// each under its variable, and exit 2.
func TestEveryProblemAtOnce(t *testing.T) {
	clearEnv(t)
	for k, v := range map[string]string{
		"FORMSYNC_API_BASE_URL":    "http://forms.example.com", // not loopback
		"FORMSYNC_API_TOKEN_FILE":  filepath.Join(t.TempDir(), "missing"),
		"FORMSYNC_FORMS":           "contact,,..,a/b,contact",
		"FORMSYNC_PAGE_SIZE":       "many",
		"FORMSYNC_CONCURRENCY":     "0",
		"FORMSYNC_RATE_LIMIT":      "fast",
		"FORMSYNC_REQUEST_TIMEOUT": "30",
		"FORMSYNC_LOOKBACK":        "1d",
		"FORMSYNC_SINK":            "postgres",
		"FORMSYNC_SCHEDULE":        "every hour",
		"FORMSYNC_SYNC_AT_START":   "maybe",
		"FORMSYNC_HTTP_ADDR":       "9090",
		"FORMSYNC_SHARD_COUNT":     "x",
		"FORMSYNC_LOG_FORMAT":      "xml",
		"FORMSYNC_LOG_LEVEL":       "loud",
		"FORMSYNC_BACKOFF_MAX":     "1ms",
	} {
		t.Setenv(k, v)
	}
	code, out, errOut := run(t, "run")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitUsage, out, errOut)
	}
	for _, want := range []string{
		`FORMSYNC_API_BASE_URL="http://forms.example.com": the API base URL`, "plain http",
		"FORMSYNC_API_TOKEN_FILE=", "no such file",
		"FORMSYNC_FORMS: entry 2 is empty", `FORMSYNC_FORMS: entry 3 ".." is not a form id`, `entry 4 "a/b" contains a slash`, `form id "contact" is listed twice`,
		`FORMSYNC_PAGE_SIZE="many": not a whole number`,
		`FORMSYNC_CONCURRENCY="0": must be above 0`,
		`FORMSYNC_RATE_LIMIT="fast": not a number`,
		`FORMSYNC_REQUEST_TIMEOUT="30": a duration needs a unit`,
		`FORMSYNC_LOOKBACK="1d": not a duration`,
		`FORMSYNC_SINK="postgres" is not a sink`,
		`FORMSYNC_SCHEDULE="every hour" is not a cron spec`,
		`FORMSYNC_SYNC_AT_START="maybe": use true or false`,
		`FORMSYNC_HTTP_ADDR="9090": not host:port`,
		`FORMSYNC_SHARD_COUNT="x": not a whole number`,
		`FORMSYNC_LOG_FORMAT="xml": not`[:len(`FORMSYNC_LOG_FORMAT="xml"`)],
		`FORMSYNC_LOG_LEVEL="loud": use debug, info, warn or error`,
		`FORMSYNC_BACKOFF_MAX=1ms is under 100ms`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the problem list lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "envconfig") || strings.Contains(errOut, "strconv") {
		t.Errorf("the problem list speaks in a library's words:\n%s", errOut)
	}
}

// apiEnv clears the environment and sets what every command reading the
// API needs: a base URL, a token and a form.
func apiEnv(t *testing.T) {
	t.Helper()
	clearEnv(t)
	t.Setenv("FORMSYNC_API_BASE_URL", "https://api.example.com")
	t.Setenv("FORMSYNC_API_TOKEN", "t")
	t.Setenv("FORMSYNC_FORMS", "a")
}

// TestLibraryProblemsNameTheVariable: the client and the engine check their
// own settings; their problems reach the user under the variable.
func TestLibraryProblemsNameTheVariable(t *testing.T) {
	apiEnv(t)
	t.Setenv("FORMSYNC_PAGE_SIZE", "101")
	t.Setenv("FORMSYNC_LOOKBACK", "-1h")
	t.Setenv("FORMSYNC_RATE_LIMIT", "-2")
	t.Setenv("FORMSYNC_MAX_WAIT", "-1s")
	code, _, errOut := run(t, "env", "-check", "sync")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{
		`FORMSYNC_PAGE_SIZE="101": 101 is outside 1..100`,
		`FORMSYNC_LOOKBACK="-1h": -1h0m0s is negative`,
		`FORMSYNC_RATE_LIMIT="-2": rate limit`,
		`FORMSYNC_MAX_WAIT="-1s": max wait`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("lacks %q:\n%s", want, errOut)
		}
	}
}

func TestTokenFileProblems(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	spaced := filepath.Join(dir, "spaced")
	os.WriteFile(spaced, []byte("Bearer abc\n"), 0o600)
	for file, want := range map[string]string{
		spaced:                        "whitespace",
		"/dev/zero":                   "more than 64 KiB",
		empty:                         "is empty",
		filepath.Join(dir, "missing"): "no such file",
		dir:                           "cannot read the file",
	} {
		clearEnv(t)
		t.Setenv("FORMSYNC_API_BASE_URL", "https://forms.example.com")
		t.Setenv("FORMSYNC_FORMS", "a")
		t.Setenv("FORMSYNC_API_TOKEN_FILE", file)
		code, _, errOut := run(t, "sync")
		if code != exitUsage || !strings.Contains(errOut, "FORMSYNC_API_TOKEN_FILE") || !strings.Contains(errOut, want) {
			t.Errorf("token file %s: exit %d, want 2 and %q:\n%s", file, code, want, errOut)
		}
	}
}

// TestCommandsReadOnlyTheirVariables: a malformed variable fails only the
// commands that read it.
func TestCommandsReadOnlyTheirVariables(t *testing.T) {
	clearEnv(t)
	t.Setenv("FORMSYNC_PAGE_SIZE", "many")
	t.Setenv("FORMSYNC_LOG_LEVEL", "loud")
	t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "ignored.db"))
	if code, out, errOut := run(t, "version"); code != 0 || !strings.HasPrefix(out, "formsync ") {
		t.Errorf("version: exit %d, %q %q", code, out, errOut)
	}
	db := filepath.Join(t.TempDir(), "demo.db")
	if code, _, errOut := run(t, "demo", "-db", db, "-submissions", "30"); code != 0 {
		t.Errorf("demo: exit %d:\n%s", code, errOut)
	}
	// status reads the sink and log settings: the log level is its problem,
	// the page size is not.
	code, _, errOut := run(t, "status")
	if code != exitUsage || !strings.Contains(errOut, "FORMSYNC_LOG_LEVEL") || strings.Contains(errOut, "FORMSYNC_PAGE_SIZE") {
		t.Errorf("status: exit %d:\n%s", code, errOut)
	}
	// Nor is the engine's concurrency forget's.
	t.Setenv("FORMSYNC_LOG_LEVEL", "info")
	t.Setenv("FORMSYNC_PAGE_SIZE", "500")
	t.Setenv("FORMSYNC_CONCURRENCY", "-1")
	t.Setenv("FORMSYNC_FORMS", "a")
	t.Setenv("FORMSYNC_SQLITE_PATH", db) // forget opens only a store a sync wrote
	if code, _, errOut := run(t, "forget", "--form", "a", "--key", "1", "--dry-run"); code != 0 {
		t.Errorf("forget with reading settings it does not read out of range: exit %d:\n%s", code, errOut)
	}
}

// TestWordsInAnyCase: the words of FORMSYNC_SINK, FORMSYNC_LOG_FORMAT and
// FORMSYNC_LOG_LEVEL are read in any case; a word that is none of them is
// quoted as written.
func TestWordsInAnyCase(t *testing.T) {
	clearEnv(t)
	db := filepath.Join(t.TempDir(), "demo.db")
	if code, _, errOut := run(t, "demo", "-db", db, "-submissions", "30"); code != 0 {
		t.Fatalf("demo: exit %d:\n%s", code, errOut)
	}
	t.Setenv("FORMSYNC_SQLITE_PATH", db)
	t.Setenv("FORMSYNC_SINK", "SQLite")
	t.Setenv("FORMSYNC_LOG_FORMAT", "TEXT")
	t.Setenv("FORMSYNC_LOG_LEVEL", "Debug")
	code, out, errOut := run(t, "status")
	if code != 0 {
		t.Fatalf("status: exit %d:\n%s%s", code, out, errOut)
	}
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	newLogger(&logged, cfg).Debug("hello")
	if !strings.Contains(logged.String(), "level=DEBUG msg=hello") {
		t.Errorf("FORMSYNC_LOG_FORMAT=TEXT, FORMSYNC_LOG_LEVEL=Debug logged %q", logged.String())
	}
	t.Setenv("FORMSYNC_LOG_FORMAT", "Yaml")
	if code, _, errOut := run(t, "status"); code != exitUsage || !strings.Contains(errOut, `FORMSYNC_LOG_FORMAT="Yaml"`) {
		t.Errorf("status with FORMSYNC_LOG_FORMAT=Yaml: exit %d:\n%s", code, errOut)
	}
}

// TestStagingAndPushgatewayCheckedUpFront: a staging directory that does
// not exist, or a Pushgateway URL no push can reach, is a configuration
// problem of the commands that read the API, not a failure of every run.
func TestStagingAndPushgatewayCheckedUpFront(t *testing.T) {
	apiEnv(t)
	t.Setenv("FORMSYNC_TMP_DIR", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("FORMSYNC_PUSHGATEWAY_URL", "pg:9091")
	code, _, errOut := run(t, "env", "-check", "sync")
	if code != exitUsage || !strings.Contains(errOut, "FORMSYNC_TMP_DIR=") || !strings.Contains(errOut, `FORMSYNC_PUSHGATEWAY_URL="pg:9091" is not an http(s) URL`) {
		t.Errorf("env -check sync: exit %d:\n%s", code, errOut)
	}
	// A directory nothing can be written in (a read-only root filesystem
	// without its emptyDir) failed every form of every run, exit 1, with
	// an error about a spool file rather than the variable.
	if fi, err := os.Stat("/proc"); err == nil && fi.IsDir() {
		t.Setenv("FORMSYNC_TMP_DIR", "/proc")
		t.Setenv("FORMSYNC_PUSHGATEWAY_URL", "")
		if code, _, errOut := run(t, "env", "-check", "sync"); code != exitUsage || !strings.Contains(errOut, `FORMSYNC_TMP_DIR="/proc"`) {
			t.Errorf("env -check sync with a staging directory nothing can be written in: exit %d:\n%s", code, errOut)
		}
	}
	t.Setenv("FORMSYNC_TMP_DIR", t.TempDir())
	t.Setenv("FORMSYNC_PUSHGATEWAY_URL", "http://pushgateway:9091")
	if code, _, errOut := run(t, "env", "-check", "sync"); code != 0 {
		t.Errorf("env -check sync with both right: exit %d:\n%s", code, errOut)
	}
}

// TestOnlyPrefixedNames: envconfig also reads the unprefixed name; formsync
// does not.
func TestOnlyPrefixedNames(t *testing.T) {
	clearEnv(t)
	t.Setenv("PAGE_SIZE", "7")
	t.Setenv("LOG_LEVEL", "loud")
	c, err := LoadConfig()
	if err != nil || c.PageSize != 100 || c.LogLevel != "info" {
		t.Errorf("page size %d, log level %q, %v: the unprefixed names were read", c.PageSize, c.LogLevel, err)
	}
}

// TestDefaultsAreTheLibraries: the binary's defaults for the API client,
// the engine and the BigQuery sink are the libraries' own.
func TestDefaultsAreTheLibraries(t *testing.T) {
	c := defaultConfig()
	client, err := formsapi.New(formsapi.Config{BaseURL: "https://x.example", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	lib := client.Config()
	got := []any{c.RequestTimeout, c.RateLimit, c.MaxWait, c.MaxRetryAfter, c.BackoffInitial, c.BackoffMax,
		c.PageSize, c.Concurrency, c.FormTimeout, c.ShutdownTimeout, c.BQTimeout, c.BQJobTimeout, c.BQPartRows}
	want := []any{lib.RequestTimeout, lib.RateLimit, lib.MaxWait, lib.MaxRetryAfter, lib.InitialBackoff, lib.MaxBackoff,
		worker.DefaultPageSize, worker.DefaultConcurrency, worker.DefaultFormTimeout, worker.DefaultShutdownGrace,
		bigquery.DefaultTimeout, bigquery.DefaultJobTimeout, bigquery.DefaultPartRows}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("default %d: cli %v, library %v", i, got[i], want[i])
		}
	}
	if len(c.problems) != 0 {
		t.Errorf("the defaults do not parse: %v", c.problems)
	}
}

func TestHelpAndEnvShowDefaults(t *testing.T) {
	clearEnv(t)
	_, out, _ := run(t, "help")
	if !regexp.MustCompile(`FORMSYNC_SHARD_INDEX\s+JOB_COMPLETION_INDEX, else 0`).MatchString(out) || strings.Contains(out, "-1 ") {
		t.Errorf("help does not show the shard index default:\n%s", out)
	}
	code, out, errOut := run(t, "env")
	if code != 0 {
		t.Fatalf("env: exit %d %s", code, errOut)
	}
	for _, want := range []string{"FORMSYNC_SHUTDOWN_TIMEOUT=20s\n", "FORMSYNC_MAX_RETRY_AFTER=1m\n", "FORMSYNC_SHARD_INDEX=0\n", "FORMSYNC_PAGE_SIZE=100\n", "FORMSYNC_SYNC_AT_START=true\n", "FORMSYNC_TMP_DIR=" + os.TempDir() + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %q:\n%s", want, out)
		}
	}
	t.Setenv("FORMSYNC_PAGE_SIZE", "many")
	if code, _, errOut := run(t, "env"); code != exitUsage || !strings.Contains(errOut, "FORMSYNC_PAGE_SIZE") {
		t.Errorf("env with a malformed value: exit %d, %s", code, errOut)
	}
}

// TestURLPasswordsAreSecrets: a password in a URL setting (a Pushgateway
// behind basic auth, credentials pasted into the API base URL) is printed
// neither by `env` nor in a configuration problem.
func TestURLPasswordsAreSecrets(t *testing.T) {
	apiEnv(t)
	t.Setenv("FORMSYNC_API_BASE_URL", "https://bob:hunter2@api.example.com")
	t.Setenv("FORMSYNC_PUSHGATEWAY_URL", "https://u:pgsecret@pg.example:9091")
	_, out, errOut := run(t, "env")
	code, checkOut, checkErr := run(t, "env", "-check", "sync")
	if code != exitUsage {
		t.Errorf("env -check sync with credentials in the base URL: exit %d, want %d", code, exitUsage)
	}
	for _, text := range []string{out, errOut, checkOut, checkErr} {
		if strings.Contains(text, "hunter2") || strings.Contains(text, "pgsecret") {
			t.Errorf("a URL's password is printed:\n%s", text)
		}
	}
	if !strings.Contains(out, "FORMSYNC_PUSHGATEWAY_URL=https://u:xxxxx@pg.example:9091\n") {
		t.Errorf("env does not show the Pushgateway URL, password redacted:\n%s", out)
	}
}

// TestBigQuerySettingsCheckedUpFront: a BigQuery setting the sink would
// refuse when it opens is a configuration problem (exit 2, under its
// variable), found by env -check before any connection.
func TestBigQuerySettingsCheckedUpFront(t *testing.T) {
	apiEnv(t)
	t.Setenv("FORMSYNC_SINK", "bigquery")
	t.Setenv("FORMSYNC_BQ_PROJECT", "my-project")
	t.Setenv("FORMSYNC_BQ_DATASET", "form-sync")
	code, _, errOut := run(t, "env", "-check", "sync")
	if code != exitUsage || !strings.Contains(errOut, `FORMSYNC_BQ_DATASET="form-sync": "form-sync" is not a dataset name`) || strings.Contains(errOut, "staging dataset") {
		t.Errorf("env -check sync with a dataset BigQuery refuses: exit %d:\n%s", code, errOut)
	}
}

func TestFormIDs(t *testing.T) {
	for _, ok := range []string{"contact", "abc123", "a.b", "..a", "form-1_x"} {
		if msg := formIDProblem(ok); msg != "" {
			t.Errorf("%q refused: %s", ok, msg)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a b", "a\tb", "a\xffb", "\xc3"} {
		if formIDProblem(bad) == "" {
			t.Errorf("%q accepted", bad)
		}
	}
	if p := formIDProblems([]string{"a", "b", "a"}, false); len(p) != 1 {
		t.Errorf("a repeated id: %q", p)
	}
}

// TestFormIDNotUTF8Refused: a form id that is not valid UTF-8 would be
// stored by a sink and never found again, so the configuration check
// refuses it, quoted so that the bytes can be seen, before any sink opens.
func TestFormIDNotUTF8Refused(t *testing.T) {
	apiEnv(t)
	t.Setenv("FORMSYNC_FORMS", "contact,sign\xffup,caf\u00e9")
	code, _, errOut := run(t, "env", "-check", "sync")
	if code != exitUsage || !strings.Contains(errOut, `FORMSYNC_FORMS: entry 2 "sign\xffup" is not valid UTF-8`) {
		t.Errorf("env -check sync with a form id that is not UTF-8: exit %d:\n%s", code, errOut)
	}
	if strings.Contains(errOut, "entry 3") {
		t.Errorf("a UTF-8 id outside ASCII refused:\n%s", errOut)
	}
	code, _, errOut = run(t, "backfill", "--form", "sign\xffup")
	if code != exitUsage || !strings.Contains(errOut, `--form "sign\xffup" is not valid UTF-8`) {
		t.Errorf("backfill --form with an id that is not UTF-8: exit %d:\n%s", code, errOut)
	}
}

// TestREADMEDefaults: the README's table shows each variable's default as
// formsync help does.
func TestREADMEDefaults(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(FORMSYNC_[A-Z_]+)` \\|([^|]*)\\|")
	seen := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		seen[m[1]] = strings.TrimSpace(strings.ReplaceAll(m[2], "`", ""))
	}
	for _, f := range configFields() {
		got, ok := seen[f.env()]
		if !ok {
			continue // TestREADMEDocumentsEveryVariable reports it
		}
		if want := f.defaultText(); got != want {
			t.Errorf("README: %s default %q, formsync help says %q", f.env(), got, want)
		}
	}
	if names := slices.Sorted(func(yield func(string) bool) {
		for n := range seen {
			if !yield(n) {
				return
			}
		}
	}); len(names) != len(configFields()) {
		t.Errorf("README lists %d variables, formsync reads %d", len(names), len(configFields()))
	}
}

// TestFieldPolicyProblems: a policy that does not parse, or that hashes
// without a usable key, is refused before anything is read, by every
// command that reads the API and by forget; status does not read it.
func TestFieldPolicyProblems(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("tiny\n"), 0o600)
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("0123456789abcdef0123\n"), 0o600)
	for _, tc := range []struct {
		policy, key string
		want        []string
	}{
		{"email=hash", "", []string{"FORMSYNC_FIELD_POLICY=\"email=hash\" hashes fields: set FORMSYNC_FIELD_HASH_KEY_FILE"}},
		{"email=hash", short, []string{"FORMSYNC_FIELD_HASH_KEY_FILE=", "too short"}},
		{"email=hash", filepath.Join(dir, "missing"), []string{"FORMSYNC_FIELD_HASH_KEY_FILE=", "no such file"}},
		{"email=zap,,phone", good, []string{`unknown action "zap"`, "empty rule", `"phone"`}},
		{"email=hash,EMAIL=drop", good, []string{"already given"}},
	} {
		for _, cmd := range [][]string{{"env", "-check", "sync"}, {"env", "-check", "reconcile"}, {"forget", "--form", "a", "--key", "1"}} {
			clearEnv(t)
			t.Setenv("FORMSYNC_API_BASE_URL", "https://forms.example.com")
			t.Setenv("FORMSYNC_API_TOKEN", "tok")
			t.Setenv("FORMSYNC_FORMS", "a")
			t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(dir, "never-created.db"))
			t.Setenv("FORMSYNC_FIELD_POLICY", tc.policy)
			if tc.key != "" {
				t.Setenv("FORMSYNC_FIELD_HASH_KEY_FILE", tc.key)
			}
			code, _, errOut := run(t, cmd...)
			if code != exitUsage {
				t.Errorf("%v with policy %q key %q: exit %d, want 2\n%s", cmd, tc.policy, tc.key, code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%v with policy %q key %q: lacks %q:\n%s", cmd, tc.policy, tc.key, w, errOut)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never-created.db")); err == nil {
		t.Error("a refused forget created the database")
	}
	clearEnv(t)
	t.Setenv("FORMSYNC_FIELD_POLICY", "email=zap")
	t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(dir, "never-created.db"))
	if _, _, errOut := run(t, "status"); strings.Contains(errOut, "FIELD_POLICY") {
		t.Errorf("status reads the field policy:\n%s", errOut)
	}
	apiEnv(t)
	t.Setenv("FORMSYNC_RECONCILE_EVERY", "-24h")
	if code, _, errOut := run(t, "env", "-check", "sync"); code != exitUsage || !strings.Contains(errOut, `FORMSYNC_RECONCILE_EVERY="-24h": -24h0m0s is negative`) {
		t.Errorf("negative reconcile period: exit %d:\n%s", code, errOut)
	}
}

// TestScheduleThatCannotRun: a spec cron parses but that never fires, or an
// @every interval below cron's floor of a second (which cron runs every
// second, so "@every -5m" would sync back to back), is refused under the
// variable by `env -check run` as by `run`, before anything is opened.
func TestScheduleThatCannotRun(t *testing.T) {
	for _, spec := range []string{"0 0 30 2 *", "@every -5m", "@every 0s", "@every 500ms"} {
		apiEnv(t)
		t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "f.db"))
		t.Setenv("FORMSYNC_SCHEDULE", spec)
		t.Setenv("FORMSYNC_HTTP_ADDR", "127.0.0.1:0")
		for _, args := range [][]string{{"env", "-check", "run"}, {"run"}} {
			// Cancelled: a run that took the spec stops at once.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var out, errOut bytes.Buffer
			code := Main(ctx, args, &out, &errOut)
			if code != exitUsage || !strings.Contains(errOut.String(), `FORMSYNC_SCHEDULE="`+spec+`"`) {
				t.Errorf("FORMSYNC_SCHEDULE=%q: formsync %s exit %d, want %d naming the variable:\n%s%s", spec, strings.Join(args, " "), code, exitUsage, out.String(), errOut.String())
			}
		}
	}
	apiEnv(t)
	for _, spec := range []string{"@every 1s", "@every 5m", "@hourly", "0 0 29 2 *", "CRON_TZ=Europe/Paris */5 * * * *"} {
		t.Setenv("FORMSYNC_SCHEDULE", spec)
		if code, out, errOut := run(t, "env", "-check", "run"); code != exitOK {
			t.Errorf("FORMSYNC_SCHEDULE=%q refused (exit %d):\n%s%s", spec, code, out, errOut)
		}
	}
}

// TestStatusNeedsOnlyTheSink: status reads the sink and nothing else, so a
// pod that runs it (deploy/status) holds neither the API token nor the
// field hash key, and `env -check status` says that is enough.
func TestStatusNeedsOnlyTheSink(t *testing.T) {
	clearEnv(t)
	t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "formsync.db"))
	t.Setenv("FORMSYNC_FIELD_POLICY", "email=hash") // no key file
	if code, out, errOut := run(t, "env", "-check", "status"); code != exitOK || !strings.Contains(out, "complete for formsync status") {
		t.Errorf("env -check status: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut := run(t, "env", "-check", "sync")
	if code != exitUsage || !strings.Contains(errOut, "no API token") || !strings.Contains(errOut, "FORMSYNC_FIELD_HASH_KEY_FILE") {
		t.Errorf("env -check sync without a token or hash key: exit %d, want 2 naming both\n%s", code, errOut)
	}
	if code, _, errOut := run(t, "env", "-check", "bogus"); code != exitUsage || !strings.Contains(errOut, "reconcile, remove, run, status or sync") {
		t.Errorf("env -check bogus: exit %d, want 2 listing the commands\n%s", code, errOut)
	}
}

// TestConfigIsAnEnvconfigSpec: Config is read by formsync's own loop
// (readConfig says why), from the same tags envconfig reads: given every
// variable, well formed, envconfig.Process fills the same Config.
func TestConfigIsAnEnvconfigSpec(t *testing.T) {
	clearEnv(t)
	for _, f := range configFields() {
		v := f.def
		if v == "" {
			v = "x"
			if f.name == "FORMS" {
				v = "contact,signup"
			}
		}
		t.Setenv(f.env(), v)
	}
	got, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	var want Config
	if err := envconfig.Process(envPrefix, &want); err != nil {
		t.Fatal(err)
	}
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for _, f := range configFields() {
		if g, w := gv.Field(f.index).Interface(), wv.Field(f.index).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: formsync read %#v, envconfig %#v", f.env(), g, w)
		}
	}
}

// TestLibraryFieldsAreSet: every variable bound to a library field (its
// field tag) reaches that field, and a library's problem with the field is
// reported under the variable.
func TestLibraryFieldsAreSet(t *testing.T) {
	c := defaultConfig()
	libs := map[string]reflect.Value{
		"formsapi": reflect.ValueOf(c.clientConfig(c.APIToken, nil)),
		"worker":   reflect.ValueOf(c.engineConfig(c.Forms, nil)),
		"bigquery": reflect.ValueOf(c.bigQuery()),
	}
	cv := reflect.ValueOf(c)
	bound := 0
	for _, f := range configFields() {
		if f.lib == "" {
			continue
		}
		bound++
		if g, w := libs[f.lib].FieldByName(f.libField).Interface(), cv.Field(f.index).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s.Config.%s is %#v, the variable %#v", f.env(), f.lib, f.libField, g, w)
		}
		var p problems
		c.libraryProblems(&p, f.lib, fmt.Errorf("%s: invalid configuration: %w", f.lib, errors.Join(config.Errorf(f.libField, "is wrong"))))
		if msgs := p.byVar[f.name]; len(msgs) != 1 || !strings.HasPrefix(msgs[0], f.env()) || !strings.HasSuffix(msgs[0], ": is wrong") {
			t.Errorf("%s.Config.%s's problem reported as %q, want it under %s", f.lib, f.libField, p.byVar, f.env())
		}
	}
	if bound < 19 {
		t.Errorf("%d variables set a library field, want the 19 that do", bound)
	}
}

// TestFieldTypesProblems: pinned field types that are not JSON of the
// right shape, or name a type that is none, are refused (exit 2) by every
// command that commits, naming the form, the field and the types there
// are; pins that parse reach the engine, field names of any character
// included.
func TestFieldTypesProblems(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		pins string
		want []string
	}{
		{`contact.rating=integer`, []string{"FORMSYNC_FIELD_TYPES: not a JSON object", `{"contact":{"rating":"integer"`}},
		{`{"contact":["rating"]}`, []string{"FORMSYNC_FIELD_TYPES: not a JSON object"}},
		{`{"contact":{"rating":"int","a.b,c=\"d'":"Date"}}`, []string{`form "contact", field "rating": unknown field type "int"`,
			`form "contact", field "a.b,c=\"d'": unknown field type "Date"`, "boolean, integer, decimal, date, timestamp, array, string"}},
	} {
		for _, cmd := range [][]string{{"env", "-check", "sync"}, {"env", "-check", "backfill"}, {"forget", "--form", "a", "--key", "1"}} {
			clearEnv(t)
			t.Setenv("FORMSYNC_API_BASE_URL", "https://forms.example.com")
			t.Setenv("FORMSYNC_API_TOKEN", "tok")
			t.Setenv("FORMSYNC_FORMS", "a")
			t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(dir, "never-created.db"))
			t.Setenv("FORMSYNC_FIELD_TYPES", tc.pins)
			code, _, errOut := run(t, cmd...)
			if code != exitUsage {
				t.Errorf("%v with %s: exit %d, want 2\n%s", cmd, tc.pins, code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%v with %s: lacks %q:\n%s", cmd, tc.pins, w, errOut)
				}
			}
		}
	}

	clearEnv(t)
	t.Setenv("FORMSYNC_API_BASE_URL", "https://forms.example.com")
	t.Setenv("FORMSYNC_API_TOKEN", "tok")
	t.Setenv("FORMSYNC_FORMS", "contact")
	t.Setenv("FORMSYNC_FIELD_TYPES", `{"contact":{"zip":"string","a.b,c=\"d'":"integer"}}`)
	c, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(needs("sync")); err != nil {
		t.Fatal(err)
	}
	want := map[string]fieldtype.Set{"contact": {"zip": fieldtype.String, `a.b,c="d'`: fieldtype.Integer}}
	if diff := cmp.Diff(want, c.engineConfig(c.Forms, nil).FieldTypes); diff != "" {
		t.Errorf("the engine's pins (-want +got):\n%s", diff)
	}
}
