package bigquery

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
)

// TestCommitSendsOnlyTheTombstonesItChanges: after 3,000 keys are
// forgotten, a sync's commit request is as large as before any was: the
// tombstones stay in sync_tombstones, and a commit sends only those it
// adds or whose pending flag it changes. They read back exactly.
func TestCommitSendsOnlyTheTombstonesItChanges(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	var rows []sink.Row
	for i := range 3 {
		rows = append(rows, b.row(t, "f", int64(i+1), i, false))
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows[:2]), rows[:2]})

	b.fake.ResetStats()
	st := readState(t, b.sink, "f")["f"]
	st.Forgotten = nil
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{st, rows[2:]})
	before := b.fake.Stats().MaxQueryRequest

	fg, err := state.NewForgotten()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 3000 {
		keys = append(keys, fmt.Sprintf("no-such-key-%d", i))
	}
	st = readState(t, b.sink, "f")["f"]
	st.Forgotten = fg.With(1, "forgotten-before").WithUnstored(keys...)
	b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{st, nil})
	want := st.Forgotten
	if got := readState(t, b.sink, "f")["f"].Forgotten; !reflect.DeepEqual(got, want) {
		t.Fatalf("tombstones read back: %d keys, %d pending, count %d; want %d, %d, %d",
			len(got.Keys), len(got.Pending), got.Count, len(want.Keys), len(want.Pending), want.Count)
	}

	// A sync that meets two pending tombstones: what it sends does not
	// grow with the 3,001 tombstones.
	b.fake.ResetStats()
	st = readState(t, b.sink, "f")["f"]
	st.Forgotten = st.Forgotten.Met(keys[0], keys[1])
	b.mustCommit(t, b.t0.Add(4*time.Hour), formRows{st, []sink.Row{b.row(t, "f", 9, 9, false)}})
	after := b.fake.Stats().MaxQueryRequest
	t.Logf("largest query request: %d bytes before any forget, %d with 3,001 tombstones", before, after)
	if after > before+1500 {
		t.Errorf("a commit's request grew from %d to %d bytes with 3,001 tombstones: they travel with every commit", before, after)
	}
	got := readState(t, b.sink, "f")["f"].Forgotten
	if !reflect.DeepEqual(got, st.Forgotten) {
		t.Fatalf("after meeting two: %d keys, %d pending, count %d; want %d, %d, %d",
			len(got.Keys), len(got.Pending), got.Count, len(st.Forgotten.Keys), len(st.Forgotten.Pending), st.Forgotten.Count)
	}
	if !got.Has(keys[5]) || !got.IsPending(keys[5]) || got.IsPending(keys[0]) || got.Count != 3 {
		t.Errorf("tombstones read back wrong: has %v, pending %v/%v, count %d", got.Has(keys[5]), got.IsPending(keys[5]), got.IsPending(keys[0]), got.Count)
	}
}

// TestOpenMovesTombstonesOutOfSyncState: a dataset of the formsync that
// kept the tombstones in sync_state.forgotten has them moved into
// sync_tombstones when a newer one opens it, once, with the form's
// revision moved; they read back as they were.
func TestOpenMovesTombstonesOutOfSyncState(t *testing.T) {
	t.Parallel()
	fake, cfg, ds := olderDataset(t, map[string]bq.Schema{
		submissionsTable: submissionsSchema(), stateTable: stateSchema(), lockTable: lockSchema(),
	})
	fg, err := state.NewForgotten()
	if err != nil {
		t.Fatal(err)
	}
	fg = fg.With(2, "1", "2", "c1").WithUnstored("typo")
	text, err := jsonOf(fg)
	if err != nil {
		t.Fatal(err)
	}
	line := `{"form_id":"f","revision":3,"row_count":5,"updated_at":"2026-03-04T05:06:07Z","forgotten":` + text + "}\n"
	src := bq.NewReaderSource(strings.NewReader(line))
	src.SourceFormat = bq.JSON
	job, err := ds.Table(stateTable).LoaderFrom(src).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := job.Wait(t.Context()); err != nil || st.Err() != nil {
		t.Fatalf("loading the old state: %v %v", err, st.Err())
	}

	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	got := readState(t, s, "f")["f"]
	if !reflect.DeepEqual(got.Forgotten, fg) {
		t.Errorf("tombstones after the move: %+v, want %+v", got.Forgotten, fg)
	}
	if got.Revision != 4 {
		t.Errorf("revision %d after the move, want 4 (a commit that read it before must be refused)", got.Revision)
	}
	stored := tableRows(t, ds, stateTable)
	if f := fmt.Sprint(stored[0]["forgotten"]); strings.Contains(f, fg.Tombstone("1")) || !strings.Contains(f, fg.Salt) {
		t.Errorf("sync_state.forgotten after the move = %s, want the salt and the count only", f)
	}
	if n := len(tableRows(t, ds, tombstonesTable)); n != len(fg.Keys) {
		t.Errorf("%d rows in sync_tombstones, want %d", n, len(fg.Keys))
	}
	// A second Open moves nothing.
	fake.ResetStats()
	s2, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if n := fake.Stats().QueryJobs; n != 0 {
		t.Errorf("a second Open ran %d query jobs, want none", n)
	}
}

func jsonOf(v any) (string, error) {
	var b strings.Builder
	enc := jsonEncoder(&b)
	err := enc.Encode(v)
	return strings.TrimSpace(b.String()), err
}

// tableRows reads a whole table (tabledata.list).
func tableRows(t *testing.T, ds *bq.Dataset, table string) []map[string]bq.Value {
	t.Helper()
	it := ds.Table(table).Read(t.Context())
	var out []map[string]bq.Value
	for {
		row := map[string]bq.Value{}
		err := it.Next(&row)
		if err == iterator.Done {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
}

func jsonEncoder(w *strings.Builder) *json.Encoder { return json.NewEncoder(w) }
