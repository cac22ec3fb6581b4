package sqlite

import (
	"fmt"
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sinktest"
)

// A spool of descending ids (read backwards by the commit) inserts the new
// rows and updates the changed ones exactly as the same rows in ascending
// order (read forwards) do.
func TestCommitDescendingIDsMatchesAscending(t *testing.T) {
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
