package dbt

import (
	"fmt"
	"strings"

	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state"
)

// Freshness on dbt-sqlite. dbt source freshness needs the database to
// return timestamps (dbt-adapters refuses a naive or a string value), and
// SQLite returns synced_at, and datetime(), as text: no source freshness
// can pass there. So a SQLite project carries no freshness: on its
// sources and checks the same rule with singular data tests, run by dbt
// build and dbt test: one with severity warn past WarnAfter, one with
// severity error past ErrorAfter. Each returns a row per relation (the
// submissions table and each form's view) whose newest synced_at is older
// than its threshold; the warning also lists a relation that holds no row
// yet, which source freshness reports as well.

// TestDir holds the project's generated singular data tests.
const TestDir = "tests/formsync"

// Names of the freshness tests.
const (
	FreshnessWarnTest  = "formsync_freshness_warn"
	FreshnessErrorTest = "formsync_freshness_error"
)

// freshnessTests are the SQLite project's freshness tests and their
// property file, by path; none when the project has no freshness rule.
func (p Project) freshnessTests(forms []state.Form) (map[string][]byte, error) {
	out := map[string][]byte{}
	var props []singularTest
	for _, t := range []struct {
		name, severity string
		after          *period
	}{
		{FreshnessWarnTest, "warn", dbtPeriod(p.Freshness.WarnAfter)},
		{FreshnessErrorTest, "error", dbtPeriod(p.Freshness.ErrorAfter)},
	} {
		if t.after == nil {
			continue
		}
		out[TestDir+"/"+t.name+".sql"] = []byte(freshnessSQL(forms, t.severity, *t.after))
		desc := fmt.Sprintf("Source freshness for dbt-sqlite, which cannot run dbt source freshness: a row, at severity %s, for each of formsync's submissions table and forms' views whose newest synced_at is more than %d %s(s) old", t.severity, t.after.Count, t.after.Period)
		if t.severity == "warn" {
			desc += ", or that holds no row yet"
		}
		props = append(props, singularTest{Name: t.name, Description: desc + "."})
	}
	if len(props) == 0 {
		return nil, nil
	}
	b, err := yamlFile(testsFile{Version: 2, DataTests: props})
	if err != nil {
		return nil, err
	}
	out[TestDir+"/_formsync__tests.yml"] = b
	return out, nil
}

type (
	testsFile struct {
		Version   int            `yaml:"version"`
		DataTests []singularTest `yaml:"data_tests"`
	}
	singularTest struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
)

var periodSeconds = map[string]int64{"minute": 60, "hour": 3600, "day": 86400}

// freshnessSQL is a freshness test for dbt-sqlite: the relations whose
// newest synced_at is older than after (and, at severity warn, those with
// no row). synced_at is RFC 3339 UTC text, which julianday reads, as it
// reads 'now', in UTC.
func freshnessSQL(forms []state.Form, severity string, after period) string {
	rels := []string{"submissions"}
	for _, f := range forms {
		rels = append(rels, view.Name(f.FormID))
	}
	var b strings.Builder
	b.WriteString("-- " + Marker + "\n")
	fmt.Fprintf(&b, "-- Rows: formsync's relations whose newest synced_at is over %d %s(s) old", after.Count, after.Period)
	if severity == "warn" {
		b.WriteString(", or empty")
	}
	b.WriteString(".\n")
	fmt.Fprintf(&b, "{{ config(severity = '%s') }}\n", severity)
	b.WriteString("with newest as (\n")
	for i, r := range rels {
		if i > 0 {
			b.WriteString("    union all\n")
		}
		// The names are the sink's ([a-z0-9_]): safe in a string literal.
		fmt.Fprintf(&b, "    select '%s' as relation, max(\"synced_at\") as newest_synced_at from {{ source('%s', '%s') }}\n", r, SourceName, r)
	}
	b.WriteString(")\n")
	age := "(julianday('now') - julianday(newest_synced_at)) * 86400"
	b.WriteString("select relation, newest_synced_at, cast(round(" + age + ") as integer) as age_seconds\nfrom newest\nwhere ")
	if severity == "warn" {
		b.WriteString("newest_synced_at is null or ")
	}
	fmt.Fprintf(&b, "%s > %d\n", age, after.Count*periodSeconds[after.Period])
	return b.String()
}
