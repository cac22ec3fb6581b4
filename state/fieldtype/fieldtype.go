package fieldtype

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/formsync/formsync/internal/jsonscan"
)

// Type is the SQL type of a view column, named the same in every sink.
type Type string

// The types a field can have. Unknown is a field whose every value so far
// was null, "" or []: its view column is a String until a value says more.
const (
	Unknown   Type = ""
	Boolean   Type = "boolean"
	Integer   Type = "integer"
	Decimal   Type = "decimal"
	Date      Type = "date"
	Timestamp Type = "timestamp"
	Array     Type = "array"
	String    Type = "string"
)

// Types lists the types a pin may name, narrowest first.
func Types() []Type { return []Type{Boolean, Integer, Decimal, Date, Timestamp, Array, String} }

// Parse returns the type named s, one of [Types].
func Parse(s string) (Type, error) {
	t := Type(s)
	if slices.Contains(Types(), t) {
		return t, nil
	}
	names := make([]string, 0, len(Types()))
	for _, t := range Types() {
		names = append(names, string(t))
	}
	return Unknown, fmt.Errorf("unknown field type %q (one of %s)", s, strings.Join(names, ", "))
}

// Widen returns the narrowest type both a and b fit.
func Widen(a, b Type) Type {
	switch {
	case a == b || b == Unknown:
		return a
	case a == Unknown:
		return b
	case isOneOf(a, b, Integer, Decimal):
		return Decimal
	case isOneOf(a, b, Date, Timestamp):
		return Timestamp
	}
	return String
}

func isOneOf(a, b, x, y Type) bool { return (a == x || a == y) && (b == x || b == y) }

// Of returns the type of one JSON value as it appears in a submission's
// fields. A value that is not JSON is a String.
func Of(value []byte) Type {
	var r jsonscan.Reader
	r.Reset(value)
	switch r.PeekKind() {
	case 'n':
		return Unknown
	case 't', 'f':
		return Boolean
	case '0':
		return number(trimSpace(value))
	case '"':
		s, ok := jsonscan.String(value)
		if !ok {
			return String
		}
		return ofString(string(jsonscan.AppendUnquote(nil, s)))
	case '[':
		return ofArray(&r)
	}
	return String
}

func trimSpace(b []byte) string { return strings.TrimSpace(string(b)) }

// number types a number's text, from JSON or from a string.
func number(s string) Type {
	if !jsonNumber(s) || strings.ContainsAny(s, "eE") {
		return String
	}
	digits := strings.TrimPrefix(s, "-")
	whole, frac, hasFrac := strings.Cut(digits, ".")
	if !hasFrac {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return Integer
		}
		// Too large for 64 bits, but exact in NUMERIC.
		if len(whole) <= 29 {
			return Decimal
		}
		return String
	}
	if len(whole) <= 29 && len(frac) <= 9 {
		return Decimal
	}
	return String
}

// jsonNumber reports whether s is a number in JSON's syntax.
func jsonNumber(s string) bool {
	return json.Valid([]byte(s)) && s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9')
}

func ofString(s string) Type {
	switch {
	case s == "":
		return Unknown
	case strings.EqualFold(s, "true") || strings.EqualFold(s, "false"):
		return Boolean
	case s[0] == '-' || s[0] >= '0' && s[0] <= '9':
		if t := number(s); t != String {
			return t
		}
	}
	if len(s) == len("2006-01-02") {
		if _, err := time.Parse("2006-01-02", s); err == nil {
			return Date
		}
		return String
	}
	if timestamp(s) {
		return Timestamp
	}
	return String
}

// timestamp reports whether s is a date and time of day BigQuery's cast to
// TIMESTAMP reads exactly: YYYY-MM-DD, 'T' or ' ', hh:mm:ss, at most six
// fractional digits, and Z, ±hh:mm or no zone (UTC).
func timestamp(s string) bool {
	if len(s) < 19 || s[10] != 'T' && s[10] != ' ' {
		return false
	}
	rest := s[19:]
	if frac, ok := strings.CutPrefix(rest, "."); ok {
		n := 0
		for n < len(frac) && frac[n] >= '0' && frac[n] <= '9' {
			n++
		}
		if n == 0 || n > 6 {
			return false
		}
		rest = frac[n:]
	}
	layout := "2006-01-02T15:04:05"
	switch {
	case rest == "":
	case rest == "Z":
		layout += "Z"
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		layout += "-07:00"
	default:
		return false
	}
	// time.Parse takes the fraction wherever the layout's seconds are.
	plain := s[:10] + "T" + s[11:]
	_, err := time.Parse(layout, plain)
	return err == nil
}

// ofArray types an array: Array when every element is a string, number or
// boolean, Unknown when it is empty, String otherwise.
func ofArray(r *jsonscan.Reader) Type {
	if _, err := r.ReadToken(); err != nil {
		return String
	}
	n := 0
	for {
		switch r.PeekKind() {
		case ']':
			if n == 0 {
				return Unknown
			}
			return Array
		case '"', '0', 't', 'f':
			if _, err := r.ReadValue(); err != nil {
				return String
			}
			n++
		default:
			return String
		}
	}
}

// Set is the type of each field of a form.
type Set map[string]Type

// Observe widens s with the type of each member of fields, a JSON object
// (a submission's fields), and returns it (a new Set when s is nil).
// Fields that are not an object leave s as it is.
func (s Set) Observe(fields []byte) Set {
	var r jsonscan.Reader
	r.Reset(fields)
	if k, err := r.ReadToken(); err != nil || k != '{' {
		return s
	}
	var name []byte
	for r.PeekKind() == '"' {
		start := r.Offset()
		if _, err := r.ReadToken(); err != nil {
			return s
		}
		name = jsonscan.AppendUnquote(name[:0], trimQuoted(fields[start:r.Offset()]))
		v, err := r.ReadValue()
		if err != nil {
			return s
		}
		t := Of(v)
		if s == nil {
			s = Set{}
		}
		if old, ok := s[string(name)]; !ok || Widen(old, t) != old {
			s[string(name)] = Widen(old, t)
		}
	}
	return s
}

// trimQuoted returns the quoted string token in b, without what surrounds
// it (space, and the comma or brace before it).
func trimQuoted(b []byte) []byte {
	i := strings.IndexByte(string(b), '"')
	if i < 0 {
		return b
	}
	return b[i:]
}

// Merge returns the fields of a and b, each widened to fit both.
func Merge(a, b Set) Set {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := maps.Clone(a)
	if out == nil {
		out = Set{}
	}
	for f, t := range b {
		out[f] = Widen(out[f], t)
	}
	return out
}

// Columns is what a form's state keeps of its fields' types: the types
// seen, which only widen, and the types an operator pinned. It is stored
// as JSON ({"seen": {...}, "pinned": {...}}).
type Columns struct {
	Seen   Set `json:"seen,omitempty"`
	Pinned Set `json:"pinned,omitempty"`
}

// Type is the type of field's view column: its pin, else the type seen,
// else String.
func (c Columns) Type(field string) Type {
	if t := c.Pinned[field]; t != Unknown {
		return t
	}
	if t := c.Seen[field]; t != Unknown {
		return t
	}
	return String
}
