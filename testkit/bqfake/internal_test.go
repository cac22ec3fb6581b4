package bqfake

import (
	"strings"
	"testing"

	bqv2 "google.golang.org/api/bigquery/v2"
)

func TestNormaliseJSON(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
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

// TestExplainTellsEqualityFromOr is the control for the sink's MERGE plan
// test: on the same tables, the join on one match key is an index search,
// and the former condition (key = k OR key = legacy key) is not.
func TestExplainTellsEqualityFromOr(t *testing.T) {
	t.Parallel()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		`CREATE TEMP TABLE t (form_id TEXT, submission_key TEXT, submission_id INTEGER)`,
		`CREATE TEMP TABLE p (form_id TEXT, submission_key TEXT, match_key TEXT, legacy_key TEXT)`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		 INSERT INTO t SELECT 'f', CAST(i AS TEXT), i FROM n`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
		 INSERT INTO p SELECT 'f', CAST(i AS TEXT), CAST(i AS TEXT), NULL FROM n`,
	} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	search := func(plan string) bool {
		for _, l := range strings.Split(plan, "\n") {
			if strings.HasPrefix(l, "SEARCH") && strings.Contains(l, "INDEX") && strings.Contains(l, "key=?") {
				return true
			}
		}
		return false
	}
	eq, err := explain(tx, `SELECT t.rowid FROM temp.p AS p JOIN temp.t AS t ON t.form_id = p.form_id AND t.submission_key = p.match_key`)
	if err != nil {
		t.Fatal(err)
	}
	or, err := explain(tx, `SELECT t.rowid FROM temp.p AS p JOIN temp.t AS t ON t.form_id = p.form_id
		AND (t.submission_key = p.submission_key OR (t.submission_id IS NULL AND t.submission_key = p.legacy_key))`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("equality:\n%sor:\n%s", eq, or)
	if !search(eq) || search(or) {
		t.Errorf("EXPLAIN does not tell the joins apart:\nequality:\n%sor:\n%s", eq, or)
	}
}

// TestPartitionsModifiedLimit: a job may modify 4,000 partitions of a
// table, not one more, and the error is BigQuery's.
func TestPartitionsModifiedLimit(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const ref = "p.d.t"
	s.tables[ref] = &bqv2.Table{TimePartitioning: &bqv2.TimePartitioning{Type: "DAY", Field: "at"}}
	s.meter = newMeter()
	days := make([]int64, maxPartitionsModified)
	for i := range days {
		days[i] = int64(i)
	}
	if err := s.touchDays(nil, ref, days, false); err != nil {
		t.Fatalf("%d partitions: %v", len(days), err)
	}
	if err := s.touchDays(nil, ref, days[:10], false); err != nil {
		t.Fatalf("the same partitions again: %v", err)
	}
	err = s.touchDays(nil, ref, []int64{-1}, false)
	if err == nil || !strings.Contains(err.Error(), "Too many partitions produced by query, allowed 4000, query produces at least 4001 partitions") {
		t.Errorf("4,001 partitions: %v", err)
	}
}
