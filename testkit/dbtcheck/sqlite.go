package dbtcheck

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// OpenSQLite connects to a profile's target of type sqlite as dbt-sqlite
// does (its connections.py): the file of schema main is the connection's,
// every other entry of schemas_and_paths is attached under its name, then
// every *.db file in schema_directory not already among them is attached
// under its file name without .db, and a name taken twice is an error.
// SQLite itself refuses main and temp, and more than ten attached files.
// The caller registers the "sqlite" database/sql driver; the one
// connection is closed with the test.
func OpenSQLite(tb testing.TB, profiles []byte) (*sql.DB, error) {
	tb.Helper()
	var doc map[string]struct {
		Target  string `json:"target"`
		Outputs map[string]struct {
			Type            string            `json:"type"`
			SchemasAndPaths map[string]string `json:"schemas_and_paths"`
			SchemaDirectory string            `json:"schema_directory"`
		} `json:"outputs"`
	}
	if err := yaml.Unmarshal(profiles, &doc); err != nil {
		return nil, fmt.Errorf("profiles.yml: %w", err)
	}
	if len(doc) != 1 {
		return nil, fmt.Errorf("profiles.yml: %d profiles, want one", len(doc))
	}
	for _, p := range doc {
		out, ok := p.Outputs[p.Target]
		if !ok || out.Type != "sqlite" {
			return nil, fmt.Errorf("profiles.yml: target %q is not a sqlite output", p.Target)
		}
		return attach(tb, out.SchemasAndPaths, out.SchemaDirectory)
	}
	panic("unreachable")
}

func attach(tb testing.TB, schemas map[string]string, schemaDir string) (*sql.DB, error) {
	ctx := context.Background()
	mainPath, ok := schemas["main"]
	if !ok {
		return nil, fmt.Errorf("at least one schema must be called 'main'")
	}
	db, err := sql.Open("sqlite", mainPath)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	tb.Cleanup(func() { db.Close() })
	abs := map[string]bool{}
	for _, p := range schemas {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		abs[a] = true
	}
	attached := []string{"main"}
	names := make([]string, 0, len(schemas))
	for n := range schemas {
		if n != "main" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if _, err := db.ExecContext(ctx, "attach ? as ?", schemas[n], n); err != nil {
			return nil, fmt.Errorf("attaching %s as %s: %w", schemas[n], n, err)
		}
		attached = append(attached, n)
	}
	found, err := filepath.Glob(filepath.Join(schemaDir, "*.db"))
	if err != nil {
		return nil, err
	}
	for _, path := range found {
		a, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		if abs[a] {
			continue
		}
		schema := strings.TrimSuffix(filepath.Base(path), ".db")
		if slices.Contains(attached, schema) {
			return nil, fmt.Errorf("found %s while scanning schema_directory, but cannot attach it as '%s' because that schema name is already defined in schemas_and_paths", path, schema)
		}
		if _, err := db.ExecContext(ctx, "attach ? as ?", path, schema); err != nil {
			return nil, fmt.Errorf("attaching %s as %s: %w", path, schema, err)
		}
		attached = append(attached, schema)
	}
	if err := db.PingContext(ctx); err != nil {
		return nil, err
	}
	return db, nil
}
