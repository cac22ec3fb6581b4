// Package zetasql has Google's ZetaSQL analyzer, BigQuery's SQL front
// end, check SQL text with BigQuery's types and maximum language
// features, from a test. The analyzer comes prebuilt (a local gRPC
// server and its Node client) in an npm package that Analyze installs
// once into the user's cache directory: it needs node and npm, and the
// tests that use it are slow ones (enginetest.Slow).
//
//	results := zetasql.Analyze(t, zetasql.Request{
//		Tables:  []zetasql.Table{{Name: "p.d.t", Columns: []zetasql.Column{{Name: "a", Type: "STRING"}}}},
//		Scripts: []zetasql.Script{{Name: "q", SQL: "SELECT a FROM `p.d.t`"}},
//	})
//	for _, r := range results { ... r.OK, r.Error ... }
//
// analyze.js is the driver; see its comment for the request's shape.
// Both drivers start the server with server.js, which waits for it.
// Evaluate runs evaluate.js, ZetaSQL's reference implementation, to
// compute expressions rather than check them.
package zetasql

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Package is the npm package that ships the analyzer.
const Package = "@fivetrandevelopers/zetasql@1.13.0"

//go:embed analyze.js
var driver []byte

// starter is server.js, which the drivers require to start the server.
//
//go:embed server.js
var starter []byte

// Request is what the analyzer is given: a catalog of tables, query
// parameters and the scripts to analyze. A type is "STRING", "INT64",
// "BOOL", "TIMESTAMP", "JSON" (any ZetaSQL TypeKind without its TYPE_
// prefix: "NUMERIC", "DATE"), {"array": <type>} or {"struct":
// [{"name": ..., "type": ...}]}.
type Request struct {
	Tables  []Table  `json:"tables"`
	Params  []Column `json:"params"`
	Scripts []Script `json:"scripts"`
}

// Table is a table of the catalog, by its full name ("project.dataset.t").
type Table struct {
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
}

// Column is a column or a query parameter and its type.
type Column struct {
	Name string `json:"name"`
	Type any    `json:"type"`
}

// Script is one SQL text, analyzed statement by statement.
type Script struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// Result is the analyzer's answer for one script: OK, or the Error of the
// statement (Statements+1) at byte At that it refused.
type Result struct {
	Name       string `json:"name"`
	OK         bool   `json:"ok"`
	Error      string `json:"error"`
	At         int    `json:"at"`
	Statements int    `json:"statements"`
}

// Analyze has the analyzer check every script of req (a Request, or any
// value that marshals to its JSON) and returns its answers, in the
// scripts' order. It skips tb when node or npm is missing, and fails it
// when the analyzer cannot run.
func Analyze(tb testing.TB, req any) []Result {
	tb.Helper()
	return decodeLines[Result](tb, "analyzer", run(tb, "analyzer", driver, req))
}

// decodeLines reads out, a driver's answer: one JSON value a line.
func decodeLines[T any](tb testing.TB, what string, out []byte) []T {
	tb.Helper()
	var res []T
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s output %q: %v", what, sc.Text(), err)
		}
		res = append(res, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return res
}

// run runs script, a driver of the npm package, with req as its JSON
// input, and returns what it wrote. It skips tb when node or npm is
// missing, and fails it when the script cannot run.
func run(tb testing.TB, what string, script []byte, req any) []byte {
	tb.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		tb.Skip("node or npm not found: skipping the ZetaSQL " + what)
	}
	modules := Modules(tb, npm)
	dir := tb.TempDir()
	path := filepath.Join(dir, what+".js")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.js"), starter, 0o644); err != nil {
		tb.Fatal(err)
	}
	in, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(tb.Context(), node, path, modules)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("running the ZetaSQL %s: %v\n%s", what, err, stderr.String())
	}
	return out
}

// Modules returns a node_modules directory holding the analyzer package,
// installing it into the user's cache directory when missing.
func Modules(tb testing.TB, npm string) string {
	tb.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "formsync-zetasql", strings.NewReplacer("@", "_", "/", "_").Replace(Package))
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@fivetrandevelopers", "zetasql", "package.json")); err == nil {
		return modules
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		tb.Fatal(err)
	}
	// Installed beside its final place, then renamed: a test run
	// interrupted mid-install, or two running at once, never leave a half
	// installed package where the next run looks.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	tb.Logf("installing %s into %s (once; a minute or so)", Package, dir)
	cmd := exec.CommandContext(tb.Context(), npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save", Package)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("npm install %s: %v\n%s", Package, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(modules, "@fivetrandevelopers", "zetasql", "package.json")); serr != nil {
			tb.Fatalf("moving the installed analyzer into place: %v", err)
		}
	}
	return modules
}

//go:embed evaluate.js
var evaluator []byte

// Value is what the reference implementation answered for one STRING
// expression: its Value (nil for NULL), or the Error it raised.
type Value struct {
	Value *string `json:"value"`
	Error string  `json:"error"`
}

// Evaluate computes each of exprs, STRING expressions of GoogleSQL, with
// ZetaSQL's reference implementation (the functions BigQuery runs), and
// returns their values in order. It skips tb when node or npm is missing.
// The evaluator's default time zone is America/Los_Angeles, not UTC.
func Evaluate(tb testing.TB, exprs []string) []Value {
	tb.Helper()
	res := decodeLines[Value](tb, "evaluator", run(tb, "evaluator", evaluator, map[string]any{"exprs": exprs}))
	if len(res) != len(exprs) {
		tb.Fatalf("%d answers from the evaluator for %d expressions", len(res), len(exprs))
	}
	return res
}
