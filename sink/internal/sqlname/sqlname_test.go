package sqlname

import (
	"fmt"
	"strings"
	"testing"
)

func TestIdentifiers(t *testing.T) {
	t.Parallel()
	if got := ViewName("contact"); got != "form_contact" {
		t.Errorf("ViewName(contact) = %q", got)
	}
	hostile := []string{"a`b", `a"b`, "a'b", "a;DROP TABLE x;--", "É", strings.Repeat("z", 300), "Name", "name", "name ", "_TABLE_x", "1st", ""}
	seen := map[string]string{}
	for _, h := range hostile {
		v := ViewName(h)
		if prev, dup := seen[v]; dup {
			t.Errorf("ViewName(%q) = ViewName(%q) = %q", h, prev, v)
		}
		seen[v] = h
		checkIdent(t, v)
	}
	cols := ColumnNames(append(hostile, "created_at", "form_id"), []string{"form_id", "created_at"})
	used := map[string]bool{"form_id": true, "created_at": true}
	for f, c := range cols {
		checkIdent(t, c)
		if used[c] {
			t.Errorf("column for %q collides: %q", f, c)
		}
		used[c] = true
	}
}

func checkIdent(t *testing.T, s string) {
	t.Helper()
	if len(s) == 0 || len(s) > maxIdent || !(s[0] >= 'a' && s[0] <= 'z') {
		t.Errorf("bad identifier %q", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			t.Errorf("identifier %q has %q", s, r)
		}
	}
	if strings.HasPrefix(s, "_table_") {
		t.Errorf("reserved prefix in %q", s)
	}
}

func TestViewColumnsDedupeAndCap(t *testing.T) {
	t.Parallel()
	fields := []string{"b", "a", "b", "form_id"}
	for i := range MaxViewFields + 10 {
		fields = append(fields, fmt.Sprintf("f%d", i))
	}
	cols := ViewColumns(fields)
	if len(cols) != MaxViewFields {
		t.Fatalf("%d columns, want the cap %d", len(cols), MaxViewFields)
	}
	if cols[0].Field != "b" || cols[1].Field != "a" || cols[2].Field != "form_id" || cols[3].Field != "f0" {
		t.Errorf("first columns %v: want distinct names in order", cols[:4])
	}
	if cols[2].Name == "form_id" {
		t.Error("a field named like a fixed column took its name")
	}
}

// A form id that looks like another's sanitised name does not take it.
func TestViewNamesDoNotCollide(t *testing.T) {
	t.Parallel()
	ids := []string{"a-b", "a_b", "a.b", "A_B", ViewName("a-b")[len("form_"):], "a_b_00000000", "x_deadbeef", "x-deadbeef"}
	seen := map[string]string{}
	for _, id := range ids {
		v := ViewName(id)
		if prev, dup := seen[v]; dup {
			t.Errorf("forms %q and %q share the view %s", prev, id, v)
		}
		seen[v] = id
	}
	cols := ColumnNames([]string{"a-b", ColumnNames([]string{"a-b"}, nil)["a-b"]}, nil)
	if cols["a-b"] == cols[ColumnNames([]string{"a-b"}, nil)["a-b"]] {
		t.Errorf("field names share a column: %v", cols)
	}
}
