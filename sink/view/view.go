package view

import (
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
)

// Column is one field column of a form's view.
type Column struct {
	// Name is the column's name: the field name sanitised, distinct from
	// the view's other columns.
	Name string `json:"column"`
	// Field is the key of the submission's fields the column reads.
	Field string `json:"field"`
	// Type is what the column casts the field's values to.
	Type fieldtype.Type `json:"type"`
	// Pinned says the type is pinned (FORMSYNC_FIELD_TYPES) rather than
	// the one the values seen so far fit.
	Pinned bool `json:"pinned,omitempty"`
}

// Name is the name of form formID's view.
func Name(formID string) string { return sqlname.ViewName(formID) }

// FixedColumns are the columns every form's view starts with, before its
// field columns.
func FixedColumns() []string { return sqlname.ViewFixedColumns() }

// Columns lists the field columns of the view of the form whose state is
// st, in the view's order: one per field name, up to sink.MaxViewFields.
func Columns(st state.Form) []Column { return ColumnsOf(st.FieldNames, st.FieldTypes) }

// ColumnsOf lists the field columns of a view of fields named names and
// typed by types: what each sink makes its view of.
func ColumnsOf(names []string, types fieldtype.Columns) []Column {
	cols := sqlname.ViewColumns(names)
	out := make([]Column, len(cols))
	for i, c := range cols {
		out[i] = Column{Name: c.Name, Field: c.Field, Type: types.Type(c.Field), Pinned: types.Pin(c.Field) != fieldtype.Unknown}
	}
	return out
}
