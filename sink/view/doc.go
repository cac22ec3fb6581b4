// Package view describes a form's view as every sink makes it: its name
// and its field columns, each with the field it reads and the type it
// casts to (docs/types.md). Tools that read the views (formsync status,
// a dbt project) name them from here rather than sanitising field names
// again.
//
//	st := states["contact"]               // a sink's ReadState
//	name := view.Name(st.FormID)          // "form_contact"
//	for _, c := range view.Columns(st) {  // after view.FixedColumns()
//		fmt.Println(c.Name, c.Field, c.Type, c.Pinned)
//	}
package view
