package bqfake

import (
	"strings"
	"testing"
)

func TestNormaliseJSON(t *testing.T) {
	for _, tt := range []struct {
		in, exact, round string
	}{
		{`{"b":1,"a":0.1}`, `{"a":0.1,"b":1}`, `{"a":0.1,"b":1}`},
		{`[9223372036854775807,18446744073709551615,-9223372036854775808]`, `[9223372036854775807,18446744073709551615,-9223372036854775808]`, `[9223372036854775807,18446744073709551615,-9223372036854775808]`},
		{`{"n":123456789012345678901234567890}`, "", `{"n":1.2345678901234568e+29}`},
		{`[1.000000000000000000001]`, "", `[1]`},
		{`[18446744073709551616]`, `[18446744073709551616]`, `[18446744073709551616]`}, // 2^64: a FLOAT64 exactly
		{`[18446744073709551617]`, "", `[1.8446744073709552e+19]`},
	} {
		got, ok, err := normaliseJSON(tt.in, false)
		if err != nil || (ok && got != tt.exact) || (!ok && tt.exact != "") {
			t.Errorf("exact %s = %q, %v, %v; want %q", tt.in, got, ok, err, tt.exact)
		}
		got, ok, err = normaliseJSON(tt.in, true)
		if err != nil || !ok || got != tt.round {
			t.Errorf("round %s = %q, %v, %v; want %q", tt.in, got, ok, err, tt.round)
		}
	}
}

func TestNullStructMemberRefused(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	raw := `{"queryParameters":[{"name":"states","parameterType":{"type":"ARRAY","arrayType":{"type":"STRUCT","structTypes":[
		{"name":"form_id","type":{"type":"STRING"}},{"name":"at","type":{"type":"TIMESTAMP"}}]}},
		"parameterValue":{"arrayValues":[{"structValues":{"form_id":{"value":"f"},"at":{}}}]}}]}`
	params, err := decodeParams([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	err = materialise(tx, "states", params["states"])
	if err == nil || !strings.Contains(err.Error(), "NULL inside a STRUCT") {
		t.Errorf("a NULL member was accepted: %v", err)
	}
}
