package bqfake

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"modernc.org/sqlite"
)

// BigQuery's JSON type holds a number as an INT64, a UINT64 or a FLOAT64.
// PARSE_JSON(text, wide_number_mode => 'exact') fails on a number none of
// them holds exactly; 'round' stores the nearest FLOAT64, and fails on a
// number no FLOAT64 can round to (beyond its range, such as 1e400). The
// fake's translations call these SQLite functions:
//
//	bqfake_json_exact(text)      -> the JSON text, or NULL where exact
//	                                mode fails (SAFE.PARSE_JSON)
//	bqfake_json_round(text)      -> the JSON text with wide numbers
//	                                rounded; an error where that fails
//	bqfake_json_round_safe(text) -> the same, or NULL where it fails
//	                                (SAFE.PARSE_JSON)
//
// Exact numbers keep their text; object keys come out sorted.
func init() {
	for _, f := range []struct {
		name        string
		round, safe bool
	}{{"bqfake_json_exact", false, true}, {"bqfake_json_round", true, false}, {"bqfake_json_round_safe", true, true}} {
		name, round, safe := f.name, f.round, f.safe
		err := sqlite.RegisterDeterministicScalarFunction(name, 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			var text string
			switch v := args[0].(type) {
			case nil:
				return nil, nil
			case string:
				text = v
			case []byte:
				text = string(v)
			default:
				return nil, fmt.Errorf("%s: want text, got %T", name, v)
			}
			out, ok, err := normaliseJSON(text, round)
			if errors.Is(err, errUnroundable) && safe {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, nil
			}
			return out, nil
		})
		if err != nil {
			panic(err)
		}
	}
}

// errUnroundable is PARSE_JSON's failure in 'round' mode: a number beyond
// FLOAT64's range.
var errUnroundable = errors.New("a number cannot be rounded to a FLOAT64")

// normaliseJSON parses text as BigQuery's PARSE_JSON does; ok is false
// when a number cannot be held exactly and round is false.
func normaliseJSON(text string, round bool) (string, bool, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false, fmt.Errorf("PARSE_JSON: invalid JSON: %v", err)
	}
	ok := true
	var unroundable error
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case json.Number:
			if exactNumber(string(x)) {
				return x
			}
			ok = false
			f, err := strconv.ParseFloat(string(x), 64)
			if err != nil && unroundable == nil {
				unroundable = fmt.Errorf("PARSE_JSON: %w: %s", errUnroundable, x)
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return v
	}
	v = walk(v)
	if !ok && !round {
		return "", false, nil
	}
	if unroundable != nil {
		return "", false, unroundable
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", false, err
	}
	return strings.TrimSuffix(b.String(), "\n"), true, nil
}

// exactNumber reports whether an INT64, a UINT64 or a FLOAT64 holds the
// number exactly: its value is the FLOAT64's, or the FLOAT64's shortest
// text reads back as the same number (0.1: a decimal that round-trips).
func exactNumber(s string) bool {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseUint(s, 10, 64); err == nil {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	want, ok1 := new(big.Rat).SetString(s)
	got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return ok1 && ok2 && (want.Cmp(got) == 0 || want.Cmp(new(big.Rat).SetFloat64(f)) == 0)
}
