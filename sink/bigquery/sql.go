package bigquery

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	bq "cloud.google.com/go/bigquery"
)

// Every SQL statement the sink sends is rendered here, from the templates
// in sql/ (sqlFiles). Only validated identifiers (project, dataset, table names checked
// at Open, view and column names sanitised by sqlname.ViewName and
// sqlname.ColumnNames) are spliced into the text; every value travels as a
// query parameter, except in views, which cannot take parameters: there the
// form id and the field names enter as escaped string literals
// (stringLiteral). The golden files in testdata/ hold what each template
// renders to, and the BigQuery fake (bqfake) recognises exactly these
// shapes.

// tables names the fully qualified tables a statement refers to.
type tables struct {
	Submissions, State, Staging, Lock, Tombstones, Copies string
}

func ref(project, dataset, table string) string {
	return "`" + project + "." + dataset + "." + table + "`"
}

// stateRead is what readState reads from: WithoutCopies for a sync_state
// table a sync of this formsync has not migrated yet, read by a read-only
// Sink (OpenReadOnly), whose copies, max_submission_id and field_types
// read as NULL.
type stateRead struct {
	tables
	WithoutCopies bool
}

// script says which parts a commit's transaction has: Rows, the plan and
// the submissions MERGE of a loaded staging table; Deletions, the forget
// DELETE and the reconcile UPDATE (rendered only for commits that forget
// or reconcile, so that a plain sync runs the statements it always ran);
// TombstonesChanged, the MERGE of the tombstones that changed into
// sync_tombstones (rendered only for commits that change any).
type script struct {
	tables
	Rows, Deletions, TombstonesChanged bool
}

// commitArgs are the parameters of the commit and writeState scripts,
// each sent under the name the templates below give it, and only when
// the script has the part that reads it (script).
type commitArgs struct {
	SyncedAt time.Time        // @synced_at
	CommitID string           // @commit_id
	States   []stateParam     // @states
	Tombs    []tombstoneParam // @tombstones: with TombstonesChanged
	FormIDs  []string         // @form_ids: with Rows or Deletions

	// With Deletions.
	Forget                     []forgetParam // @forget
	ForgetFrom, ForgetTo       time.Time     // @forget_from, @forget_to
	ReconcileForms             []string      // @reconcile_forms
	ReconcileFrom, ReconcileTo time.Time     // @reconcile_from, @reconcile_to

	// With Rows.
	BoundForms                  []string  // @bound_forms
	CreatedFrom, CreatedTo      time.Time // @created_from, @created_to
	OutsideForms                []string  // @outside_forms
	OutsideBefore, OutsideAfter time.Time // @outside_before, @outside_after
}

// params are a's query parameters for the script scr.
func (a commitArgs) params(scr script) []bq.QueryParameter {
	ps := []bq.QueryParameter{{Name: "synced_at", Value: a.SyncedAt}, {Name: "commit_id", Value: a.CommitID}, {Name: "states", Value: a.States}}
	if scr.TombstonesChanged {
		ps = append(ps, bq.QueryParameter{Name: "tombstones", Value: a.Tombs})
	}
	if !scr.Rows && !scr.Deletions {
		return ps
	}
	ps = append(ps, bq.QueryParameter{Name: "form_ids", Value: a.FormIDs})
	if scr.Deletions {
		ps = append(ps,
			bq.QueryParameter{Name: "forget", Value: a.Forget},
			bq.QueryParameter{Name: "forget_from", Value: a.ForgetFrom},
			bq.QueryParameter{Name: "forget_to", Value: a.ForgetTo},
			bq.QueryParameter{Name: "reconcile_forms", Value: a.ReconcileForms},
			bq.QueryParameter{Name: "reconcile_from", Value: a.ReconcileFrom},
			bq.QueryParameter{Name: "reconcile_to", Value: a.ReconcileTo},
		)
	}
	if scr.Rows {
		ps = append(ps,
			bq.QueryParameter{Name: "bound_forms", Value: a.BoundForms},
			bq.QueryParameter{Name: "created_from", Value: a.CreatedFrom},
			bq.QueryParameter{Name: "created_to", Value: a.CreatedTo},
			bq.QueryParameter{Name: "outside_forms", Value: a.OutsideForms},
			bq.QueryParameter{Name: "outside_before", Value: a.OutsideBefore},
			bq.QueryParameter{Name: "outside_after", Value: a.OutsideAfter},
		)
	}
	return ps
}

// removal says what a removal's transaction removes: with Rows, the
// form's rows too.
type removal struct {
	tables
	Rows bool
}

// allOfTime is the constant created_at range of a statement that reads
// every row of its forms, wherever it lies: it prunes no partition, but
// it is a filter on the partitioning column, so the statement runs on a
// table that requires one (bqMinTime..bqMaxTime).
const allOfTime = "BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'"

// sqlFiles hold the statement templates, one {{define}} per file (named
// after it, in snake case); the golden files in testdata/ and the fake's
// shapes (testkit/bqfake/shapes.go) are generated from their
// renderings.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var sqlTemplates = template.Must(template.New("sql").Funcs(template.FuncMap{
	"allOfTime":    func() string { return allOfTime },
	"latestCopies": latestCopies,
}).ParseFS(sqlFiles, "sql/*.sql"))

func render(name string, data any) string {
	var b strings.Builder
	if err := sqlTemplates.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("bigquery: rendering %s: %v", name, err)) // the templates are fixed
	}
	return strings.TrimSpace(b.String()) + "\n"
}

// stringLiteral makes a GoogleSQL string literal of s that holds only
// printable ASCII: quotes and backslashes are escaped, everything else
// outside printable ASCII is written as \u or \U escapes. A byte that is not
// UTF-8 becomes U+FFFD, as encoding/json does when the same id travels in
// the staged NDJSON, so the literal equals the stored value.
func stringLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
