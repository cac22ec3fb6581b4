// Package dbt writes a dbt project over what formsync keeps in a sink:
// sources for the submissions table, sync_state, submission_files and each
// form's view, and one staging model per form that gives every field
// column its type.
//
// A Project describes the sink (its adapter and where its tables live),
// the forms (their stored state: field names and types) and how fresh the
// rows must be. Files renders the project, deterministically; Write puts
// it in a directory:
//
//	p := dbt.Project{
//		Adapter:    dbt.SQLite,
//		SQLitePath: "/data/formsync.db",
//		Dir:        "/srv/formsync_dbt", // the project's, absolute
//		Forms:      states, // from the sink's ReadState
//		Freshness:  dbt.FreshnessFor(15 * time.Minute),
//	}
//	files, err := p.Files()
//	// handle err
//	res, err := dbt.Write("formsync_dbt", files, false)
//	// res says what was written, left unchanged, kept (the user's) and removed
//
// What is generated:
//
//	dbt_project.yml
//	profiles.yml                               the configured adapter's profile
//	models/formsync/_formsync__sources.yml     sources, freshness, key tests
//	models/formsync/_formsync__models.yml      staging models: types, tests
//	models/formsync/stg_formsync__<view>.sql   one per form
//	sqlite_schemas/.gitignore                  SQLite: dbt's schema_directory
//	tests/formsync/formsync_freshness_*.sql    SQLite: freshness as data tests
//	tests/formsync/_formsync__tests.yml        their descriptions
//
// The files are in dbt 1.10's forms (MinDBTVersion), which the dbt Fusion
// engine reads too: a source table's freshness under config:, a generic
// test's inputs under arguments:. BigQuery's sources carry dbt source
// freshness; dbt-sqlite cannot evaluate it (SQLite returns text where dbt
// needs timestamps), so a SQLite project checks the same rule with a warn
// and an error data test (freshness.go).
//
// Every generated file starts with a marker line (Marker, as an SQL or a
// YAML comment). Write overwrites or removes a file only when it carries
// the marker: a file the user wrote, or one whose marker line the user
// deleted to take it over, is never touched. A staging model of a form no
// longer in the project is removed when it still carries the marker. Each
// file is written to a temporary file beside it and renamed into place.
//
// Names: the sources and columns are the sink's own view and column names
// (package sink/view), which are [a-z0-9_] and quoted in the models' SQL
// all the same (a column may be named like a keyword). dbt writes a column
// into its tests' SQL as it is, so the property files say quote: true on
// every column whose name the adapter's SQL needs quoted (quote.go). A field's original name,
// which may hold anything, appears only in the column's description,
// YAML-encoded and with its braces escaped for Jinja, which dbt renders
// descriptions with.
//
// Types: the sink's view already types each field column, casting safely
// (docs/types.md), so the staging model selects the columns as they are;
// the schema file gives each its data_type in the adapter's terms, from
// the type the form's state gives the field.
package dbt
