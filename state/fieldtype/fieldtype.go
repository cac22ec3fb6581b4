package fieldtype

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
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
// fields. A value that is not JSON is a String. It allocates nothing
// unless a string holds escapes: it runs on every value of every row
// staged.
func Of(value []byte) Type {
	v := bytes.TrimSpace(value)
	if len(v) == 0 {
		return String
	}
	switch c := v[0]; {
	case c == 'n':
		if string(v) == "null" {
			return Unknown
		}
	case c == 't' || c == 'f':
		if string(v) == "true" || string(v) == "false" {
			return Boolean
		}
	case c == '-' || c >= '0' && c <= '9':
		return number(v)
	case c == '"':
		s, ok := jsonscan.String(v)
		if !ok {
			return String
		}
		var buf []byte
		return ofText(jsonscan.Unquote(&buf, s))
	case c == '[':
		var r jsonscan.Reader
		r.Reset(v)
		return ofArray(&r)
	}
	return String
}

// number types a number's text, from JSON or from a string: Integer,
// Decimal, or String for what is not in JSON's syntax, has an exponent or
// does not fit.
func number(s []byte) Type {
	whole, frac, exp, ok := numberParts(s)
	switch {
	case !ok || exp:
		return String
	case frac < 0:
		if whole < 19 || whole == 19 && fitsInt64(s) {
			return Integer
		}
		// Too large for 64 bits, but exact in NUMERIC.
		if whole <= 29 {
			return Decimal
		}
		return String
	case whole <= 29 && frac <= 9:
		return Decimal
	}
	return String
}

// numberParts reads s as a number in JSON's syntax,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and returns how many
// digits come before the point and after it (-1 without a point), and
// whether it has an exponent.
func numberParts(s []byte) (whole, frac int, exp, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	whole = i - start
	if whole == 0 || whole > 1 && s[start] == '0' {
		return 0, 0, false, false
	}
	frac = -1
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if frac = i - start; frac == 0 {
			return 0, 0, false, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return 0, 0, false, false
		}
		exp = true
	}
	return whole, frac, exp, i == len(s)
}

// fitsInt64 reports whether s, an integer of 19 digits with an optional
// sign, lies in int64's range.
func fitsInt64(s []byte) bool {
	if s[0] == '-' {
		return string(s[1:]) <= "9223372036854775808"
	}
	return string(s) <= "9223372036854775807"
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// ofText types the text of a JSON string.
func ofText(s []byte) Type {
	if len(s) == 0 {
		return Unknown
	}
	switch c := s[0]; {
	case c == 't' || c == 'T' || c == 'f' || c == 'F':
		// ASCII letters only, as SQL's casts read them: strings.EqualFold
		// would also take "falſe" (U+017F folds to s).
		if asciiEqualFold(s, "true") || asciiEqualFold(s, "false") {
			return Boolean
		}
		return String
	case c == '-':
		return number(s)
	case !isDigit(c):
		return String
	}
	if t := number(s); t != String {
		return t
	}
	switch {
	case len(s) == len("2006-01-02"):
		if date(s) {
			return Date
		}
	case timestamp(s):
		return Timestamp
	}
	return String
}

// asciiEqualFold reports whether s is word (lower case) in any mix of
// ASCII case.
func asciiEqualFold(s []byte, word string) bool {
	if len(s) != len(word) {
		return false
	}
	for i := range len(s) {
		if s[i]|0x20 != word[i] {
			return false
		}
	}
	return true
}

// date reports whether s is YYYY-MM-DD naming a day that exists, from
// year 1 on (BigQuery's DATE starts at 0001-01-01).
func date(s []byte) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	if !ok1 || !ok2 || !ok3 || year < 1 || month < 1 || month > 12 || day < 1 {
		return false
	}
	return day <= daysIn(month, year)
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// digits reads s as a decimal number of only digits.
func digits(s []byte) (int, bool) {
	n := 0
	for _, c := range s {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// timestamp reports whether s is a date and time of day that both
// BigQuery's cast to TIMESTAMP and SQLite's date functions read exactly:
// YYYY-MM-DD, 'T' or ' ', hh:mm:ss, at most six fractional digits, and Z,
// an offset ±hh:mm of at most 14:00, or no zone (UTC). GoogleSQL's cast
// takes no offset beyond 14:00 (SQLite's date functions take up to 14:59);
// no place on Earth is further from UTC.
func timestamp(s []byte) bool {
	if len(s) < 19 || !date(s[:10]) || s[10] != 'T' && s[10] != ' ' || s[13] != ':' || s[16] != ':' {
		return false
	}
	h, ok1 := digits(s[11:13])
	m, ok2 := digits(s[14:16])
	sec, ok3 := digits(s[17:19])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || sec > 59 {
		return false
	}
	rest := s[19:]
	if len(rest) > 0 && rest[0] == '.' {
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		if n == 1 || n > 7 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case len(rest) == 0 || len(rest) == 1 && rest[0] == 'Z':
		return true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digits(rest[1:3])
		om, ok2 := digits(rest[4:6])
		return ok1 && ok2 && (oh < 14 && om <= 59 || oh == 14 && om == 0)
	}
	return false
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
	var buf [64]byte // most names fit: no allocation
	name := buf[:0]
	for r.PeekKind() == '"' {
		start := r.Offset()
		if _, err := r.ReadToken(); err != nil {
			return s
		}
		key := jsonscan.Unquote(&name, trimQuoted(fields[start:r.Offset()]))
		v, err := r.ReadValue()
		if err != nil {
			return s
		}
		old, ok := s[string(key)]
		if ok && old == String {
			// Nothing widens a String: its values need no typing.
			continue
		}
		t := Of(v)
		if s == nil {
			s = Set{}
		}
		if w := Widen(old, t); !ok || w != old {
			s[string(key)] = w
		}
	}
	return s
}

// trimQuoted returns the quoted string token in b, without what surrounds
// it (space, and the comma or brace before it).
func trimQuoted(b []byte) []byte {
	i := bytes.IndexByte(b, '"')
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

// Pin is the type pinned for field, Unknown if none: the pin of its exact
// name, else of a name equal to it ignoring case, as FORMSYNC_FIELD_POLICY
// matches names and as SQLite and BigQuery name columns (the first in
// sorted order, should stored pins differ only in case).
func (c Columns) Pin(field string) Type {
	if t := c.Pinned[field]; t != Unknown {
		return t
	}
	var name string
	var pin Type
	for n, t := range c.Pinned {
		if strings.EqualFold(n, field) && (pin == Unknown || n < name) {
			name, pin = n, t
		}
	}
	return pin
}

// Columns is what a form's state keeps of its fields' view columns: the
// types seen, which only widen, the types an operator pinned, and when each
// field that came after the form's first rows was first seen. It is stored
// as JSON ({"seen": {...}, "pinned": {...}, "added": {...}}).
type Columns struct {
	Seen   Set `json:"seen,omitempty"`
	Pinned Set `json:"pinned,omitempty"`
	// Added is when each field that appeared after the form's first rows
	// was first committed (UTC). The fields of the first rows are the
	// form's shape, not a change of it, and have no entry.
	Added map[string]time.Time `json:"added,omitempty"`
}

// MergeAdded returns the union of two Added maps, each field at the
// earlier of its two times: the first sighting stands whichever process
// committed it. It returns nil when both are empty.
func MergeAdded(a, b map[string]time.Time) map[string]time.Time {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := maps.Clone(a)
	if out == nil {
		out = make(map[string]time.Time, len(b))
	}
	for f, t := range b {
		if old, ok := out[f]; !ok || t.Before(old) {
			out[f] = t
		}
	}
	return out
}

// Type is the type of field's view column: its pin, else the type seen,
// else String.
func (c Columns) Type(field string) Type {
	if t := c.Pin(field); t != Unknown {
		return t
	}
	if t := c.Seen[field]; t != Unknown {
		return t
	}
	return String
}
