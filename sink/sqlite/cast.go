package sqlite

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/formsync/formsync/state/fieldtype"
)

// columnSQL is the SQL expression of the view column of field, typed t
// (docs/types.md), from the member field of the fields object: its JSON
// type and its value, the same in every SQLite from 3.31 on, whatever the
// key. A path ('$."label"') is read alike by all of them when its label
// is the key as the fields object stores it (canonical JSON, escapes and
// all) and holds no '"': an older SQLite (3.40, which the sqlite3 shell
// and Python may carry) ends the quoted label at its first '"' and
// compares the label with the stored key as written, and a newer one
// (3.45 on) decodes the escapes of both. So a key holding '\', a NUL or
// another character JSON escapes is read by its escaped label; json_each,
// whose key an older SQLite cuts at a NUL, is left to a key holding '"'
// or bytes that are not UTF-8: slower, for the rare field named so.
func columnSQL(field string, t fieldtype.Type) string {
	if label, ok := storedLabel(field); ok {
		path := quoteString(`$."` + label + `"`)
		return castSQL(t, "json_type(fields, "+path+")", "json_extract(fields, "+path+")")
	}
	return "(SELECT " + castSQL(t, "m.type", "m.value") + " FROM json_each(fields) AS m WHERE m.key = " + quoteString(field) + " LIMIT 1)"
}

// storedLabel is key as canonical JSON writes it inside its quotes
// (encoding/json without HTML escaping, as sink.AppendCanonical), and
// whether a path can spell it: valid UTF-8 without '"'.
func storedLabel(key string) (string, bool) {
	if !utf8.ValidString(key) || strings.ContainsRune(key, '"') {
		return "", false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(key); err != nil {
		return "", false
	}
	q := bytes.TrimSpace(b.Bytes())
	return string(q[1 : len(q)-1]), true
}

// castSQL turns a fields member, whose JSON type (json_type's names) is
// the SQL expression typ and whose value (as json_extract gives it) is
// val, into the value of a view column of type t. Every cast is guarded:
// SQLite casts what it cannot read to 0 (CAST('n/a' AS INTEGER) is 0), so
// only a value that fits t's rule (state/fieldtype) is cast, and any
// other is NULL, never a wrong value and never an error. The empty string
// fits no type but String. Only functions of SQLite 3.31 are used, so
// that the sqlite3 shells and Pythons of older systems read the views.
func castSQL(t fieldtype.Type, typ, val string) string {
	// One pass over the template: a key in typ or val is never read as
	// a placeholder.
	r := strings.NewReplacer("{t}", typ, "{v}", val)
	switch t {
	case fieldtype.Boolean:
		return r.Replace(`CASE {t} WHEN 'true' THEN 1 WHEN 'false' THEN 0 WHEN 'text' THEN CASE lower({v}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END END`)
	case fieldtype.Integer:
		// Text in JSON's integer syntax that fits 64 bits is what reads
		// back as itself once cast ("007", "+5", " 5", "5.0" and "1e3" do
		// not; an integer past 64 bits is cut to the largest); "-0" alone
		// reads back otherwise, as "0".
		return r.Replace(`CASE {t} WHEN 'integer' THEN CASE WHEN typeof({v}) = 'integer' THEN {v} END ` +
			`WHEN 'text' THEN CASE WHEN CAST(CAST({v} AS INTEGER) AS TEXT) = {v} OR {v} = '-0' THEN CAST({v} AS INTEGER) END END`)
	case fieldtype.Decimal:
		return r.Replace(`CASE {t} WHEN 'integer' THEN CAST({v} AS REAL) WHEN 'real' THEN {v} ` +
			`WHEN 'text' THEN CASE WHEN ` + decimalText + ` THEN CAST({v} AS REAL) END END`)
	case fieldtype.Date:
		return r.Replace(`CASE WHEN {t} = 'text' AND ` + dateText + ` THEN {v} END`)
	case fieldtype.Timestamp:
		return r.Replace(timestampSQL)
	case fieldtype.Array:
		// An array of strings, numbers and booleans, as its JSON text;
		// any other value is NULL (BigQuery's column shows []). An array
		// holding a null, an array or an object makes a field's type
		// String, so it meets an array column only where one is pinned.
		return r.Replace(`CASE {t} WHEN 'array' THEN CASE WHEN NOT EXISTS (SELECT 1 FROM json_each({v}) WHERE type IN ('null', 'array', 'object')) THEN {v} END END`)
	}
	// String, and a type this formsync does not know (a newer one's):
	// booleans as the words JSON has for them (json_extract gives 1 and
	// 0), numbers as their text, objects and arrays as their JSON text.
	return r.Replace(`CASE {t} WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST({v} AS TEXT) END`)
}

// decimalText is true for text {v} in JSON's number syntax without an
// exponent, at most 29 digits before the point and 9 after it: only
// digits, '.' and '-'; '-' first if anywhere; a digit first (after the
// sign) and last; one '.' at most, a digit after it; no leading zero.
const decimalText = `{v} NOT GLOB '*[^-.0-9]*' AND ({v} GLOB '[0-9]*' OR {v} GLOB '-[0-9]*') AND {v} GLOB '*[0-9]' ` +
	`AND {v} NOT GLOB '?*-*' AND {v} NOT GLOB '*.*.*' AND {v} NOT GLOB '*.[^0-9]*' AND {v} NOT GLOB '0[0-9]*' AND {v} NOT GLOB '-0[0-9]*' ` +
	`AND instr({v} || '.', '.') - 1 - ({v} GLOB '-*') <= 29 AND length({v}) - instr({v} || '.', '.') <= 9`

// ymd is the shape of a date. Through a Julian day a day that does not
// exist becomes another ('2026-02-30' is '2026-03-02'), so a date that
// reads back as itself is one that exists (date() alone gives it back
// unchanged in SQLite before 3.42). Year 0 is no DATE in BigQuery.
const (
	ymd      = `[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]`
	dateText = `{v} GLOB '` + ymd + `' AND date(julianday({v})) = {v} AND {v} NOT GLOB '0000*'`
)

// timestampSQL is a timestamp column: a date is its midnight UTC; a date
// and time of day, with at most six fractional digits and Z, ±hh:mm or
// no zone (UTC), is the same instant in formsync's own layout
// (sink.TimeLayout: UTC, six fractional digits, so that text order is
// time order).
//
// The SQL is written to be short, as each view holds it once per
// timestamp column and every query of the view parses it whole: the date
// and time read back through a Julian day as themselves (hours to 23,
// minutes and seconds to 59, a day that exists); what follows the
// seconds, its digits read as 9 (restShape), is one of the shapes
// allowed, an offset at most 14:00 (as far as BigQuery reads one; SQLite
// reads to 14:59). strftime reads the whole seconds and the zone; the fraction, which SQLite's clock
// would round to milliseconds (and so, past .9995, to the next second),
// is carried over as written: offsets are whole minutes. It is the
// digits after the point up to the zone, which a cast to INTEGER of '1'
// and them reads (the '1' keeps leading zeros).
var timestampSQL = `CASE WHEN {t} = 'text' THEN CASE ` +
	`WHEN {v} GLOB '` + ymd + `' THEN CASE WHEN ` + dateText + ` THEN {v} || 'T00:00:00.000000Z' END ` +
	`WHEN {v} GLOB '` + ymd + `[T ][0-9][0-9]:[0-9][0-9]:[0-9][0-9]*' AND {v} NOT GLOB '0000*' ` +
	`AND strftime('%Y-%m-%d %H:%M:%S', julianday(substr({v}, 1, 19))) = replace(substr({v}, 1, 19), 'T', ' ') ` +
	`AND ` + restShape + ` IN (` + restShapes() + `) AND (substr({v}, -6, 1) NOT IN ('+', '-') OR substr({v}, -5) <= '14:00') ` +
	`THEN strftime('%Y-%m-%dT%H:%M:%S', substr({v}, 1, 19) || ltrim(substr({v}, 20), '.0123456789')) || '.' || ` +
	`substr(CASE WHEN substr({v}, 20, 1) = '.' THEN substr(CAST('1' || substr({v}, 21, 6) AS INTEGER), 2) ELSE '' END || '000000', 1, 6) || 'Z' ` +
	`END END`

// restShape is what follows a timestamp's seconds with every digit
// written 9.
var restShape = func() string {
	e := `substr({v}, 20)`
	for d := '0'; d < '9'; d++ {
		e = `replace(` + e + `, '` + string(d) + `', '9')`
	}
	return e
}()

// restShapes lists, as SQL literals, what may follow a timestamp's
// seconds, digits written 9: no fraction or a point and one to six
// digits, then no zone, Z or an offset.
func restShapes() string {
	var shapes []string
	for _, frac := range []string{"", ".9", ".99", ".999", ".9999", ".99999", ".999999"} {
		for _, zone := range []string{"", "Z", "+99:99", "-99:99"} {
			shapes = append(shapes, "'"+frac+zone+"'")
		}
	}
	return strings.Join(shapes, ", ")
}
