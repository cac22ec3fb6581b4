package worker_test

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/enginetest"
)

// handEdited is a sink and a way to change its sync_state behind its back,
// as a person does with the database's own tools.
type handEdited struct {
	name string
	open func(t *testing.T) (enginetest.Sink, func(t *testing.T, q string))
}

var handEditedSinks = []handEdited{
	{"sqlite", func(t *testing.T) (enginetest.Sink, func(*testing.T, string)) {
		path := filepath.Join(t.TempDir(), "w.db")
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, func(t *testing.T, q string) {
			t.Helper()
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("editing the database by hand: %v", err)
			}
		}
	}},
	{"bigquery", func(t *testing.T) (enginetest.Sink, func(*testing.T, string)) {
		s, _, fake := bqSinkOnFake(t)
		return s, func(t *testing.T, q string) {
			t.Helper()
			if _, err := fake.EditByHand(q); err != nil {
				t.Fatal(err)
			}
		}
	}},
}

// stateTable is the sync_state table as a hand edit names it in each
// sink.
func stateTable(sinkName string) string {
	if sinkName == "bigquery" {
		return `"test-project.formsync_test.sync_state"`
	}
	return "sync_state"
}

// TestHandDeletedStateHeals: the natural way to reset a form is to delete
// its sync_state row. The next sync reads the form from the start, finds
// every row stored already, and must neither count them as missing (the
// counter of inserts saw none) nor fail every later run as incomplete:
// the row count is recounted from the rows.
func TestHandDeletedStateHeals(t *testing.T) {
	t.Parallel()
	for _, hs := range handEditedSinks {
		t.Run(hs.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s, edit := hs.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 21, Variant: apisim.Newer, Forms: []string{"f1"}, SubmissionsPerForm: 8}, s)
			h.MustSync(ctx)
			edit(t, `DELETE FROM `+stateTable(hs.name)+` WHERE form_id = 'f1'`)
			h.MustSync(ctx)
			checkRowCount(t, h, "f1", 8)
			// And the run after it has nothing to do.
			h.MustSync(ctx)
			checkRowCount(t, h, "f1", 8)
		})
	}
}

// TestNegativeRowCountHeals: a row_count set to -1 by hand is recounted
// by the next sync instead of failing it as incomplete.
func TestNegativeRowCountHeals(t *testing.T) {
	t.Parallel()
	for _, hs := range handEditedSinks {
		t.Run(hs.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s, edit := hs.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 22, Variant: apisim.Newer, Forms: []string{"f1"}, SubmissionsPerForm: 8}, s)
			h.MustSync(ctx)
			edit(t, `UPDATE `+stateTable(hs.name)+` SET row_count = -1 WHERE form_id = 'f1'`)
			h.MustSync(ctx)
			checkRowCount(t, h, "f1", 8)
		})
	}
}

func checkRowCount(t *testing.T, h *enginetest.Harness, formID string, want int64) {
	t.Helper()
	st, err := h.Sink.ReadState(t.Context(), []string{formID})
	if err != nil {
		t.Fatal(err)
	}
	if got := st[formID].Rows; got != want {
		t.Errorf("form %s: row_count %d, want %d", formID, got, want)
	}
}

// TestRecountOnlyWhenTheCountFallsShort: in BigQuery a recount is a COUNT
// over the form's rows, billed by their size: a sync whose row count adds
// up (every idle run) runs none, and one whose count falls short runs one.
func TestRecountOnlyWhenTheCountFallsShort(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, rec, fake := bqSinkOnFake(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 23, Variant: apisim.Newer, Forms: []string{"f1"}, SubmissionsPerForm: 8}, s)
	recounts := func() int { return bytes.Count(rec.bytes(), []byte("CREATE TEMP TABLE _formsync_recount")) }
	h.MustSync(ctx)
	h.Sim.Add("f1", 2)
	h.MustSync(ctx)
	h.MustSync(ctx)
	if n := recounts(); n != 0 {
		t.Fatalf("%d recounts in syncs whose count added up, want none", n)
	}
	if _, err := fake.EditByHand(`UPDATE "test-project.formsync_test.sync_state" SET row_count = 3 WHERE form_id = 'f1'`); err != nil {
		t.Fatal(err)
	}
	h.MustSync(ctx)
	if n := recounts(); n != 1 {
		t.Errorf("%d recounts in a sync whose count fell short, want 1", n)
	}
	checkRowCount(t, h, "f1", 10)
}
