// Package fieldtype decides the SQL type of each column of a form's view:
// the narrowest type that every value of the field seen so far fits.
//
// The types, from narrowest, are Boolean, Integer, Decimal, Date,
// Timestamp, Array (of strings) and String. A field's type only ever
// widens ([Widen]): Integer and Decimal widen to Decimal, Date and
// Timestamp to Timestamp, any other mix to String. A view that worked
// keeps working when a new value does not fit: its column widens at the
// next commit, it never fails a query. JSON null, the empty string and
// the empty array say nothing of a type.
//
//	var seen fieldtype.Set
//	seen = seen.Observe([]byte(`{"age":"41","when":"2026-03-01"}`)) // age integer, when date
//	seen = seen.Observe([]byte(`{"age":"n/a"}`))                     // age widens to string
//	cols := fieldtype.Columns{Seen: seen, Pinned: pins}      // kept in the form's state
//	cols.Type("age")                                         // what the view casts to
//
// The rules follow BigQuery's own casts, and both sinks apply them alike
// (docs/types.md):
//   - Boolean: JSON true or false, or the strings "true" and "false" in
//     any mix of ASCII case (what CAST(x AS BOOL) accepts).
//   - Integer: a JSON number or a string in JSON's integer syntax
//     (-?(0|[1-9][0-9]*)) that fits in 64 bits. "007" and "+44 20" are
//     strings: leading zeros and signs are how codes and phone numbers
//     look, and a number would lose them.
//   - Decimal: a JSON number or a string in JSON's syntax with a fraction
//     and no exponent, exact in BigQuery's NUMERIC (at most 29 digits
//     before the point and 9 after).
//   - Date: a string YYYY-MM-DD naming a day that exists, from 0001-01-01
//     (BigQuery's first DATE).
//   - Timestamp: a string YYYY-MM-DD, 'T' or a space, hh:mm:ss, at most
//     six fractional digits, then Z, an offset ±hh:mm up to 14:59 (what
//     SQLite's date functions read), or nothing; a time without an
//     offset is UTC, as BigQuery reads it.
//   - Array: a JSON array of strings, numbers or booleans (checkboxes);
//     nested values or nulls in it make the field a String.
//   - String: everything else, objects included.
package fieldtype
