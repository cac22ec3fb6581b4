package bigquery

import (
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/bqfake"
)

// TestFieldTypesRoundTrip: the types of a form's fields, seen and pinned,
// are stored in sync_state with the rest of its state and read back as
// written; a form without any reads back none, and a read-only Sink on a
// sync_state no sync of this formsync has migrated reads them as none.
func TestFieldTypesRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	rows := []sink.Row{b.row(t, "typed", 1, 1, false)}
	st := formState("typed", rows, "email", "n")
	st.FieldTypes = fieldtype.Columns{
		Seen:   fieldtype.Set{"email": fieldtype.String, "n": fieldtype.Integer},
		Pinned: fieldtype.Set{"n": fieldtype.Decimal},
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{st, rows}, formRows{state: formState("plain", nil)})
	got := readState(t, b.sink, "typed", "plain")
	if diff := cmp.Diff(st.FieldTypes, got["typed"].FieldTypes); diff != "" {
		t.Errorf("field types read back (-want +got):\n%s", diff)
	}
	if ft := got["plain"].FieldTypes; ft.Seen != nil || ft.Pinned != nil {
		t.Errorf("a form without types read back %+v", ft)
	}

	// Widened by a later commit.
	next := got["typed"]
	next.FieldTypes.Seen = fieldtype.Set{"email": fieldtype.String, "n": fieldtype.String}
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{state: next})
	if diff := cmp.Diff(next.FieldTypes, readState(t, b.sink, "typed")["typed"].FieldTypes); diff != "" {
		t.Errorf("widened field types read back (-want +got):\n%s", diff)
	}

	var prev bq.Schema
	for _, f := range stateSchema() {
		if f.Name != "field_types" {
			prev = append(prev, f)
		}
	}
	_, cfg, ds := olderDataset(t, map[string]bq.Schema{"submissions": submissionsSchema(), "sync_state": prev})
	loadNDJSON(t, ds.Table("sync_state"), prev, `{"form_id":"old","sort_order":"newest_first","last_total":"1","row_count":"1","field_names":["a"],"updated_at":"2026-03-04T06:00:00Z","revision":"2"}`)
	ro, err := OpenReadOnly(t.Context(), cfg)
	if err != nil {
		t.Fatalf("read-only open of a sync_state without field_types: %v", err)
	}
	defer ro.Close()
	old := readState(t, ro, "old")["old"]
	if old.Revision != 2 || old.FieldTypes.Seen != nil || old.FieldTypes.Pinned != nil {
		t.Errorf("state read without field_types: %+v", old)
	}
}
