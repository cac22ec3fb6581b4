package sqlname

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Form ids and field names are user data. Before one becomes part of an
// identifier (a view name or a view column) it is reduced to a name that is
// valid, unquoted, in both SQLite and BigQuery: lower-case ASCII letters,
// digits and underscores, starting with a letter, at most maxIdent bytes.
// Whenever the reduction loses information (a character replaced, case
// folded, the name cut, a collision) a short hash of the original is appended,
// so different inputs never share a name.
const maxIdent = 60

// ViewName is the name of a form's per-form view: "form_" and the sanitised
// form id.
func ViewName(formID string) string { return sanitize("form_", formID) }

// MaxViewFields is the most field columns a form's view carries, in either
// sink: SQLite allows 2000 columns per view (BigQuery 10,000), and a form's
// view has the same columns whichever sink holds it.
const MaxViewFields = 1900

// ViewFixedColumns are the submissions columns every form view starts with.
func ViewFixedColumns() []string {
	return []string{"form_id", "submission_id", "submission_key", "created_at", "is_spam", "synced_at"}
}

// ViewColumn is one field column of a form's view.
type ViewColumn struct {
	Field string // the field name, a key of the submission's fields
	Name  string // its column: sanitised, distinct from the others
}

// ViewColumns lists a form's view field columns: the first MaxViewFields
// distinct field names, in order, each named by ColumnNames.
func ViewColumns(fieldNames []string) []ViewColumn {
	var names []string
	seen := make(map[string]bool, len(fieldNames))
	for _, f := range fieldNames {
		if !seen[f] && len(names) < MaxViewFields {
			seen[f] = true
			names = append(names, f)
		}
	}
	cols := ColumnNames(names, ViewFixedColumns())
	out := make([]ViewColumn, len(names))
	for i, f := range names {
		out[i] = ViewColumn{Field: f, Name: cols[f]}
	}
	return out
}

// ColumnNames maps each field name to a distinct, sanitised column name that
// differs from every name in reserved (the view's fixed columns).
func ColumnNames(fields []string, reserved []string) map[string]string {
	taken := make(map[string]bool, len(fields)+len(reserved))
	for _, r := range reserved {
		taken[r] = true
	}
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		name := sanitize("", f)
		if taken[name] {
			name = withHash(name, f)
		}
		for taken[name] { // a hash collision with another sanitised name
			name = withHash(name, name)
		}
		taken[name] = true
		out[f] = name
	}
	return out
}

func sanitize(prefix, s string) string {
	var b strings.Builder
	b.WriteString(prefix)
	lossy := !utf8.ValidString(s)
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + ('a' - 'A'))
			lossy = true
		default:
			b.WriteByte('_')
			lossy = true
		}
	}
	name := b.String()
	if name == "" || !(name[0] >= 'a' && name[0] <= 'z') {
		name = "f_" + name
		lossy = lossy || prefix == ""
	}
	if len(name) > maxIdent {
		name = name[:maxIdent]
		lossy = true
	}
	// BigQuery reserves column names starting with these prefixes.
	for _, p := range []string{"_table_", "_file_", "_partition", "_row_timestamp", "__root__", "_colon_"} {
		if strings.HasPrefix(name, p) {
			name, lossy = "f"+name, true
		}
	}
	if lossy {
		name = withHash(name, s)
	}
	return name
}

func withHash(name, original string) string {
	sum := sha256.Sum256([]byte(original))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(name)+len(suffix) > maxIdent {
		name = name[:maxIdent-len(suffix)]
	}
	return name + suffix
}
