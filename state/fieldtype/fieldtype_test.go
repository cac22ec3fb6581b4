package fieldtype

import "testing"

func TestOf(t *testing.T) {
	for in, want := range map[string]Type{
		`null`: Unknown, `""`: Unknown, `[]`: Unknown,
		`true`: Boolean, `"False"`: Boolean, `"yes"`: String,
		`5`: Integer, `"5"`: Integer, `"-12"`: Integer, `"007"`: String, `"+44"`: String,
		`"9223372036854775808"`: Decimal, `1.5`: Decimal, `"0.25"`: Decimal, `1e3`: String,
		`"1.1234567891"`: String, `"2026-03-01"`: Date, `"2026-02-30"`: String,
		`"2026-03-01T10:00:00Z"`: Timestamp, `"2026-03-01 10:00:00.123456+02:00"`: Timestamp,
		`"2026-03-01T10:00:00"`: Timestamp, `"2026-03-01T10:00:00.1234567Z"`: String,
		`"2026-03-01t10:00:00z"`: String,
		`["a","b"]`:              Array, `[1,true]`: Array, `["a",null]`: String, `[["a"]]`: String,
		`{"a":1}`: String, `"n/a"`: String, `"\u0035"`: Integer,
		`"-0"`: Integer, `-0`: Integer, `"-"`: String, `"1."`: String, `".5"`: String, `"-.5"`: String,
		`9223372036854775807`: Integer, `-9223372036854775808`: Integer, `9223372036854775808`: Decimal,
		`"12345678901234567890123456789"`: Decimal, `"123456789012345678901234567890"`: String,
		`"0.123456789"`: Decimal, `" 5"`: String, `"5 "`: String, `5 `: Integer, `"1,5"`: String,
		`"TRUE"`: Boolean, `"falſe"`: String, `"truee"`: String, `nul`: String, `tru`: String,
		`"0000-01-01"`: String, `"0001-01-01"`: Date, `"2024-02-29"`: Date, `"2100-02-29"`: String,
		`"2026-13-01"`: String, `"2026-1-01"`: String, `"2026-03-01T24:00:00Z"`: String,
		`"2026-03-01T23:59:60Z"`: String, `"2026-03-01T10:00:00+14:00"`: Timestamp, `"2026-03-01T10:00:00-14:00"`: Timestamp,
		`"2026-03-01T10:00:00+14:01"`: String, `"2026-03-01T10:00:00-14:59"`: String,
		`"2026-03-01T10:00:00+15:00"`: String, `"2026-03-01T10:00:00-05:60"`: String,
		`"2026-03-01T10:00:00."`: String, `"2026-03-01T10:00:00.123456"`: Timestamp,
		`"2026-03-01T10:00:00+0200"`: String, `"2026-03-01T10:00"`: String,
		`"2026\u002d03-01"`: Date, `not json`: String, `[1,2`: String, `[{}]`: String,
	} {
		if got := Of([]byte(in)); got != want {
			t.Errorf("Of(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestWidenOnly(t *testing.T) {
	all := append(Types(), Unknown)
	for _, a := range all {
		for _, b := range all {
			w := Widen(a, b)
			if Widen(w, a) != w || Widen(w, b) != w || Widen(b, a) != w {
				t.Errorf("Widen(%q, %q) = %q is not an upper bound of both", a, b, w)
			}
		}
	}
}

func TestObserve(t *testing.T) {
	var s Set
	s = s.Observe([]byte(`{"age":"41","a\"b":2,"when":"2026-03-01","x":null}`))
	s = s.Observe([]byte(`{ "age" : "n/a", "when":"2026-03-01T00:00:00Z"}`))
	want := Set{"age": String, `a"b`: Integer, "when": Timestamp, "x": Unknown}
	if len(s) != len(want) {
		t.Fatalf("got %v, want %v", s, want)
	}
	for f, w := range want {
		if s[f] != w {
			t.Errorf("%q: got %q, want %q", f, s[f], w)
		}
	}
	c := Columns{Seen: s, Pinned: Set{"age": Integer}}
	if c.Type("age") != Integer || c.Type("x") != String || c.Type("when") != Timestamp {
		t.Errorf("Columns.Type: %v", c)
	}
}

// TestPinIgnoresCase: a pin applies to the field whatever the case it is
// written in, as the field policy's patterns do; an exact name wins.
func TestPinIgnoresCase(t *testing.T) {
	t.Parallel()
	c := Columns{Seen: Set{"ZIP": Integer, "Zip": Integer, "age": String}, Pinned: Set{"zip": String, "Age": Integer, "AGE": Decimal}}
	for field, want := range map[string]Type{"ZIP": String, "Zip": String, "zip": String, "age": Decimal, "AGE": Decimal, "Age": Integer, "other": String} {
		if got := c.Type(field); got != want {
			t.Errorf("Type(%q) = %s, want %s", field, got, want)
		}
	}
	if got := c.Pin("city"); got != Unknown {
		t.Errorf("Pin of an unpinned field = %s, want none", got)
	}
}
