package bigquery

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/zetasql"
)

// TestZetaSQLAcceptsEverySQLText feeds every SQL text the sink can send
// (the golden files, and views of forms and fields with hostile names) to
// the ZetaSQL analyzer, BigQuery's SQL front end, with BigQuery's column
// and parameter types and maximum language features. Two probes that
// BigQuery rejects must be rejected, proving the check can fail.
//
// It needs node and npm; the package (about 90 MB to download, 340 MB
// installed) is installed once into the user's cache directory, which
// takes a minute or so the first time; afterwards the test takes about a
// second.
func TestZetaSQLAcceptsEverySQLText(t *testing.T) {
	// The default run downloads nothing but Go modules.
	enginetest.Slow(t, "installs the ZetaSQL analyzer from npm, 354 MB, once")
	t.Parallel()

	type script struct {
		Name string `json:"name"`
		SQL  string `json:"sql"`
	}
	var scripts []script
	for name, sql := range goldenStatements() {
		scripts = append(scripts, script{name, sql})
	}
	for i, h := range hostile {
		scripts = append(scripts, script{fmt.Sprintf("view of hostile form %d", i), viewSQL("my-project", "formsync", h, hostile)})
		// The same names, each of a type (in turn, from the i-th).
		types := fieldtype.Columns{Seen: fieldtype.Set{}}
		for j, f := range hostile {
			types.Seen[f] = fieldtype.Types()[(i+j)%len(fieldtype.Types())]
		}
		scripts = append(scripts, script{fmt.Sprintf("typed view of hostile form %d", i), viewSQL("my-project", "formsync", h, hostile, types)})
	}
	for i, q := range readmeQueries(t) {
		scripts = append(scripts, script{fmt.Sprintf("README query %d", i+1), q})
	}
	// Probes BigQuery refuses: each must fail. Each changes one statement
	// of a golden script, the last of its kind, so that a refusal shows
	// the analyzer reached it.
	golden := goldenStatements()
	probes := map[string]string{
		"probe: JSON in ORDER BY": "SELECT form_id FROM `my-project.formsync.submissions` ORDER BY fields",
	}
	for _, p := range []struct{ name, file, old, new string }{
		{"probe: commit script naming a column that does not exist, in its last statement", "commit.sql",
			"SELECT form_id, COUNTIF(action = 'insert') AS inserted", "SELECT form_id, COUNTIF(actions = 'insert') AS inserted"},
		{"probe: reconcile UPDATE naming a column the plan does not have", "commit_deletions.sql",
			"FROM _formsync_plan AS p WHERE p.form_id = t.form_id AND p.submission_key", "FROM _formsync_plan AS p WHERE p.form_id = t.form_id AND p.match_key"},
		{"probe: forget DELETE naming a member @forget does not have", "write_state_deletions.sql",
			"f.form_id = t.form_id AND f.submission_key", "f.form = t.form_id AND f.submission_key"},
		{"probe: remove script resetting a column sync_state does not have", "remove_rows.sql",
			"max_submission_id = NULL", "max_submission = NULL"},
		{"probe: find hashing JSON rather than its string", "find_field.sql", "SHA256(JSON_VALUE(fields[@field]))", "SHA256(fields[@field])"},
		{"probe: typed view whose array column defaults to an array of another type", "view_typed.sql",
			"HAVING COUNTIF(e IS NULL) = 0), [])", "HAVING COUNTIF(e IS NULL) = 0), [1])"},
		{"probe: forget deleting copies by a column the copies table does not have", "write_state_deletions.sql",
			"f.form_id = c.form_id AND f.submission_key = c.submission_key", "f.form_id = c.form_id AND f.submission_key = c.key"},
		{"probe: file rows ordering by a column the copies do not have", "file_rows.sql", "c.url\n", "c.uri\n"},
		{"probe: files view joining copies on a column they do not have", "view_files.sql",
			"c.url = v.url", "c.name = v.url"},
		// Why the files view reads keys from the JSON text: this analyzer
		// has no JSON_KEYS.
		{"probe: files view listing keys with JSON_KEYS", "view_files.sql",
			"UNNEST(REGEXP_EXTRACT_ALL(TO_JSON_STRING(s.files), r'\"(?:[^\"\\\\]|\\\\.)*\":?')) AS t", "UNNEST(JSON_KEYS(s.files, 1)) AS t"},
	} {
		sql := golden[p.file]
		i := strings.LastIndex(sql, p.old)
		if i < 0 {
			t.Fatalf("%s: %q is not in %s", p.name, p.old, p.file)
		}
		probes[p.name] = sql[:i] + p.new + sql[i+len(p.old):]
	}
	for name, sql := range probes {
		scripts = append(scripts, script{name, sql})
	}

	tbl := goldenTables()
	req := map[string]any{
		"tables": []map[string]any{
			{"name": strings.Trim(tbl.Submissions, "`"), "columns": zetaColumns(submissionsSchema())},
			{"name": strings.Trim(tbl.State, "`"), "columns": zetaColumns(stateSchema())},
			{"name": strings.Trim(tbl.Staging, "`"), "columns": zetaColumns(stagingSchema())},
			{"name": strings.Trim(tbl.Lock, "`"), "columns": zetaColumns(lockSchema())},
			{"name": strings.Trim(tbl.Tombstones, "`"), "columns": zetaColumns(tombstonesSchema())},
			{"name": strings.Trim(tbl.Copies, "`"), "columns": zetaColumns(fileCopiesSchema())},
			// The submission_files view, as tables.get shows its columns
			// (the README's queries read it).
			{"name": "my-project.formsync." + filesView, "columns": zetaColumns(bq.Schema{
				{Name: "form_id", Type: bq.StringFieldType}, {Name: "submission_key", Type: bq.StringFieldType},
				{Name: "submission_id", Type: bq.IntegerFieldType}, {Name: "input", Type: bq.StringFieldType},
				{Name: "position", Type: bq.IntegerFieldType}, {Name: "name", Type: bq.StringFieldType},
				{Name: "url", Type: bq.StringFieldType}, {Name: "size", Type: bq.IntegerFieldType},
				{Name: "type", Type: bq.StringFieldType},
				{Name: "object_uri", Type: bq.StringFieldType}, {Name: "sha256", Type: bq.StringFieldType},
				{Name: "stored_size", Type: bq.IntegerFieldType}, {Name: "content_type", Type: bq.StringFieldType},
				{Name: "stored_at", Type: bq.TimestampFieldType}, {Name: "not_stored_reason", Type: bq.StringFieldType},
			})},
			// The columns of BigQuery's job history the README's queries
			// use, as BigQuery documents them.
			{"name": "my-project.region-us.INFORMATION_SCHEMA.JOBS", "columns": zetaColumns(bq.Schema{
				{Name: "job_id", Type: bq.StringFieldType}, {Name: "creation_time", Type: bq.TimestampFieldType},
				{Name: "total_bytes_processed", Type: bq.IntegerFieldType},
				{Name: "total_bytes_billed", Type: bq.IntegerFieldType},
			})},
		},
		"params":  zetaParams(),
		"scripts": scripts,
	}
	seen := map[string]bool{}
	for _, r := range zetasql.Analyze(t, req) {
		seen[r.Name] = true
		_, probe := probes[r.Name]
		switch {
		case probe && r.OK:
			t.Errorf("%s: accepted, but BigQuery refuses it", r.Name)
		case probe:
			t.Logf("%s: refused as it should be: %s", r.Name, r.Error)
		case !r.OK:
			t.Errorf("%s: ZetaSQL refuses statement %d (byte %d): %s", r.Name, r.Statements+1, r.At, r.Error)
		case strings.HasSuffix(r.Name, ".sql") || strings.HasPrefix(r.Name, "README"):
			t.Logf("%s: %d statements accepted", r.Name, r.Statements)
		}
	}
	for _, s := range scripts {
		if !seen[s.Name] {
			t.Errorf("%s: no answer from the analyzer", s.Name)
		}
	}
}

// readmeQueries are the BigQuery statements the README gives users, one by
// one: those of its sql blocks that name the dataset's tables (the per-form
// views are not in the analyzer's catalog).
func readmeQueries(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "bigquery.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, block := range strings.Split(string(readme), "```sql\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for _, stmt := range strings.Split(block, ";\n") {
			if strings.Contains(stmt, "`my-project.formsync.") && !strings.Contains(stmt, "formsync.form_") {
				out = append(out, strings.TrimSpace(stmt))
			}
		}
	}
	if len(out) < 8 {
		t.Fatalf("found %d BigQuery queries in the README; the extraction is broken", len(out))
	}
	return out
}

// zetaType is a column or parameter type as analyze.js takes it.
func zetaType(typ bq.FieldType) any {
	switch typ {
	case bq.StringFieldType:
		return "STRING"
	case bq.IntegerFieldType:
		return "INT64"
	case bq.BooleanFieldType:
		return "BOOL"
	case bq.TimestampFieldType:
		return "TIMESTAMP"
	case bq.JSONFieldType:
		return "JSON"
	}
	panic("zetaType: no mapping for " + string(typ))
}

func zetaColumns(s bq.Schema) []map[string]any {
	var out []map[string]any
	for _, f := range s {
		out = append(out, map[string]any{"name": f.Name, "type": zetaType(f.Type)})
	}
	return out
}

// zetaParams are the query parameters as the client types them: @states
// from stateParam's fields, the others from their Go values.
func zetaParams() []map[string]any {
	schema, err := bq.InferSchema(stateParam{})
	if err != nil {
		panic(err)
	}
	var fields []map[string]any
	for _, f := range schema {
		fields = append(fields, map[string]any{"name": f.Name, "type": zetaType(f.Type)})
	}
	return []map[string]any{
		{"name": "states", "type": map[string]any{"array": map[string]any{"struct": fields}}},
		{"name": "synced_at", "type": "TIMESTAMP"},
		{"name": "commit_id", "type": "STRING"},
		{"name": "created_from", "type": "TIMESTAMP"},
		{"name": "created_to", "type": "TIMESTAMP"},
		{"name": "form_ids", "type": map[string]any{"array": "STRING"}},
		{"name": "outside_forms", "type": map[string]any{"array": "STRING"}},
		{"name": "bound_forms", "type": map[string]any{"array": "STRING"}},
		{"name": "outside_before", "type": "TIMESTAMP"},
		{"name": "outside_after", "type": "TIMESTAMP"},
		{"name": "form_id", "type": "STRING"},
		{"name": "revision", "type": "INT64"},
		{"name": "forget", "type": map[string]any{"array": map[string]any{"struct": []map[string]any{
			{"name": "form_id", "type": "STRING"}, {"name": "submission_key", "type": "STRING"},
		}}}},
		{"name": "reconcile_forms", "type": map[string]any{"array": "STRING"}},
		{"name": "forget_from", "type": "TIMESTAMP"},
		{"name": "reconcile_from", "type": "TIMESTAMP"},
		{"name": "reconcile_to", "type": "TIMESTAMP"},
		{"name": "forget_to", "type": "TIMESTAMP"},
		{"name": "tombstones", "type": map[string]any{"array": map[string]any{"struct": []map[string]any{
			{"name": "form_id", "type": "STRING"}, {"name": "tombstone", "type": "STRING"},
			{"name": "pending", "type": "BOOL"}, {"name": "removed", "type": "BOOL"},
		}}}},
		{"name": "keys", "type": map[string]any{"array": "STRING"}},
		{"name": "digests", "type": map[string]any{"array": "STRING"}},
		{"name": "rows", "type": map[string]any{"array": map[string]any{"struct": []map[string]any{
			{"name": "form_id", "type": "STRING"}, {"name": "submission_key", "type": "STRING"},
		}}}},
		{"name": "field", "type": "STRING"},
		{"name": "removed_from", "type": "TIMESTAMP"},
		{"name": "removed_to", "type": "TIMESTAMP"},
		{"name": "since", "type": "TIMESTAMP"},
	}
}
