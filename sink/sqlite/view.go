package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state/fieldtype"
)

// viewsTyped is the schema version from which a form's view casts each
// field to its type (sync_state.field_types); the types of a file of an
// older schema are inferred from its stored rows when it is migrated, and
// its views made again (those of a file older than version 4 did not
// leave out the rows marked deleted either).
const viewsTyped = 7

// viewTakenError is why a commit could not make a form's view: something
// of the user's (a table, an index) holds the view's name in the file. The
// commit stored the form's rows all the same, and reports it in the form's
// sink.Counts.View.
type viewTakenError struct {
	View string
	// Kind is what holds the name: "table" or "index".
	Kind string
	Path string
}

func (e *viewTakenError) Error() string {
	return fmt.Sprintf("view %s cannot be made: %s %s holds that name in %s; rename it, and the next commit makes the view", e.View, e.Kind, e.View, e.Path)
}

// ensureView makes the view of one form hold what viewSQL says for
// fieldNames typed by types, (re)creating it when it is missing or
// differs (a new form, new field names, a type widened or pinned, a view
// edited by hand), and doing nothing when it is as it should be. When something other than a view holds the name, it
// leaves that alone and returns what holds it ("table", "index").
//
// The view holds the form's rows not marked deleted upstream: the table
// keeps those too, with their deleted_at. Views cannot take parameters, so
// the form id and the JSON paths enter the statement as escaped string
// literals and the column names as double-quoted sanitised identifiers.
func ensureView(ctx context.Context, tx *sql.Tx, formID string, fieldNames []string, types fieldtype.Columns) (takenBy string, err error) {
	name := sqlname.ViewName(formID)
	want := viewSQL(formID, fieldNames, types)
	// Tables, views and indexes share one namespace, in which names
	// compare without regard to ASCII case.
	var kind, stored sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT type, sql FROM sqlite_schema
		WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view', 'index')`, name).Scan(&kind, &stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return "", fmt.Errorf("looking for view %s: %w", name, err)
	case kind.String != "view":
		return kind.String, nil
	case stored.String == want:
		return "", nil
	default:
		if _, err := tx.ExecContext(ctx, "DROP VIEW "+quoteIdent(name)); err != nil {
			return "", fmt.Errorf("dropping view %s: %w", name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, want); err != nil {
		return "", fmt.Errorf("creating view %s: %w", name, err)
	}
	return "", nil
}

// viewSQL is the statement that creates a form's view: the fixed columns,
// then one column per field name, cast to the type types gives it
// (columnSQL).
func viewSQL(formID string, fieldNames []string, types fieldtype.Columns) string {
	var b strings.Builder
	b.WriteString("CREATE VIEW ")
	b.WriteString(quoteIdent(sqlname.ViewName(formID)))
	b.WriteString(" AS SELECT ")
	for i, c := range sqlname.ViewFixedColumns() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c))
	}
	for _, c := range view.ColumnsOf(fieldNames, types) {
		b.WriteString(",\n\t")
		b.WriteString(columnSQL(c.Field, c.Type))
		b.WriteString(" AS ")
		b.WriteString(quoteIdent(c.Name))
	}
	b.WriteString("\nFROM submissions WHERE form_id = ")
	b.WriteString(quoteString(formID))
	b.WriteString(" AND deleted_at IS NULL")
	return b.String()
}

// quoteIdent quotes an SQL identifier. The names passed are already
// sanitised; quoting keeps a keyword-like name (e.g. "order") valid.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteString makes an SQL string literal of s. Text that is not valid UTF-8
// or holds a NUL travels as a hex blob cast to text, byte for byte.
func quoteString(s string) string {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "CAST(X'" + hex.EncodeToString([]byte(s)) + "' AS TEXT)"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// typeViews types the views of a file written before types were kept:
// it fills the field types of every form in sync_state from its stored
// rows, as the worker observes them while it stages rows
// (fieldtype.Set.Observe), for the field names the state keeps, and
// creates its view again as a commit would create it now. A view whose
// name something of the user's holds is left out, as a commit leaves it
// out; the form's next commit reports it. It reads every row once, at
// the migration only.
func typeViews(ctx context.Context, tx *sql.Tx) error {
	type form struct {
		id    string
		names []string
	}
	var forms []form
	rows, err := tx.QueryContext(ctx, `SELECT form_id, field_names FROM sync_state ORDER BY form_id`)
	if err != nil {
		return fmt.Errorf("listing forms: %w", err)
	}
	for rows.Next() {
		var f form
		var names string
		if err := rows.Scan(&f.id, &names); err != nil {
			rows.Close()
			return fmt.Errorf("listing forms: %w", err)
		}
		if err := json.Unmarshal([]byte(names), &f.names); err != nil {
			rows.Close()
			return fmt.Errorf("field names of form %s: %w", f.id, err)
		}
		forms = append(forms, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing forms: %w", err)
	}
	for _, f := range forms {
		seen, err := observeStored(ctx, tx, f.id)
		if err != nil {
			return fmt.Errorf("form %s: typing its stored fields: %w", f.id, err)
		}
		kept := fieldtype.Set{}
		for _, n := range f.names {
			if t, ok := seen[n]; ok {
				kept[n] = t
			}
		}
		cols := fieldtype.Columns{Seen: kept}
		types, err := json.Marshal(cols)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sync_state SET field_types = ? WHERE form_id = ?`, string(types), f.id); err != nil {
			return fmt.Errorf("form %s: storing its field types: %w", f.id, err)
		}
		if _, err := ensureView(ctx, tx, f.id, f.names, cols); err != nil {
			return fmt.Errorf("form %s: %w", f.id, err)
		}
	}
	return nil
}

// observeStored types the fields of every stored row of a form.
func observeStored(ctx context.Context, tx *sql.Tx, formID string) (fieldtype.Set, error) {
	rows, err := tx.QueryContext(ctx, `SELECT fields FROM submissions WHERE form_id = ?`, formID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var seen fieldtype.Set
	var fields sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&fields); err != nil {
			return nil, err
		}
		seen = seen.Observe(fields)
	}
	return seen, rows.Err()
}
