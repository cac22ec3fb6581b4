package dbtcheck

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// DataTest is one generic data test of a column in a project's property
// files, as dbt reads it.
type DataTest struct {
	File string // the property file
	// Source names the source of a source table's test; empty for a
	// model's.
	Source string
	// Relation is the source table or the model the test is on.
	Relation string
	// Column is the column's name as the file writes it, and Quote its
	// quote: dbt puts the name into the test's SQL as it is, quoted (by
	// the adapter's rule) only where quote is true.
	Column string
	Quote  bool
	// Test is the generic test: not_null, unique or accepted_values.
	Test string
	// Values and QuoteValues are accepted_values' arguments (quote
	// defaults to true).
	Values      []string
	QuoteValues bool
	// Where is the test's where: config, if any.
	Where string
}

func (d DataTest) String() string {
	return fmt.Sprintf("%s of %s.%s (%s)", d.Test, d.Relation, d.Column, d.File)
}

type propColumn struct {
	Name      string `json:"name"`
	Quote     bool   `json:"quote"`
	DataTests []any  `json:"data_tests"`
	Tests     []any  `json:"tests"`
}

// DataTests lists every generic test of a column in the property files
// among files (the .yml files but dbt_project.yml and profiles.yml), in
// file order. A test of a form dbt-core would read but this does not
// know fails tb.
func DataTests(tb testing.TB, files map[string][]byte) []DataTest {
	tb.Helper()
	var names []string
	for n := range files {
		if strings.HasSuffix(n, ".yml") && path.Base(n) != "dbt_project.yml" && path.Base(n) != "profiles.yml" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []DataTest
	for _, n := range names {
		var props struct {
			Sources []struct {
				Name   string `json:"name"`
				Tables []struct {
					Name    string       `json:"name"`
					Columns []propColumn `json:"columns"`
				} `json:"tables"`
			} `json:"sources"`
			Models []struct {
				Name    string       `json:"name"`
				Columns []propColumn `json:"columns"`
			} `json:"models"`
		}
		if err := yaml.Unmarshal(files[n], &props); err != nil {
			tb.Fatalf("%s: %v", n, err)
		}
		add := func(source, rel string, cols []propColumn) {
			for _, c := range cols {
				for _, t := range append(slices.Clone(c.DataTests), c.Tests...) {
					d := DataTest{File: n, Source: source, Relation: rel, Column: c.Name, Quote: c.Quote}
					if err := d.read(t); err != nil {
						tb.Errorf("%s: a test of %s.%s: %v", n, rel, c.Name, err)
						continue
					}
					out = append(out, d)
				}
			}
		}
		for _, s := range props.Sources {
			for _, t := range s.Tables {
				add(s.Name, t.Name, t.Columns)
			}
		}
		for _, m := range props.Models {
			add("", m.Name, m.Columns)
		}
	}
	return out
}

// read fills d from one entry of a column's data_tests: a test's name, or
// a map of its name to its arguments: and config:.
func (d *DataTest) read(t any) error {
	switch v := t.(type) {
	case string:
		d.Test = v
	case map[string]any:
		if len(v) != 1 {
			return fmt.Errorf("%v: one test name expected", v)
		}
		for name, body := range v {
			d.Test = name
			b, ok := body.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %v is not a map", name, body)
			}
			for k := range b {
				if k != "arguments" && k != "config" {
					return fmt.Errorf("%s: %q is outside the arguments and config keys", name, k)
				}
			}
			args, _ := b["arguments"].(map[string]any)
			cfg, _ := b["config"].(map[string]any)
			d.Where, _ = cfg["where"].(string)
			d.QuoteValues = true
			if q, ok := args["quote"].(bool); ok {
				d.QuoteValues = q
			}
			vals, _ := args["values"].([]any)
			for _, x := range vals {
				d.Values = append(d.Values, fmt.Sprint(x))
			}
		}
	default:
		return fmt.Errorf("%v: neither a name nor a map", t)
	}
	switch d.Test {
	case "not_null", "unique":
	case "accepted_values":
		if len(d.Values) == 0 {
			return fmt.Errorf("accepted_values without values")
		}
	default:
		return fmt.Errorf("no SQL known for the test %q", d.Test)
	}
	return nil
}

// SQL is the test's query as dbt compiles it for relation rel (dbt's
// default__test_not_null, __test_unique and __test_accepted_values, the
// relation wrapped in the where: filter if the test has one): the column
// as the file writes it, passed through quote only where the file says
// quote: true. The test fails when the query returns rows.
func (d DataTest) SQL(rel string, quote func(string) string) string {
	c := d.Column
	if d.Quote {
		c = quote(c)
	}
	if d.Where != "" {
		rel = "(select * from " + rel + " where " + d.Where + ") dbt_subquery"
	}
	switch d.Test {
	case "not_null":
		return "select " + c + "\nfrom " + rel + "\nwhere " + c + " is null"
	case "unique":
		return "select\n    " + c + " as unique_field,\n    count(*) as n_records\nfrom " + rel +
			"\nwhere " + c + " is not null\ngroup by " + c + "\nhaving count(*) > 1"
	}
	vals := make([]string, len(d.Values))
	for i, v := range d.Values {
		if d.QuoteValues {
			v = "'" + v + "'"
		}
		vals[i] = v
	}
	return "with all_values as (\n    select\n        " + c + " as value_field,\n        count(*) as n_records\n    from " + rel +
		"\n    group by " + c + "\n)\nselect *\nfrom all_values\nwhere value_field not in (\n    " + strings.Join(vals, ",") + "\n)"
}

// QuoteSQLite and QuoteBigQuery are the adapters' quoting of a name
// (adapter.quote): dbt-sqlite's double quotes, dbt-bigquery's backticks.
func QuoteSQLite(name string) string   { return `"` + name + `"` }
func QuoteBigQuery(name string) string { return "`" + name + "`" }

// SourceFreshness is a source table's freshness rule, as dbt 1.10 reads
// it: under the table's config:.
type SourceFreshness struct {
	File, Source, Table, LoadedAtField string
}

// FreshnessRules lists the source tables of the property files among
// files that have a freshness rule, which dbt source freshness evaluates.
func FreshnessRules(tb testing.TB, files map[string][]byte) []SourceFreshness {
	tb.Helper()
	var out []SourceFreshness
	var names []string
	for n := range files {
		if strings.HasSuffix(n, ".yml") && path.Base(n) != "dbt_project.yml" && path.Base(n) != "profiles.yml" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		var props struct {
			Sources []struct {
				Name   string `json:"name"`
				Config struct {
					Freshness     any    `json:"freshness"`
					LoadedAtField string `json:"loaded_at_field"`
				} `json:"config"`
				Tables []struct {
					Name   string `json:"name"`
					Config struct {
						Freshness     any    `json:"freshness"`
						LoadedAtField string `json:"loaded_at_field"`
					} `json:"config"`
				} `json:"tables"`
			} `json:"sources"`
		}
		if err := yaml.Unmarshal(files[n], &props); err != nil {
			tb.Fatalf("%s: %v", n, err)
		}
		for _, s := range props.Sources {
			for _, t := range s.Tables {
				if t.Config.Freshness == nil && s.Config.Freshness == nil {
					continue
				}
				field := t.Config.LoadedAtField
				if field == "" {
					field = s.Config.LoadedAtField
				}
				out = append(out, SourceFreshness{File: n, Source: s.Name, Table: t.Name, LoadedAtField: field})
			}
		}
	}
	return out
}

// FreshnessSQL is dbt's collect_freshness query for the rule on relation
// rel, with now the adapter's current_timestamp() (dbt-sqlite's is
// datetime()).
func (f SourceFreshness) FreshnessSQL(rel, now string) string {
	return "select\n  max(" + f.LoadedAtField + ") as max_loaded_at,\n  " + now + " as snapshotted_at\nfrom " + rel
}

// CheckFreshnessValue is dbt-adapters' rule (base/impl.py, _utc) for the
// values collect_freshness returns: each must be a timestamp, or dbt
// source freshness errors.
func (f SourceFreshness) CheckFreshnessValue(v any) error {
	switch v.(type) {
	case time.Time:
		return nil
	case nil:
		return fmt.Errorf("expected a non-null value when querying field %q of table %s", f.LoadedAtField, f.Table)
	}
	return fmt.Errorf("expected a timestamp value when querying field %q of table %s but received value of type %T", f.LoadedAtField, f.Table, v)
}
