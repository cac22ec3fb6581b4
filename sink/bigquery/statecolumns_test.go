package bigquery

import (
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/formsync/formsync/sink/sqlite"
)

// TestStateColumnsMatchSQLite keeps sync_state's columns the same in both
// sinks, so that one query (and the README's) reads either. The one
// exception is max_submission_id, the bound that spares a BigQuery commit
// a scan of partitions outside its batch (docs/bigquery.md); SQLite looks
// keys up by index and needs no such bound.
func TestStateColumnsMatchSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path) // the driver sqlite registers
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM pragma_table_info('sync_state') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lite []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		lite = append(lite, n)
	}
	var bq []string
	for _, f := range stateSchema() {
		// field_types comes to both sinks together; a SQLite sink without
		// it yet is checked on the columns before it.
		if f.Name == "field_types" && !slices.Contains(lite, f.Name) {
			continue
		}
		if f.Name != "max_submission_id" {
			bq = append(bq, f.Name)
		}
	}
	if !slices.Equal(lite, bq) {
		t.Errorf("sync_state columns differ:\n sqlite   %v\n bigquery %v", lite, bq)
	}
}
