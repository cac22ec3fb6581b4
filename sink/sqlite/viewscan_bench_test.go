package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/sinktest"
)

// BenchmarkViewScan reads every row and column of a form's view: 20,000
// submissions of ten fields, one or more of each type. "typed" is the
// view as formsync makes it, each column cast by its type; "text" is the
// same view with every field pinned string, as the views were before
// they were typed. The difference is what the guarded casts cost a query.
func BenchmarkViewScan(b *testing.B) {
	const n = 20_000
	rows := make([]sink.Row, n)
	for i := range rows {
		id := int64(i + 1)
		fields := fmt.Sprintf(`{"age":"%d","agree":%t,"arrival":"2026-%02d-%02d","budget":"%d.%02d","email":"user%d@example.com",`+
			`"extras":["a","b"],"guests":%d,"message":"hello from submission %d","sent":"2026-03-01T10:%02d:%02dZ","zip":"0%04d"}`,
			18+i%60, i%2 == 0, 1+i%12, 1+i%28, i%5000, i%100, i, i%9, i, i%60, i%60, i%10000)
		rows[i] = row(b, "scan", &id, t0.Add(time.Duration(i)*time.Second), false, fields)
	}
	typed := typedState("scan", rows...)
	text := typed
	text.FieldTypes.Pinned = fieldtype.Set{}
	for _, f := range typed.FieldNames {
		text.FieldTypes.Pinned[f] = fieldtype.String
	}
	for _, c := range []struct {
		name string
		st   state.Form
	}{{"typed", typed}, {"text", text}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "scan.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Commit(b.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: c.st, Rows: sinktest.Spool(b, rows...)}}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				q, err := s.db.QueryContext(b.Context(), `SELECT * FROM form_scan`)
				if err != nil {
					b.Fatal(err)
				}
				cols, _ := q.Columns()
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				got := 0
				for q.Next() {
					if err := q.Scan(ptrs...); err != nil {
						b.Fatal(err)
					}
					got++
				}
				if err := q.Close(); err != nil || got != n {
					b.Fatalf("%d rows, %v", got, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}

// BenchmarkViewColumn reads five columns of one type from 20,000 rows,
// for each type: where a typed view's query time goes (ns/cell).
func BenchmarkViewColumn(b *testing.B) {
	const n = 20_000
	for _, c := range []struct {
		t     fieldtype.Type
		value string // %d: the row's number
	}{
		{fieldtype.String, `"hello %d"`}, {fieldtype.Boolean, `true`}, {fieldtype.Integer, `"%d"`},
		{fieldtype.Decimal, `"%d.25"`}, {fieldtype.Date, `"2026-03-01"`}, {fieldtype.Timestamp, `"2026-03-01T10:00:00Z"`},
		{fieldtype.Array, `["a","b"]`},
	} {
		b.Run(string(c.t), func(b *testing.B) {
			rows := make([]sink.Row, n)
			for i := range rows {
				id := int64(i + 1)
				v := c.value
				if strings.Contains(v, "%d") {
					v = fmt.Sprintf(v, i)
				}
				fields := `{"a":` + v + `,"b":` + v + `,"c":` + v + `,"d":` + v + `,"e":` + v + `}`
				rows[i] = row(b, "col", &id, t0.Add(time.Duration(i)*time.Second), false, fields)
			}
			st := typedState("col", rows...)
			if got := st.FieldTypes.Seen["a"]; got != c.t {
				b.Fatalf("%s typed %q", c.value, got)
			}
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "col.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Commit(b.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(b, rows...)}}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				q, err := s.db.QueryContext(b.Context(), `SELECT a, b, c, d, e FROM form_col`)
				if err != nil {
					b.Fatal(err)
				}
				var x [5]any
				for q.Next() {
					if err := q.Scan(&x[0], &x[1], &x[2], &x[3], &x[4]); err != nil {
						b.Fatal(err)
					}
				}
				if err := q.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*5), "ns/cell")
		})
	}
}
