package fieldtype

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzOf: whatever a value holds, Of does not fail, a field's value is
// typed alike alone and in an object (Observe), and what a typed string
// is said to be, Go's own parsers read it as.
func FuzzOf(f *testing.F) {
	for _, s := range []string{`"41"`, `"-0"`, `1.5`, `"2026-03-01"`, `"2026-03-01T10:00:00.5+02:00"`, `["a",1]`, `"TRUE"`, `"\u0035"`, `null`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got := Of([]byte(value))
		if !json.Valid([]byte(value)) {
			return
		}
		if seen := (Set{}).Observe([]byte(`{"k":` + value + `}`)); seen["k"] != got {
			t.Errorf("Observe types %s as %q, Of as %q", value, seen["k"], got)
		}
		var s string
		if json.Unmarshal([]byte(value), &s) != nil {
			return
		}
		var err error
		switch got {
		case Boolean:
			_, err = strconv.ParseBool(strings.ToLower(s))
		case Integer:
			_, err = strconv.ParseInt(s, 10, 64)
			if err == nil && strings.TrimPrefix(s, "-") != "0" && strings.HasPrefix(strings.TrimPrefix(s, "-"), "0") {
				t.Errorf("%q has a leading zero, typed %q", s, got)
			}
		case Decimal:
			_, err = strconv.ParseFloat(s, 64)
			if strings.ContainsAny(s, "eE+ ") {
				t.Errorf("%q typed %q", s, got)
			}
		case Date:
			_, err = time.Parse(time.DateOnly, s)
		case Timestamp:
			layout := "2006-01-02T15:04:05"
			switch {
			case strings.HasSuffix(s, "Z"):
				layout += "Z"
			case len(s) >= 25 && (s[len(s)-6] == '+' || s[len(s)-6] == '-'):
				layout += "-07:00"
			}
			if len(s) == 10 {
				layout = time.DateOnly
			}
			_, err = time.Parse(layout, s[:10]+"T"+s[min(11, len(s)):])
		}
		if err != nil {
			t.Errorf("%q typed %q, yet: %v", s, got, err)
		}
	})
}

// benchFields are a submission's fields as a sync stages them: free
// text, numbers, a date, checkboxes.
var benchFields = []byte(`{"age":"41","comments":"Hello \"there\", I'd like a quote.\nThanks!","consent":true,"email":"ada@example.com","interests":["a","b"],"name":"Ada Lovelace","rating":4,"score":"3.75","when":"2026-03-01"}`)

// BenchmarkObserve types the fields of one row into the Set of the rows
// before it, as a sync does for every row it stages.
func BenchmarkObserve(b *testing.B) {
	b.ReportAllocs()
	s := Set{}
	for b.Loop() {
		s = s.Observe(benchFields)
	}
}

// BenchmarkObserveFirst types the fields of a form's first row.
func BenchmarkObserveFirst(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = Set(nil).Observe(benchFields)
	}
}
