package sqlname

import (
	"regexp"

	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/formsync/formsync/sink"
)

// Form ids and field names are user data. Before one becomes part of an
// identifier (a view name or a view column) it is reduced to a name that is
// valid in both SQLite and BigQuery (quoted when it is a keyword, as the
// sinks always quote it): lower-case ASCII letters,
// digits and underscores, starting with a letter, at most maxIdent bytes.
// Whenever the reduction loses information (a character replaced, case
// folded, the name cut, a collision) a short hash of the original is appended,
// so different inputs never share a name.
const maxIdent = 60

// ViewName is the name of a form's per-form view: "form_" and the sanitised
// form id.
func ViewName(formID string) string { return sanitize("form_", formID) }

// MaxViewFields is sink.MaxViewFields.
const MaxViewFields = sink.MaxViewFields

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
// differs from every name in reserved (the view's fixed columns), and from
// true and false.
func ColumnNames(fields []string, reserved []string) map[string]string {
	taken := make(map[string]bool, len(fields)+len(reserved)+2)
	for _, r := range reserved {
		taken[r] = true
	}
	// SQLite names a view's column "true" or "false" column<n>, whatever
	// the statement says (and SELECT "true" then reads the string
	// 'true'): no column takes those names, in either sink.
	taken["true"], taken["false"] = true, true
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
	// A name that is already what a hashed name looks like (…_ and eight
	// hex digits) gets a hash of its own, so that no form id or field name
	// can take the name another one was given: "a_b_d44362d6" would
	// otherwise be the name of "a-b".
	if lossy || hashedRE.MatchString(name) {
		name = withHash(name, s)
	}
	return name
}

// hashedRE matches the suffix withHash appends.
var hashedRE = regexp.MustCompile(`_[0-9a-f]{8}$`)

func withHash(name, original string) string {
	sum := sha256.Sum256([]byte(original))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(name)+len(suffix) > maxIdent {
		name = name[:maxIdent-len(suffix)]
	}
	return name + suffix
}
