package view_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
)

func TestColumns(t *testing.T) {
	t.Parallel()
	st := state.New("contact")
	st.FieldNames = []string{"Age", "age", "note", "zip"}
	st.FieldTypes = fieldtype.Columns{
		Seen:   fieldtype.Set{"age": fieldtype.Integer, "Age": fieldtype.Unknown, "zip": fieldtype.Integer},
		Pinned: fieldtype.Set{"zip": fieldtype.String},
	}
	got := view.Columns(st)
	if len(got) != 4 {
		t.Fatalf("%d columns, want 4: %v", len(got), got)
	}
	want := []view.Column{
		{Name: got[0].Name, Field: "Age", Type: fieldtype.String},
		{Name: "age", Field: "age", Type: fieldtype.Integer},
		{Name: "note", Field: "note", Type: fieldtype.String},
		{Name: "zip", Field: "zip", Type: fieldtype.String, Pinned: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if got[0].Name == "age" {
		t.Errorf("Age and age share the column name %q", got[0].Name)
	}
	if view.Name("contact") != "form_contact" {
		t.Errorf("view name %q", view.Name("contact"))
	}
}

func ExampleColumns() {
	st := state.New("contact")
	st.FieldNames = []string{"Guests", "zip"}
	st.FieldTypes.Seen = fieldtype.Set{"Guests": fieldtype.Integer, "zip": fieldtype.Integer}
	st.FieldTypes.Pinned = fieldtype.Set{"zip": fieldtype.String}
	for _, c := range view.Columns(st) {
		fmt.Println(view.Name(st.FormID), c.Name, c.Type, c.Pinned)
	}
	// Output:
	// form_contact guests_3c8e0fde integer false
	// form_contact zip string true
}
