package bqfake

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"modernc.org/sqlite"
)

// BigQuery's JSON type holds a number as an INT64, a UINT64 or a FLOAT64.
// PARSE_JSON(text, wide_number_mode => 'exact') fails on a number none of
// them holds exactly; 'round' stores the nearest FLOAT64. The fake's
// translations call these SQLite functions for the two modes:
//
//	bqfake_json_exact(text) -> the JSON text, or NULL where exact mode
//	                          fails (SAFE.PARSE_JSON)
//	bqfake_json_round(text) -> the JSON text with wide numbers rounded
//
// Exact numbers keep their text; object keys come out sorted.
func init() {
	for name, round := range map[string]bool{"bqfake_json_exact": false, "bqfake_json_round": true} {
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
			f, _ := strconv.ParseFloat(string(x), 64)
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return v
	}
	v = walk(v)
	if !ok && !round {
		return "", false, nil
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
