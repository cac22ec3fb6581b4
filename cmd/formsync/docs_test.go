package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/zetasql"
)

// The doc test: every shell and SQL block of README.md and docs/*.md runs
// as written, so that a documented command or query cannot drift from
// the product. A block is run unless docSkips lists it, with why.

// docSkips lists the blocks that cannot run here, keyed by docBlock.key:
// the file and the block's first line of code (comments and repeated
// spaces left out), so the key survives edits elsewhere in the file and
// a new or changed block runs by default. An entry that matches no block
// fails the test.
var docSkips = map[string]string{
	"README.md: go test ./...":                                          "runs the whole test suite, this test included",
	"README.md: CGO_ENABLED=0 go install ./cmd/formsync":                "installs into GOBIN and builds with cgo off (about a minute); the test builds formsync once and puts it on PATH",
	"README.md: export FORMSYNC_API_BASE_URL=https://forms.example.com": "needs an account of the real form service (HTTPS API, a token)",
	"README.md: gcloud auth application-default login":                  "needs Google Cloud",
	"README.md: formsync dbt":                                           "installs dbt from PyPI and runs it (dbt-bigquery needs Google Cloud); docs/dbt.md's first block runs formsync dbt",

	"docs/bigquery.md: export FORMSYNC_SINK=bigquery FORMSYNC_BQ_PROJECT=my-project":                  "needs Google Cloud (gcloud, a project); the block after it runs the same sync against the fake",
	"docs/bigquery.md: SELECT form_id, COUNTIF(NOT is_spam) AS submissions, COUNTIF(is_spam) AS spam": bqSQL,
	"docs/bigquery.md: SELECT form_id, submission_key, created_at, deleted_at":                        bqSQL,
	"docs/bigquery.md: SELECT submission_key, created_at":                                             bqSQL,
	"docs/types.md: SELECT DATE(created_at) AS day, COUNT(*) AS answers,":                             bqSQL,

	"docs/dbt.md: export FORMSYNC_API_BASE_URL=https://forms.example.com FORMSYNC_API_TOKEN_FILE=$HOME/.formsync-token": "needs the real form service, and installs dbt from PyPI",
	"docs/dbt.md: export FORMSYNC_SINK=bigquery FORMSYNC_BQ_PROJECT=my-project":                                         "needs Google Cloud and dbt from PyPI",

	"docs/gke.md: docker build --platform linux/amd64 --build-arg VERSION=$(git describe --tags --always) -t REGION-docker.pkg.dev/PROJECT_ID/formsync/formsync:v1 .": "needs docker and a Google Cloud registry",
	"docs/gke.md: bq --location=US mk --dataset PROJECT_ID:formsync":                                                         "needs Google Cloud",
	"docs/gke.md: gcloud storage buckets create gs://BUCKET --project PROJECT_ID --location=US \\":                           "needs Google Cloud",
	"docs/gke.md: gcloud iam service-accounts add-iam-policy-binding formsync@PROJECT_ID.iam.gserviceaccount.com \\":         "needs Google Cloud",
	"docs/gke.md: kubectl -n NAMESPACE create secret generic formsync-api-token --from-file=token=/path/to/token":            "needs kubectl and a cluster",
	"docs/gke.md: kubectl -n NAMESPACE create secret generic formsync-field-hash-key --from-file=hash-key=/path/to/hash-key": "needs kubectl and a cluster",
	"docs/gke.md: kubectl kustomize deploy/base":                                                                             "needs kubectl and a cluster (deploy's own tests render the manifests)",
	"docs/gke.md: kubectl -n NAMESPACE apply -k deploy/backfill":                                                             "needs kubectl and a cluster",
	"docs/gke.md: kubectl -n NAMESPACE delete job formsync-status --ignore-not-found":                                        "needs kubectl and a cluster",
	"docs/gke.md: kubectl -n NAMESPACE apply -k deploy/overlays/scheduler":                                                   "needs kubectl and a cluster",
	"docs/gke.md: openssl rand -hex 24 > webhook-secret":                                                                     "needs kubectl and a cluster (docs/operations.md runs the webhook endpoint itself)",

	"docs/testing.md: go test ./...":       "runs the whole test suite, this test included",
	"docs/testing.md: go test -race ./...": "runs the whole test suite, this test included",
	"docs/testing.md: FORMSYNC_TEST_BQ_PROJECT=my-project go test ./sink/bigquery/ -run Real -v":                "needs Google Cloud",
	"docs/testing.md: go test -run='^$' -fuzz=FuzzDecodePage -fuzztime=60s ./worker/formsapi/":                  "fuzzes for minutes",
	"docs/testing.md: go test ./cmd/formsync -run '^$' -bench 'Compare/newer-1x1M$' -benchtime 3x -timeout 60m": "a benchmark of minutes",
}

// bqSQL is why BigQuery's SQL blocks are not run: there is no BigQuery
// here. In the slow run Google's ZetaSQL analyzer checks every statement
// of them against the tables and views the fake holds after the sync of
// docs/bigquery.md (the subtest "BigQuery SQL analyzed by ZetaSQL").
const bqSQL = "BigQuery SQL: needs BigQuery; the slow run has ZetaSQL analyze each statement against the tables and views the fake of docs/bigquery.md holds"

// simulatorBlock is the README block that starts the simulator and syncs
// from it: every page of docs/ runs it first, as its reader would have.
const simulatorBlock = "README.md: formsync simulate -addr 127.0.0.1:8080 -forms contact,signup,feedback -variant newer -submissions 500 &"

// docRewrites make the documented commands run here: the binaries built
// by the test stand for go run, and fixed loopback ports are replaced by
// free ones (per page; the pages run in parallel).
var docRewrites = []struct{ from, to string }{
	{"go run ./cmd/formsync", "formsync"},
	{"go run ./cmd/bqfake", "bqfake"},
}

// docPorts are the loopback addresses the docs use; each gets a free port.
var docPorts = []string{"127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:9050", "127.0.0.1:9090"}

// docRateLimit is the one FORMSYNC_* variable the documents' shells
// start with: the simulator sets no rate limit, and at the default 5
// requests a second each page's first sync would spend seconds waiting
// for its own limiter.
const docRateLimit = "FORMSYNC_RATE_LIMIT=100"

const (
	docBlockTimeout = 2 * time.Minute
	docQueryTimeout = 30 * time.Second
)

// docBlock is a fenced block of a Markdown file.
type docBlock struct {
	file string // relative to the repository root
	line int    // of the opening fence
	lang string // "sh", "sql", or what else the fence says
	text string
	key  string
}

var fenceRE = regexp.MustCompile("^( *)```([A-Za-z0-9_-]*)\\s*$")

// parseBlocks returns the fenced blocks of a Markdown file (fences may be
// indented, as in a list).
func parseBlocks(file, text string) ([]docBlock, error) {
	var out []docBlock
	var cur *docBlock
	var indent int
	var body []string
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		m := fenceRE.FindStringSubmatch(line)
		switch {
		case cur == nil && m != nil:
			cur = &docBlock{file: file, line: i + 1, lang: m[2]}
			indent, body = len(m[1]), nil
		case cur != nil && m != nil && m[2] == "":
			cur.text = strings.Join(body, "\n") + "\n"
			key := file + ": " + firstCodeLine(cur.lang, body)
			seen[key]++
			cur.key = key
			if n := seen[key]; n > 1 {
				cur.key += fmt.Sprintf(" (%d)", n) // the n-th block that begins so
			}
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, strings.TrimPrefix(line, strings.Repeat(" ", indent)))
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a block is not closed", file, cur.line)
	}
	return out, nil
}

// firstCodeLine is a block's first line that is not a comment, without its
// trailing comment and with its spaces collapsed.
func firstCodeLine(lang string, lines []string) string {
	for _, l := range lines {
		l = stripComment(lang, l)
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			return l
		}
	}
	return ""
}

func stripComment(lang, l string) string {
	mark := "#"
	if lang == "sql" {
		mark = "--"
	}
	if strings.HasPrefix(strings.TrimSpace(l), mark) {
		return ""
	}
	if i := strings.Index(l, " "+mark+" "); i >= 0 {
		return l[:i]
	}
	return l
}

func isShell(lang string) bool { return lang == "sh" || lang == "bash" || lang == "shell" }

// docFiles are the documents the test runs: README.md first, then docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	slices.Sort(pages)
	out := []string{"README.md"}
	for _, p := range pages {
		out = append(out, filepath.ToSlash(filepath.Join("docs", filepath.Base(p))))
	}
	return out
}

// bqfakeBinary builds cmd/bqfake beside the formsync binary, once.
var bqfakeBinary = sync.OnceValues(func() (string, error) {
	bin, err := binary()
	if err != nil {
		return "", err
	}
	out := filepath.Join(filepath.Dir(bin), "bqfake")
	args := append(append([]string{"build"}, raceFlags...), "-o", out, "../bqfake")
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ../bqfake: %w\n%s", err, b)
	}
	return out, nil
})

// docCounts is what a document's run did.
type docCounts struct {
	shellRun, sqlBlocksRun, queries int
	skipped                         []string
}

// TestDocsRunAsWritten runs every shell and SQL block of README.md and
// docs/*.md. Each document's shell blocks run top to bottom in one bash,
// in a temporary directory (HOME too), with the test's formsync and
// bqfake on PATH and no FORMSYNC_* variable set but docRateLimit.
// README.md runs first (it runs the demo and starts the simulator); each
// page of docs/ then runs the README's simulator block, as its reader
// would have, and its own blocks. Of a skipped block, the export and
// unset lines run. A shell block fails when a command of it fails (bash's
// ERR trap, with pipefail), when it ends with a non-zero status, or when
// it runs longer than docBlockTimeout. A SQL block runs where it stands,
// statement by statement, on the document's formsync.db (the simulator's
// rows) and on the README's formsync-demo.db (the demo's), and every
// statement must return a row unless its comment says it may be empty.
// BigQuery's SQL is analyzed by ZetaSQL in the slow run.
func TestDocsRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, the simulator and every documented command")
	}
	t.Parallel()
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the documented commands use it", tool)
		}
	}
	start := time.Now()
	bin := buildBinary(t)
	if _, err := bqfakeBinary(); err != nil {
		t.Fatal(err)
	}
	t.Logf("formsync and bqfake built in %s", time.Since(start).Round(100*time.Millisecond))

	docs := map[string][]docBlock{}
	used := map[string]bool{}
	var setup *docBlock
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseBlocks(f, string(b))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = blocks
		for i, bl := range blocks {
			if _, ok := docSkips[bl.key]; ok {
				used[bl.key] = true
			}
			if bl.key == simulatorBlock {
				setup = &blocks[i]
			}
		}
	}
	for k := range docSkips {
		if !used[k] {
			t.Errorf("docSkips lists %q, which no block of the docs begins with: update the list", k)
		}
	}
	if setup == nil {
		t.Fatalf("README.md has no block %q: the pages of docs/ start from it", simulatorBlock)
	}

	start = time.Now()
	readmeDir := t.TempDir()
	readme := runDoc(t, bin, "README.md", readmeDir, nil, docs["README.md"], filepath.Join(readmeDir, "formsync-demo.db"), nil)
	demoDB := filepath.Join(readmeDir, "formsync-demo.db")
	if _, err := os.Stat(demoDB); err != nil {
		t.Fatalf("README.md's blocks made no demo file: %v", err)
	}

	t.Logf("README.md ran in %s", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	var mu sync.Mutex
	counts := map[string]docCounts{"README.md": readme}
	var bqTables []zetasql.Table // what the BigQuery fake of docs/bigquery.md holds
	t.Run("docs", func(t *testing.T) {
		for _, f := range docFiles(t)[1:] {
			t.Run(filepath.Base(f), func(t *testing.T) {
				t.Parallel()
				var after func(map[string]string)
				if f == bqFakePage && enginetest.SlowTests() {
					after = func(ports map[string]string) {
						tables := fakeTables(t, ports[bqFakeAddr], bqProject, bqDataset)
						mu.Lock()
						bqTables = tables
						mu.Unlock()
					}
				}
				c := runDoc(t, bin, f, t.TempDir(), setup, docs[f], demoDB, after)
				mu.Lock()
				counts[f] = c
				mu.Unlock()
			})
		}
	})

	t.Logf("docs/ ran in %s", time.Since(start).Round(100*time.Millisecond))
	var shell, sqlBlocks, queries, skipped int
	for _, f := range docFiles(t) {
		c := counts[f]
		shell, sqlBlocks, queries, skipped = shell+c.shellRun, sqlBlocks+c.sqlBlocksRun, queries+c.queries, skipped+len(c.skipped)
		t.Logf("%s: %d shell blocks run, %d SQL blocks run (%d statements, each on 2 files), %d skipped", f, c.shellRun, c.sqlBlocksRun, c.queries, len(c.skipped))
		for _, s := range c.skipped {
			t.Logf("  skipped %s", s)
		}
	}
	t.Logf("in all: %d shell blocks and %d SQL blocks (%d statements) run, %d blocks skipped", shell, sqlBlocks, queries, skipped)

	t.Run("BigQuery SQL analyzed by ZetaSQL", func(t *testing.T) {
		enginetest.Slow(t, "installs the ZetaSQL analyzer from npm, 354 MB, once")
		if len(bqTables) == 0 {
			t.Fatalf("%s's BigQuery fake held no table to check the BigQuery queries against", bqFakePage)
		}
		analyzeBigQuerySQL(t, docs, bqTables)
	})
}

// The BigQuery fake that docs/bigquery.md starts, whose tables and views
// (made by a sync of the README's simulator forms) are the catalog the
// docs' BigQuery queries are checked against.
const (
	bqFakePage = "docs/bigquery.md"
	bqFakeAddr = "127.0.0.1:9050"
	bqProject  = "my-project"
	bqDataset  = "formsync"
)

// fakeTables reads the schema of every table and view of a dataset of the
// BigQuery fake at addr (tables.list, then tables.get), as ZetaSQL tables.
func fakeTables(t *testing.T, addr, project, dataset string) []zetasql.Table {
	t.Helper()
	base := "http://" + addr + "/bigquery/v2/projects/" + project + "/datasets/" + dataset + "/tables"
	var list struct {
		Tables []struct {
			TableReference struct {
				TableID string `json:"tableId"`
			} `json:"tableReference"`
		} `json:"tables"`
	}
	getJSON(t, base, &list)
	var out []zetasql.Table
	for _, tb := range list.Tables {
		var tbl struct {
			Schema struct{ Fields []bqField } `json:"schema"`
		}
		getJSON(t, base+"/"+tb.TableReference.TableID, &tbl)
		out = append(out, zetasql.Table{Name: project + "." + dataset + "." + tb.TableReference.TableID, Columns: zetaColumns(tbl.Schema.Fields)})
	}
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), docQueryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// bqField is a column of a BigQuery table as the REST API gives it.
type bqField struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Mode   string    `json:"mode"`
	Fields []bqField `json:"fields"`
}

func zetaColumns(fields []bqField) []zetasql.Column {
	var out []zetasql.Column
	for _, f := range fields {
		out = append(out, zetasql.Column{Name: f.Name, Type: zetaType(f)})
	}
	return out
}

// zetaType is a BigQuery column type as the analyzer takes it.
func zetaType(f bqField) any {
	var typ any
	switch f.Type {
	case "INTEGER":
		typ = "INT64"
	case "FLOAT", "FLOAT64":
		typ = "DOUBLE"
	case "BOOLEAN":
		typ = "BOOL"
	case "RECORD", "STRUCT":
		var members []map[string]any
		for _, m := range f.Fields {
			members = append(members, map[string]any{"name": m.Name, "type": zetaType(m)})
		}
		typ = map[string]any{"struct": members}
	default: // STRING, INT64, NUMERIC, DATE, TIMESTAMP, JSON, BOOL, ...
		typ = f.Type
	}
	if f.Mode == "REPEATED" {
		return map[string]any{"array": typ}
	}
	return typ
}

// analyzeBigQuerySQL has ZetaSQL check every statement of the docs' SQL
// blocks that names a table of bqProject, against tables and the columns
// of BigQuery's job history that the docs read.
func analyzeBigQuerySQL(t *testing.T, docs map[string][]docBlock, tables []zetasql.Table) {
	t.Helper()
	tables = append(tables, zetasql.Table{Name: bqProject + ".region-us.INFORMATION_SCHEMA.JOBS", Columns: []zetasql.Column{
		{Name: "job_id", Type: "STRING"}, {Name: "creation_time", Type: "TIMESTAMP"}, {Name: "total_bytes_processed", Type: "INT64"},
		{Name: "total_bytes_billed", Type: "INT64"},
	}})
	var scripts []zetasql.Script
	where := map[string]string{}
	for _, f := range docFiles(t) {
		for _, b := range docs[f] {
			if b.lang != "sql" || !strings.Contains(b.text, "`"+bqProject+".") {
				continue
			}
			for i, stmt := range splitSQL(b.text) {
				name := fmt.Sprintf("%s:%d statement %d", b.file, b.line, i+1)
				scripts = append(scripts, zetasql.Script{Name: name, SQL: stmt})
				where[name] = stmt
			}
		}
	}
	if len(scripts) == 0 {
		t.Fatal("no BigQuery SQL in the docs: the extraction is broken")
	}
	results := zetasql.Analyze(t, zetasql.Request{Tables: tables, Params: []zetasql.Column{}, Scripts: scripts})
	if len(results) != len(scripts) {
		t.Fatalf("the analyzer answered %d of %d statements", len(results), len(scripts))
	}
	for _, r := range results {
		if !r.OK {
			t.Errorf("%s: ZetaSQL refuses it: %s\n%s", r.Name, r.Error, where[r.Name])
		}
	}
	t.Logf("%d BigQuery statements of the docs analyzed by ZetaSQL against the fake's %d tables and views", len(scripts), len(tables)-1)
}

// runDoc runs the shell and SQL blocks of one document in dir, after
// setup when it is not nil; SQL blocks also run on demoDB. after, when not
// nil, is called once the blocks ran, while what they started in the
// background still runs, with the free address of each of docPorts.
func runDoc(t *testing.T, bin, file, dir string, setup *docBlock, blocks []docBlock, demoDB string, after func(ports map[string]string)) docCounts {
	t.Helper()
	var c docCounts
	type step struct {
		b       docBlock
		envOnly bool // a skipped block's export and unset lines
	}
	var steps []step
	runs := false
	for _, b := range blocks {
		if !isShell(b.lang) && b.lang != "sql" {
			continue
		}
		why, skip := docSkips[b.key]
		if !skip {
			steps, runs = append(steps, step{b: b}), true
			continue
		}
		if env := envLines(b); isShell(b.lang) && env != "" {
			// A reader who ran the block has its variables set: the
			// blocks after it must work with them.
			why += " (its export and unset lines run)"
			eb := b
			eb.text = env
			steps = append(steps, step{b: eb, envOnly: true})
		}
		c.skipped = append(c.skipped, fmt.Sprintf("%s (line %d): %s", b.key, b.line, why))
	}
	if !runs {
		return c
	}
	rewrite, ports := docRewriter(t)
	sh := startShell(t, bin, dir)
	defer sh.close()
	if setup != nil && !sh.run(t, *setup, rewrite) {
		t.Fatalf("%s: the README's simulator block, which the page starts from, failed", file)
	}
	for _, s := range steps {
		switch {
		case s.envOnly:
			sh.run(t, s.b, rewrite)
		case isShell(s.b.lang):
			sh.run(t, s.b, rewrite)
			c.shellRun++
		default:
			c.queries += runSQL(t, s.b, filepath.Join(dir, "formsync.db"), demoDB)
			c.sqlBlocksRun++
		}
	}
	if after != nil {
		after(ports)
	}
	return c
}

// envLines are the lines of a shell block that set or unset variables
// (export, unset; PATH excepted), comments left out.
func envLines(b docBlock) string {
	var out []string
	for _, l := range strings.Split(b.text, "\n") {
		l = strings.TrimSpace(stripComment(b.lang, l))
		// PATH stays the test's: its binaries come first.
		if (strings.HasPrefix(l, "export ") || strings.HasPrefix(l, "unset ")) && !strings.HasPrefix(l, "export PATH=") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

// docRewriter replaces go run by the built binaries and the docs' fixed
// loopback ports by free ones; it returns the free address of each.
func docRewriter(t *testing.T) (*strings.Replacer, map[string]string) {
	t.Helper()
	ports := map[string]string{}
	var pairs []string
	for _, r := range docRewrites {
		pairs = append(pairs, r.from, r.to)
	}
	for _, addr := range docPorts {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		free := ln.Addr().String()
		ln.Close()
		pairs = append(pairs, addr, free)
		ports[addr] = free
	}
	return strings.NewReplacer(pairs...), ports
}

// docShell is one bash that runs a document's blocks in turn: each block
// is sent on its stdin; bash reports each failed command (ERR trap) and
// the end of the block on fd 3.
type docShell struct {
	cmd    *exec.Cmd
	stdin  interface{ Write([]byte) (int, error) }
	status chan string
	logs   string
	n      int
	once   sync.Once
}

func startShell(t *testing.T, bin, dir string) *docShell {
	t.Helper()
	logs := t.TempDir() // each block's output, out of the documents' way
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "FORMSYNC_"), strings.HasSuffix(strings.ToLower(name), "_proxy"), name == "HOME", name == "PATH":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+dir, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NO_PROXY=*", "no_proxy=*", docRateLimit)
	cmd := exec.Command("bash", "--noprofile", "--norc", "-s")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{w}
	out, err := os.Create(filepath.Join(logs, "bash.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sh := &docShell{cmd: cmd, stdin: stdin, status: make(chan string), logs: logs}
	go func() {
		defer close(sh.status)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			sh.status <- sc.Text()
		}
	}()
	t.Cleanup(sh.close)
	// pipefail: a failing command inside a pipeline fails the block too.
	fmt.Fprintf(stdin, "set -o pipefail\n")
	fmt.Fprintf(stdin, "trap 'printf \"failed (exit %%s): %%s\\n\" \"$?\" \"$BASH_COMMAND\" >&3' ERR\n")
	return sh
}

// run runs one block and fails t when a command of it failed; it reports
// whether none did.
func (sh *docShell) run(t *testing.T, b docBlock, rewrite *strings.Replacer) bool {
	t.Helper()
	sh.n++
	log := filepath.Join(sh.logs, fmt.Sprintf("%02d.log", sh.n))
	// The block's own status counts too: a command that fails before
	// && or || does not run the ERR trap.
	fmt.Fprintf(sh.stdin, "{\n%s\n} >%q 2>&1 </dev/null\nprintf 'done %%s\\n' \"$?\" >&3\n", rewrite.Replace(b.text), log)
	var failed []string
	timeout := time.After(docBlockTimeout)
	for {
		select {
		case line, ok := <-sh.status:
			if !ok {
				t.Fatalf("%s:%d: bash ended in the block\n%s", b.file, b.line, readLog(log))
			}
			code, done := strings.CutPrefix(line, "done ")
			if !done {
				failed = append(failed, line)
				continue
			}
			if code != "0" && len(failed) == 0 {
				failed = append(failed, "the block ended with exit "+code)
			}
			if len(failed) > 0 {
				t.Errorf("%s:%d: %s\n%s", b.file, b.line, strings.Join(failed, "\n"), readLog(log))
			}
			return len(failed) == 0
		case <-timeout:
			sh.close()
			t.Fatalf("%s:%d: the block ran for more than %s\n%s", b.file, b.line, docBlockTimeout, readLog(log))
		}
	}
}

// close ends the bash and everything it started in the background.
func (sh *docShell) close() {
	sh.once.Do(func() {
		if c, ok := sh.stdin.(interface{ Close() error }); ok {
			c.Close()
		}
		syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		sh.cmd.Wait()
	})
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	const max = 4000
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return string(b)
}

// runSQL runs each statement of a SQL block on each of the files and
// returns the number of statements.
func runSQL(t *testing.T, b docBlock, files ...string) int {
	t.Helper()
	stmts := splitSQL(b.text)
	if len(stmts) == 0 {
		t.Errorf("%s:%d: a SQL block without a statement", b.file, b.line)
	}
	for _, file := range files {
		db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			n, err := countQuery(db, s)
			switch {
			case err != nil:
				t.Errorf("%s:%d: on %s: %v\n%s", b.file, b.line, filepath.Base(file), err, s)
			case n == 0 && !mayBeEmpty(s):
				t.Errorf("%s:%d: on %s: no rows (say \"may be empty\" in its comment if that is expected)\n%s", b.file, b.line, filepath.Base(file), s)
			}
		}
		db.Close()
	}
	return len(stmts)
}

func countQuery(db *sql.DB, q string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), docQueryTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

func mayBeEmpty(stmt string) bool { return strings.Contains(strings.ToLower(stmt), "may be empty") }

// splitSQL splits a block into its statements: each ends with a line
// whose code ends with ";". A statement keeps the comments before it.
func splitSQL(text string) []string {
	var out []string
	var cur []string
	code := false
	for _, l := range strings.Split(text, "\n") {
		cur = append(cur, l)
		c := strings.TrimSpace(stripComment("sql", l))
		if c != "" {
			code = true
		}
		if strings.HasSuffix(c, ";") {
			out = append(out, strings.TrimSpace(strings.Join(cur, "\n")))
			cur, code = nil, false
		}
	}
	if code {
		out = append(out, strings.TrimSpace(strings.Join(cur, "\n")))
	}
	return out
}
