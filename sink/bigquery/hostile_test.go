package bigquery

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink/internal/sqlname"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/bqfake"
)

var hostile = []string{
	`it's`,
	`say "hi"`,
	"back`tick`",
	`back\slash\`,
	`semi; DROP TABLE submissions; --`,
	"-- comment\nnext line",
	"tab\there\r\n",
	`'); DELETE FROM x; --`,
	`\'`,
	`\u0027`,
	"ünïcødé ✓ 🎉",
	"a  b",                        // two spaces
	strings.Repeat("long'\\", 50), // 300 characters
}

// TestHostileNamesCannotChangeStatements sends form ids and field names
// full of SQL syntax through the whole production path: every commit
// statement is fixed text (values are parameters), and each view's literals
// decode, in the fake's GoogleSQL literal parser, to exactly the original
// names.
func TestHostileNamesCannotChangeStatements(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	for _, stmt := range []string{
		render("commit", script{tables: b.sink.t, Rows: true}), render("commit", script{tables: b.sink.t, Rows: true, Deletions: true}),
		render("commit", script{tables: b.sink.t, Deletions: true}), render("writeState", script{tables: b.sink.t, TombstonesChanged: true}),
		render("readState", stateRead{tables: b.sink.t}), render("readState", stateRead{tables: b.sink.t, WithoutCopies: true}), render("viewForms", b.sink.t), render("readRows", b.sink.t), render("find", b.sink.t),
	} {
		for _, h := range hostile {
			if strings.Contains(stmt, h) {
				t.Fatalf("a statement contains user data %q", h)
			}
		}
	}
	line := regexp.MustCompile("^(CREATE OR REPLACE VIEW `[a-z0-9_.\\-]+\\.form_[a-z0-9_]+`" +
		"|OPTIONS\\(description = 'formsync: [a-z ,;]+\\. Definition [0-9a-f]{24}'\\) AS" +
		"|SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,?" +
		"|    ARRAY\\(SELECT AS STRUCT .* AS v FROM UNNEST\\(\\[" + // an array's typing: checked by columnLine
		"|      .*,?" + // a member: checked by columnLine
		"|FROM \\(" +
		"|\\)" +
		"|)$")
	// The lines of fixed text.
	inner := regexp.MustCompile("^(  t_[a-z]+\\[OFFSET\\([0-9]+\\)\\]\\.v AS `[a-z][a-z0-9_]*`,?" +
		"|    \\]\\) AS m WITH OFFSET AS o ORDER BY o\\) AS t_[a-z]+,?" +
		"|  SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,?" +
		"|  FROM `[a-z0-9_.\\-]+\\.submissions`, UNNEST\\(\\[COALESCE\\(fields_text, TO_JSON_STRING\\(fields\\)\\)\\]\\) AS d" +
		"|  WHERE form_id = '([ -&(-\\[\\]-~]|\\\\[\\\\']|\\\\u[0-9a-f]{4}|\\\\U[0-9a-f]{8})*' AND deleted_at IS NULL AND created_at " + regexp.QuoteMeta(allOfTime) +
		")$")

	at := b.t0.Add(time.Hour)
	for i, form := range hostile {
		fields := map[string]string{}
		for j, h := range hostile {
			fields[h] = strings.Repeat("v", j) + h
		}
		raw, _ := json.Marshal(fields)
		id := int64(i)
		r, err := sink.NewRow(form, &id, b.t0, false, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		types := fieldtype.Columns{Seen: fieldtype.Set{}}
		for j, h := range hostile {
			types.Seen[h] = fieldtype.Types()[(i+j)%len(fieldtype.Types())]
		}
		ddl := viewSQL(b.cfg.Project, b.cfg.Dataset, form, hostile) + viewSQL(b.cfg.Project, b.cfg.Dataset, form, hostile, types)
		for _, l := range strings.Split(ddl, "\n") {
			if inner.MatchString(l) {
				continue
			}
			if !line.MatchString(l) || strings.HasPrefix(l, "  ") && !columnLine(l) {
				t.Errorf("view of form %q: unexpected line %q", form, l)
			}
		}
		b.mustCommit(t, at.Add(time.Duration(i)*time.Second), formRows{formState(form, []sink.Row{r}, hostile...), []sink.Row{r}})
		checkRows(t, b.sink, form, []sink.Row{r})
		got := readView(t, b, form)
		if len(got) != 1 {
			t.Fatalf("view of form %q has %d rows", form, len(got))
		}
		cols := sqlname.ColumnNames(hostile, sqlname.ViewFixedColumns())
		if got[0]["form_id"] != form {
			t.Errorf("view form_id %q, want %q", got[0]["form_id"], form)
		}
		for _, h := range hostile {
			if v := got[0][cols[h]]; v != fields[h] {
				t.Errorf("form %q: view column %s for field %q = %q, want %q", form, cols[h], h, v, fields[h])
			}
		}
	}
	st := readState(t, b.sink)
	for _, form := range hostile {
		if st[form].Rows != 1 || len(st[form].FieldNames) != len(hostile) || st[form].FieldNames[4] != hostile[4] {
			t.Errorf("state of form %q: %+v", form, st[form])
		}
	}
}

// literalRE is a GoogleSQL string literal as stringLiteral writes one:
// printable ASCII, quotes and backslashes escaped, the rest as \u or \U.
var literalRE = regexp.MustCompile(`'([ -&(-\[\]-~]|\\[\\']|\\u[0-9a-f]{4}|\\U[0-9a-f]{8})*'`)

var rawRE = regexp.MustCompile(`, r'[^']*'`)

// columnLine reports whether l is a line of the view with room for text
// that is not fixed: a member line whose text, string literals aside, is a
// member's (user data can only be inside those literals), or the head of
// a type's array, whose typing is one of the types' and holds no literal
// of a name.
func columnLine(l string) bool {
	// The raw strings of the guards (fixed text, no quote inside) first,
	// so that a literal is never taken to start at one's closing quote.
	skeleton := func(expr string) string {
		return literalRE.ReplaceAllString(rawRE.ReplaceAllString(expr, ", R"), "?")
	}
	if typing, ok := strings.CutPrefix(l, "    ARRAY(SELECT AS STRUCT "); ok {
		typing, ok = strings.CutSuffix(typing, " AS v FROM UNNEST([")
		for _, t := range fieldtype.Types() {
			if ok && typing == typedExpr("m", t) {
				return true
			}
		}
		return false
	}
	body, ok := strings.CutPrefix(l, "      ")
	if !ok {
		return false
	}
	got := skeleton(strings.TrimSuffix(body, ","))
	return got == skeleton(memberExpr("plain")) || got == skeleton(memberExpr(`quoted "name"`))
}
