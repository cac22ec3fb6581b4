package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/sinktest"
)

// A spool of descending ids (read backwards by the commit) inserts the new
// rows and updates the changed ones exactly as the same rows in ascending
// order (read forwards) do.
func TestCommitDescendingIDsMatchesAscending(t *testing.T) {
	t.Parallel()
	var desc, asc []sink.Row
	for id := int64(12); id >= 1; id-- {
		desc = append(desc, row(t, "f", ptr(id), t0, id%3 == 0, fmt.Sprintf(`{"n":%d,"v":"new"}`, id)))
	}
	for i := len(desc) - 1; i >= 0; i-- {
		asc = append(asc, desc[i])
	}
	tables := map[string]string{}
	for name, rows := range map[string][]sink.Row{"descending": desc, "ascending": asc} {
		s, _ := open(t)
		// Rows 1..6 are stored already; 2 and 5 as the incoming version.
		var stored []sink.Row
		for id := int64(1); id <= 6; id++ {
			v := "old"
			if id == 2 || id == 5 {
				v = "new"
			}
			stored = append(stored, row(t, "f", ptr(id), t0, id%3 == 0, fmt.Sprintf(`{"n":%d,"v":%q}`, id, v)))
		}
		commit(t, s, sink.FormCommit{State: stateOf("f", "n", "v"), Rows: sinktest.Spool(t, stored...)})
		sp := sinktest.Spool(t, rows...)
		if got := sp.DescendingIDs(); got != (name == "descending") {
			t.Fatalf("%s: DescendingIDs = %v", name, got)
		}
		res := commit(t, s, sink.FormCommit{State: stateOf("f", "n", "v"), Rows: sp})
		if got := res["f"]; got.Inserted != 6 || got.Updated != 4 {
			t.Errorf("%s: %+v, want 6 inserted, 4 updated", name, got)
		}
		var dump string
		if err := s.db.QueryRow(`SELECT group_concat(submission_key || ':' || fields || ':' || is_spam, ' ') FROM (SELECT * FROM submissions ORDER BY submission_key)`).Scan(&dump); err != nil {
			t.Fatal(err)
		}
		tables[name] = dump
		s.Close()
	}
	if tables["descending"] != tables["ascending"] {
		t.Errorf("tables differ:\n%s\n%s", tables["descending"], tables["ascending"])
	}
}

// indexSQL is how sqlite_schema holds the created_at index, "" when the
// file has none.
func indexSQL(t *testing.T, s *Sink) string {
	t.Helper()
	var q sql.NullString
	err := s.db.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = 'submissions_form_created'`).Scan(&q)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return q.String
}

// contentRows are n rows of form f keyed by content.
func contentRows(t *testing.T, f string, n int) []sink.Row {
	var rows []sink.Row
	for i := range n {
		rows = append(rows, row(t, f, nil, t0.Add(-time.Duration(i)*time.Second), false, fmt.Sprintf(`{"n":%d}`, i)))
	}
	return rows
}

// A first load of rows keyed by content drops the created_at index and
// builds it again in its transaction: the file ends with the index the
// schema creates, whole, planned for time ranges, and the connection's
// page cache as it was.
func TestFirstLoadRebuildsTheCreatedIndex(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	s.db.SetMaxOpenConns(1) // the commit's connection is the one queried
	want := indexSQL(t, s)
	if want == "" {
		t.Fatal("a new file has no created_at index")
	}
	c := &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: stateOf("old", "n"), Rows: sinktest.Spool(t, contentRows(t, "old", 500)...)}}}
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	rebuild, err := dropCreatedIndex(t.Context(), tx, c)
	tx.Rollback()
	if err != nil || !rebuild {
		t.Fatalf("a first load does not rebuild the index: %v, %v", rebuild, err)
	}
	res, err := s.Commit(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res["old"].Inserted != 500 {
		t.Errorf("inserted %d, want 500", res["old"].Inserted)
	}
	if got := indexSQL(t, s); got != want {
		t.Errorf("after the load the index is %q, want %q", got, want)
	}
	var check string
	if err := s.db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
	var plan string
	rows, err := s.db.Query(`EXPLAIN QUERY PLAN SELECT count(*) FROM submissions WHERE form_id = 'old' AND created_at > '2026'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan += detail + "; "
	}
	rows.Close()
	if !strings.Contains(plan, "submissions_form_created") {
		t.Errorf("a time range is planned as %q", plan)
	}
	var cache int
	if err := s.db.QueryRow(`PRAGMA cache_size`).Scan(&cache); err != nil || cache != -cacheKiB {
		t.Errorf("cache_size %d after the load, want %d (%v)", cache, -cacheKiB, err)
	}
}

// The index is kept by commits that stage fewer rows keyed by content than
// the table holds (a backfill's checkpoint among them), by reconciles and
// by rows with ids; and a first load refused for a stale revision leaves
// it too. A backfill's checkpoint of as many rows as the table holds
// rebuilds it.
func TestCreatedIndexKept(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	want := indexSQL(t, s)
	commit(t, s, sink.FormCommit{State: stateOf("old", "n"), Rows: sinktest.Spool(t, contentRows(t, "old", 100)...)})
	backfill := stateOf("new", "n")
	backfill.Backfill = &state.Backfill{Since: t0.Add(-time.Hour), Until: t0, StartedAt: t0}
	for name, fc := range map[string]sink.FormCommit{
		"fewer rows": {State: stateOf("more", "n"), Rows: sinktest.Spool(t, contentRows(t, "more", 99)...)},
		"reconcile":  {State: stateOf("old", "n"), Reconcile: true, Rows: sinktest.Spool(t, contentRows(t, "old", 200)...)},
		"backfill":   {State: backfill, Rows: sinktest.Spool(t, contentRows(t, "new", 99)...)},
		"ids":        {State: stateOf("ids", "n"), Rows: sinktest.Spool(t, row(t, "ids", ptr(1), t0, false, `{"n":1}`))},
	} {
		tx, err := s.db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		rebuild, err := dropCreatedIndex(t.Context(), tx, &sink.Commit{Forms: []sink.FormCommit{fc}})
		tx.Rollback()
		if err != nil || rebuild {
			t.Errorf("%s: rebuild %v, %v", name, rebuild, err)
		}
	}
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	rebuild, err := dropCreatedIndex(t.Context(), tx, &sink.Commit{Forms: []sink.FormCommit{{State: backfill, Rows: sinktest.Spool(t, contentRows(t, "new", 100)...)}}})
	tx.Rollback()
	if err != nil || !rebuild {
		t.Errorf("a backfill checkpoint of as many rows as stored: rebuild %v, %v", rebuild, err)
	}
	stale := stateOf("old", "n")
	stale.Revision = 7
	_, err = s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: stale, Rows: sinktest.Spool(t, contentRows(t, "old", 300)...)}}})
	if !errors.Is(err, sink.ErrStateConflict) {
		t.Fatalf("stale commit: %v", err)
	}
	if got := indexSQL(t, s); got != want {
		t.Errorf("after a refused first load the index is %q, want %q", got, want)
	}
}
