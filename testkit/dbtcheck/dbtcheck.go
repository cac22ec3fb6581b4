// Package dbtcheck holds a generated dbt project to dbt's own rules
// without dbt, which comes from Python's package registry: its YAML files
// against dbt Labs' published JSON schemas (testdata/dbt-jsonschema,
// Apache License 2.0), and its models' SQL, with the Jinja that names
// relations replaced by the relation, ready to run or analyze.
//
//	dbtcheck.Validate(t, files)                // every .yml, profiles.yml too
//	sql := dbtcheck.Resolve(t, model, func(source, table string) string {
//		return `"main".` + `"` + table + `"`
//	}, nil)
package dbtcheck

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
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

// The schemas, each file's under its name: the lenient ones as dbt-core
// reads the files, the strict ones (-fusion) as the dbt Fusion engine
// does, which are also the forms dbt-core 1.10 and later accepts without
// a deprecation warning.
var (
	projectSchemas = []string{"dbt_project-latest.json", "dbt_project-latest-fusion.json"}
	ymlSchemas     = []string{"dbt_yml_files-latest.json", "dbt_yml_files-latest-fusion.json"}
	// profileOutput is one target of profiles.yml: the file's top level
	// in the published schema admits only an empty document (its map of
	// profiles did not survive the schema's generation), so Check reads
	// the profiles and their targets itself and holds each target's
	// settings to this definition.
	profileOutput = "profiles-latest-fusion.json#/definitions/DbConfig"
)

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
)

func schemas() (map[string]*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		// The schemas' patterns are ECMAScript's (lookaheads), which Go's
		// regexp does not take.
		c.UseRegexpEngine(ecmaRegexp)
		names := append(append([]string{"profiles-latest-fusion.json"}, projectSchemas...), ymlSchemas...)
		for _, name := range names {
			b, err := schemaFiles.ReadFile("testdata/dbt-jsonschema/" + name)
			if err != nil {
				compileErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				compileErr = fmt.Errorf("%s: %w", name, err)
				return
			}
			if err := c.AddResource(name, doc); err != nil {
				compileErr = err
				return
			}
		}
		compiled = map[string]*jsonschema.Schema{}
		for _, name := range append(names[1:], profileOutput) {
			s, err := c.Compile(name)
			if err != nil {
				compileErr = fmt.Errorf("compiling %s: %w", name, err)
				return
			}
			compiled[name] = s
		}
	})
	return compiled, compileErr
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

// Check validates one YAML file of a dbt project against every schema
// dbt Labs publishes for it, lenient and strict: dbt_project.yml against
// the project's, profiles.yml against the profiles' (see CheckProfiles),
// any other against the property files' (sources, models, tests).
func Check(name string, content []byte) error {
	all, err := schemas()
	if err != nil {
		return err
	}
	if path.Base(name) == "profiles.yml" {
		return CheckProfiles(content)
	}
	doc, err := yamlDoc(content)
	if err != nil {
		return err
	}
	names := ymlSchemas
	if path.Base(name) == "dbt_project.yml" {
		names = projectSchemas
	}
	var errs []error
	for _, n := range names {
		if err := all[n].Validate(doc); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func yamlDoc(content []byte) (any, error) {
	j, err := yaml.YAMLToJSON(content)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(j))
}

// sqliteKeys are the settings of a dbt-sqlite target (its
// SQLiteCredentials and dbt's own), which the published profiles schema
// does not cover: the dbt Fusion engine has no SQLite adapter.
var sqliteKeys = map[string]bool{
	"type": true, "threads": true, "database": true, "schema": true,
	"schemas_and_paths": true, "schema_directory": true, "extensions": true,
}

// CheckProfiles validates profiles.yml: a map of profiles, each a target
// and its outputs, the target naming one of them; every output of another
// adapter than dbt-sqlite against the published profiles schema's
// definition of a target's settings, a dbt-sqlite one against that
// adapter's own settings, all required but extensions.
func CheckProfiles(content []byte) error {
	all, err := schemas()
	if err != nil {
		return err
	}
	var profiles map[string]map[string]any
	if err := yaml.UnmarshalStrict(content, &profiles); err != nil {
		return fmt.Errorf("profiles.yml: %w", err)
	}
	if len(profiles) == 0 {
		return errors.New("profiles.yml holds no profile")
	}
	var errs []error
	for name, p := range profiles {
		for k := range p {
			if k != "target" && k != "outputs" {
				errs = append(errs, fmt.Errorf("profile %s: unknown key %q", name, k))
			}
		}
		target, _ := p["target"].(string)
		outputs, _ := p["outputs"].(map[string]any)
		if _, ok := outputs[target]; !ok {
			errs = append(errs, fmt.Errorf("profile %s: target %q is not among its outputs", name, target))
		}
		for oname, o := range outputs {
			out, ok := o.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("profile %s output %s: not a map", name, oname))
				continue
			}
			if out["type"] == "sqlite" {
				for k := range out {
					if !sqliteKeys[k] {
						errs = append(errs, fmt.Errorf("profile %s output %s: dbt-sqlite has no setting %q", name, oname, k))
					}
				}
				for k := range sqliteKeys {
					if _, ok := out[k]; !ok && k != "extensions" {
						errs = append(errs, fmt.Errorf("profile %s output %s: dbt-sqlite needs %q", name, oname, k))
					}
				}
				continue
			}
			b, err := yaml.Marshal(out)
			if err != nil {
				return err
			}
			doc, err := yamlDoc(b)
			if err != nil {
				return err
			}
			if err := all[profileOutput].Validate(doc); err != nil {
				errs = append(errs, fmt.Errorf("profile %s output %s: %w", name, oname, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Validate checks every YAML file in files (slash paths to content) with
// Check, and fails tb for each that breaks one of dbt's schemas. It fails
// too when files hold no dbt_project.yml.
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
		if !strings.HasSuffix(n, ".yml") {
			continue
		}
		if err := Check(n, files[n]); err != nil {
			tb.Errorf("%s breaks dbt's schema: %v", n, err)
		}
	}
}

var (
	relationRE = regexp.MustCompile(`\{\{\s*(source|ref)\(\s*'([^']*)'\s*(?:,\s*'([^']*)'\s*)?\)\s*\}\}`)
	configRE   = regexp.MustCompile(`\{\{\s*config\(([^)]*)\)\s*\}\}`)
	settingRE  = regexp.MustCompile(`(\w+)\s*=\s*'([^']*)'`)
)

// Config is the settings of the {{ config(key = 'value', ...) }} calls
// in a model's or a test's SQL.
func Config(sql string) map[string]string {
	out := map[string]string{}
	for _, m := range configRE.FindAllStringSubmatch(sql, -1) {
		for _, kv := range settingRE.FindAllStringSubmatch(m[1], -1) {
			out[kv[1]] = kv[2]
		}
	}
	return out
}

// Resolve replaces each {{ source('s', 't') }} in sql with source(s, t)
// and each {{ ref('m') }} with ref(m), drops the {{ config(...) }} calls
// (which render as nothing; see Config), and fails tb when any Jinja is
// left after that: what remains is the SQL dbt would run.
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
	out = configRE.ReplaceAllString(out, "")
	for _, j := range []string{"{{", "{%", "{#"} {
		if strings.Contains(out, j) {
			tb.Errorf("Jinja left after resolving relations:\n%s", out)
			break
		}
	}
	return out
}
