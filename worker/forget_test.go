package worker_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/enginetest"
)

// namesInClear reports the forgotten keys that st's watermarks still name:
// in a boundary, or as the watermark's id.
func namesInClear(st state.Form, keys []string) []string {
	var named []string
	ws := []state.Watermark{st.Watermark}
	if st.Backfill != nil {
		ws = append(ws, st.Backfill.Watermark)
	}
	for _, k := range keys {
		for _, w := range ws {
			if slices.Contains(w.Boundary, k) || (w.ID != 0 && strconv.FormatInt(w.ID, 10) == k) {
				named = append(named, k)
			}
		}
	}
	return named
}

// TestForgetLeavesNoKeyInTheWatermark: forgetting the newest submissions,
// the ones the watermark names, leaves no key of theirs in the state in
// clear (the tombstones are keyed hashes), and the next sync reads as
// little as before and stores nothing of them.
func TestForgetLeavesNoKeyInTheWatermark(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		for _, v := range variants {
			t.Run(sk.name+"/"+v.name, func(t *testing.T) {
				ctx := t.Context()
				s := sk.open(t)
				h := enginetest.NewHarness(t, apisim.Options{Seed: 11, Variant: v.v, Forms: []string{"f"}, SubmissionsPerForm: 40}, s)
				h.MustSync(ctx)
				before := readStates(t, s, "f")["f"]
				keys := slices.Clone(before.Watermark.Boundary)
				if len(keys) == 0 {
					t.Fatalf("watermark %+v names no submission", before.Watermark)
				}
				if _, err := h.Engine().Forget(ctx, "f", sink.Match{Keys: keys}, false); err != nil {
					t.Fatal(err)
				}
				st := readStates(t, s, "f")["f"]
				if named := namesInClear(st, keys); len(named) > 0 {
					t.Errorf("after the forget the watermark %+v names forgotten %v", st.Watermark, named)
				}
				if !st.Watermark.CreatedAt.Equal(before.Watermark.CreatedAt) {
					t.Errorf("watermark moved from %v to %v", before.Watermark.CreatedAt, st.Watermark.CreatedAt)
				}

				requests := h.Sim.Stats().Requests
				rep := h.MustSync(ctx)
				if fr := enginetest.FormReport(t, rep, "f"); fr.Inserted != 0 || fr.Err != nil {
					t.Errorf("sync after the forget: %d inserted, %v", fr.Inserted, fr.Err)
				}
				if n := h.Sim.Stats().Requests - requests; n > 2 {
					t.Errorf("sync after the forget made %d requests, want at most 2", n)
				}
				checkForgotten(t, h, "f", v.v, keys)
				if named := namesInClear(readStates(t, s, "f")["f"], keys); len(named) > 0 {
					t.Errorf("after a sync the watermark names forgotten %v", named)
				}
			})
		}
	}
}

// TestSyncMergedWithAForgetLeavesNoKey: a sync that read a submission
// before it was forgotten commits after the forget; its watermark, merged
// with the forget's state, does not name the submission either.
func TestSyncMergedWithAForgetLeavesNoKey(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			base := sk.open(t)
			var h *enginetest.Harness
			var key string
			s := &onCommit{Sink: base, n: 2, hook: func(ctx context.Context, _ *sink.Commit) error {
				_, err := h.Engine().Forget(ctx, "f", sink.Match{Keys: []string{key}}, false)
				return err
			}}
			h = enginetest.NewHarness(t, apisim.Options{Seed: 12, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 30}, s)
			h.MustSync(ctx) // commit 1
			added := h.Sim.Add("f", 1)
			key = strconv.FormatInt(added[0].ID, 10)
			rep := h.MustSync(ctx) // commit 2: the forget commits first
			if fr := enginetest.FormReport(t, rep, "f"); fr.Err != nil {
				t.Fatalf("sync: %v", fr.Err)
			}
			checkForgotten(t, h, "f", apisim.Newer, []string{key})
			if named := namesInClear(readStates(t, base, "f")["f"], []string{key}); len(named) > 0 {
				t.Errorf("the merged watermark names forgotten %v", named)
			}
		})
	}
}

// checkForgotten checks that the form's table holds every submission the
// simulator serves but those of keys.
func checkForgotten(t *testing.T, h *enginetest.Harness, formID string, v apisim.Variant, keys []string) {
	t.Helper()
	want := slices.DeleteFunc(enginetest.Expected(t, h.Sim, formID, v), func(r sink.Row) bool {
		return slices.Contains(keys, r.SubmissionKey)
	})
	h.CheckTable(t.Context(), formID, want)
}

func readStates(t *testing.T, s enginetest.Sink, ids ...string) map[string]state.Form {
	t.Helper()
	st, err := s.ReadState(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
