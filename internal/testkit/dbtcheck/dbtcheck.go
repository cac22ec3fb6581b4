// Package dbtcheck holds a generated dbt project to dbt's own rules
// without dbt, which comes from Python's package registry: its YAML files
// against dbt Labs' published JSON schemas (testdata/dbt-jsonschema,
// Apache License 2.0), and its models' SQL, with the Jinja that names
// relations replaced by the relation, ready to run or analyze.
//
//	dbtcheck.Validate(t, files)                // every .yml but profiles.yml
//	sql := dbtcheck.Resolve(t, model, func(source, table string) string {
//		return `"main".` + `"` + table + `"`
//	}, nil)
package dbtcheck

import (
	"bytes"
	"embed"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

//go:embed testdata/dbt-jsonschema/*.json
var schemaFiles embed.FS

var (
	compileOnce sync.Once
	projectSch  *jsonschema.Schema
	ymlSch      *jsonschema.Schema
	compileErr  error
)

func schemas() (project, yml *jsonschema.Schema, err error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		// The schemas' patterns are ECMAScript's (lookaheads), which Go's
		// regexp does not take.
		c.UseRegexpEngine(ecmaRegexp)
		for _, name := range []string{"dbt_project-latest.json", "dbt_yml_files-latest.json"} {
			b, err := schemaFiles.ReadFile("testdata/dbt-jsonschema/" + name)
			if err != nil {
				compileErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				compileErr = err
				return
			}
			if err := c.AddResource(name, doc); err != nil {
				compileErr = err
				return
			}
		}
		if projectSch, compileErr = c.Compile("dbt_project-latest.json"); compileErr != nil {
			return
		}
		ymlSch, compileErr = c.Compile("dbt_yml_files-latest.json")
	})
	return projectSch, ymlSch, compileErr
}

type ecmaPattern regexp2.Regexp

func (re *ecmaPattern) MatchString(s string) bool {
	ok, err := (*regexp2.Regexp)(re).MatchString(s)
	return err == nil && ok
}

func (re *ecmaPattern) String() string { return (*regexp2.Regexp)(re).String() }

func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	return (*ecmaPattern)(re), nil
}

// Check validates one YAML file of a dbt project against the schema dbt
// Labs publishes for it: dbt_project.yml against the project's, any other
// against the property files' (sources, models, tests).
func Check(name string, content []byte) error {
	project, yml, err := schemas()
	if err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(content)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	if path.Base(name) == "dbt_project.yml" {
		return project.Validate(doc)
	}
	return yml.Validate(doc)
}

// Validate checks every YAML file in files (slash paths to content) but
// profiles.yml, which no schema covers, and fails tb for each that breaks
// dbt's schema. It fails too when files hold no dbt_project.yml.
func Validate(tb testing.TB, files map[string][]byte) {
	tb.Helper()
	if _, ok := files["dbt_project.yml"]; !ok {
		tb.Errorf("no dbt_project.yml among %d files", len(files))
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !strings.HasSuffix(n, ".yml") || path.Base(n) == "profiles.yml" {
			continue
		}
		if err := Check(n, files[n]); err != nil {
			tb.Errorf("%s breaks dbt's schema: %v", n, err)
		}
	}
}

var relationRE = regexp.MustCompile(`\{\{\s*(source|ref)\(\s*'([^']*)'\s*(?:,\s*'([^']*)'\s*)?\)\s*\}\}`)

// Resolve replaces each {{ source('s', 't') }} in sql with source(s, t)
// and each {{ ref('m') }} with ref(m), and fails tb when any Jinja is left
// after that: what remains is the SQL dbt would run.
func Resolve(tb testing.TB, sql string, source func(source, table string) string, ref func(model string) string) string {
	tb.Helper()
	out := relationRE.ReplaceAllStringFunc(sql, func(m string) string {
		g := relationRE.FindStringSubmatch(m)
		if g[1] == "source" {
			return source(g[2], g[3])
		}
		if ref == nil {
			tb.Errorf("ref(%q) with no models to resolve it", g[2])
			return m
		}
		return ref(g[2])
	})
	for _, j := range []string{"{{", "{%", "{#"} {
		if strings.Contains(out, j) {
			tb.Errorf("Jinja left after resolving relations:\n%s", out)
			break
		}
	}
	return out
}
