package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	_ "github.com/formsync/formsync/sink/sqlite" // registers the "sqlite" driver for row counts
)

// Helpers of the tests and benchmarks that run the formsync binary as a
// process against a simulator served from the test process.

// buildBinary returns formsync compiled once for this test binary, with
// its race flag (so the compiled packages of the tests are reused).
func buildBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := binary()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

var binDir string // removed by TestMain

var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "formsync-test-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "formsync")
	args := append(append([]string{"build"}, raceFlags...), "-o", bin, ".")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// baseEnv is the environment of a run against the simulator at srvURL,
// syncing forms (comma-separated) into the SQLite file db; extra entries
// come last and so override these (os/exec keeps the last of duplicates).
func baseEnv(srvURL, forms, db, tmp string, extra ...string) []string {
	env := append(os.Environ(),
		"FORMSYNC_API_BASE_URL="+srvURL, "FORMSYNC_API_TOKEN="+apisim.DefaultToken,
		"FORMSYNC_FORMS="+forms, "FORMSYNC_SQLITE_PATH="+db, "FORMSYNC_TMP_DIR="+tmp,
		"FORMSYNC_LOG_LEVEL=error")
	return append(env, extra...)
}

// countRows is the number of rows in db's submissions table, without
// creating the file; 0 before a run has created it.
func countRows(tb testing.TB, db string) int {
	tb.Helper()
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	var tables int
	if err := conn.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'submissions'`).Scan(&tables); err != nil {
		tb.Fatal(err)
	}
	if tables == 0 {
		return 0
	}
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM submissions`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
