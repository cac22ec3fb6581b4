package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// distinct is rows with one row per key: what a table holds of
// submissions that are indistinguishable copies of each other.
func distinct(rows []sink.Row) []sink.Row {
	seen := map[string]bool{}
	var out []sink.Row
	for _, r := range rows {
		if !seen[r.ContentKey] {
			seen[r.ContentKey] = true
			out = append(out, r)
		}
	}
	return out
}

// testCopies serves, in the older response form, a submission twice on one
// page: same created_at, same content, no id to tell the two apart (a form
// posted twice at once). The table holds it once; the API counts it twice.
// That difference is not a missing row: the first sync succeeds without
// reading the form again, the runs after it make the requests of any other
// form, and a reconcile goes through.
func testCopies(t *testing.T, s enginetest.Sink, o apisim.Order) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 41, Variant: apisim.Older, Order: o, Forms: []string{"dup"}, SubmissionsPerForm: 60}, s)
	// 61 submissions, 25 a page: the 31st and 32nd oldest are on page 2
	// whichever way the form is sorted.
	orig := h.Sim.Submissions("dup")[30]
	if _, ok := h.Sim.AddCopy("dup", orig.ID); !ok {
		t.Fatal("no submission to copy")
	}
	idle := 1
	if o == apisim.OldestFirst {
		idle = 2
	}

	rep := h.MustSync(ctx)
	fr := enginetest.FormReport(t, rep, "dup")
	if fr.Inserted != 60 || fr.Copies != 1 || fr.Rescans != 0 || fr.Missing != 0 {
		t.Errorf("first sync: inserted %d, copies %d, rescans %d, missing %d; want 60, 1, 0, 0", fr.Inserted, fr.Copies, fr.Rescans, fr.Missing)
	}
	want := distinct(enginetest.Expected(t, h.Sim, "dup", apisim.Older))
	h.CheckTable(ctx, "dup", want)

	for i := range 2 {
		rep = h.MustSync(ctx)
		fr = enginetest.FormReport(t, rep, "dup")
		if fr.Requests != idle || fr.Rescans != 0 || fr.Inserted != 0 {
			t.Errorf("idle sync %d: %d requests, %d rescans, %d inserted; want %d, 0, 0", i+1, fr.Requests, fr.Rescans, fr.Inserted, idle)
		}
	}

	// New submissions, one of them posted twice: the copy is among the
	// new ones the total grew by, not a sign of a short read.
	added := h.Sim.Add("dup", 3)
	if _, ok := h.Sim.AddCopy("dup", added[1].ID); !ok {
		t.Fatal("no submission to copy")
	}
	rep = h.MustSync(ctx)
	if fr = enginetest.FormReport(t, rep, "dup"); fr.Inserted != 3 || fr.Rescans != 0 || fr.Copies != 1 {
		t.Errorf("sync of 3 new and a copy: inserted %d, rescans %d, copies %d; want 3, 0, 1", fr.Inserted, fr.Rescans, fr.Copies)
	}
	if st, err := s.ReadState(ctx, []string{"dup"}); err != nil || st["dup"].Copies.Count() != 2 {
		t.Errorf("copies stored after it: %v (%v), want two keys counted once", st["dup"].Copies, err)
	}

	rep = h.MustReconcile(ctx, "dup")
	if fr = enginetest.FormReport(t, rep, "dup"); fr.Deleted != 0 || fr.Copies != 2 {
		t.Errorf("reconcile: %d marked deleted, %d copies; want 0, 2", fr.Deleted, fr.Copies)
	}
	rep = h.MustSync(ctx)
	if fr = enginetest.FormReport(t, rep, "dup"); fr.Requests != idle || fr.Rescans != 0 {
		t.Errorf("sync after the reconcile: %d requests, %d rescans; want %d, 0", fr.Requests, fr.Rescans, idle)
	}
	h.CheckTable(ctx, "dup", distinct(enginetest.Expected(t, h.Sim, "dup", apisim.Older)))

	// Forgetting the submission forgets both: neither is stored again,
	// neither is missing, and the state no longer names its content key.
	key := want[30].ContentKey
	if want[30].CreatedAt != orig.CreatedAt {
		t.Fatalf("the copied submission is not the 31st row")
	}
	if _, err := h.Engine().Forget(ctx, "dup", sink.Match{Keys: []string{key}}, false); err != nil {
		t.Fatalf("forget: %v", err)
	}
	st, err := s.ReadState(ctx, []string{"dup"})
	if err != nil {
		t.Fatal(err)
	}
	if c := st["dup"].Copies; c[key] != 0 || c.Count() != 1 || st["dup"].Forgotten.Count != 2 {
		t.Errorf("after forget: copies %v, forgotten %d; want only the other copy, 2", c, st["dup"].Forgotten.Count)
	}
	for _, full := range []bool{false, true} {
		h.Config.Lookback = 0
		if full {
			h.Config.Lookback = 365 * 24 * time.Hour
		}
		rep = h.MustSync(ctx)
		if fr = enginetest.FormReport(t, rep, "dup"); fr.Rescans != 0 || fr.Inserted != 0 || fr.Forgotten == 0 && full {
			t.Errorf("sync after forget (full %v): %d rescans, %d inserted, %d forgotten skipped", full, fr.Rescans, fr.Inserted, fr.Forgotten)
		}
	}
	rows, err := s.ReadRows(ctx, "dup")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.SubmissionKey == key {
			t.Errorf("the forgotten submission is stored again")
		}
	}
	if st, err = s.ReadState(ctx, []string{"dup"}); err != nil || st["dup"].Copies[key] != 0 || st["dup"].Copies.Count() != 1 {
		t.Errorf("state after the syncs: copies %v (err %v), want only the other copy", st["dup"].Copies, err)
	}
	h.Config.Lookback = 0
	h.MustReconcile(ctx, "dup")
}

// TestCopiesInEverySink runs testCopies against SQLite (committing in
// parts, as the command does) and the BigQuery sink on its fake: each must
// keep the copies in its state.
func TestCopiesInEverySink(t *testing.T) {
	t.Parallel()
	for _, o := range orders {
		t.Run("sqlite/"+o.name, func(t *testing.T) { testCopies(t, inParts{openSQLite(t), 7}, o.o) })
		t.Run("bigquery/"+o.name, func(t *testing.T) {
			s, _ := bqSink(t)
			testCopies(t, s, o.o)
		})
	}
}

// TestCopiesUnknownToTheStateAreLearnt: a state that does not know of a
// form's copies (written by a formsync before it counted them) makes the
// completeness check read the form again once; that read learns them, and
// the run succeeds. The runs after it are idle.
func TestCopiesUnknownToTheStateAreLearnt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openSQLite(t)
	h := newHarness(t, apisim.Options{Seed: 43, Variant: apisim.Older, Forms: []string{"dup"}, SubmissionsPerForm: 40}, s)
	orig := h.Sim.Submissions("dup")[10]
	h.Sim.AddCopy("dup", orig.ID)
	h.MustSync(ctx)

	st, err := s.ReadState(ctx, []string{"dup"})
	if err != nil {
		t.Fatal(err)
	}
	old := st["dup"]
	if old.Copies.Count() != 1 {
		t.Fatalf("copies after the first sync: %v, want one", old.Copies)
	}
	old.Copies = nil
	if _, err := s.Commit(ctx, &sink.Commit{SyncedAt: time.Now(), Forms: []sink.FormCommit{{State: old}}}); err != nil {
		t.Fatal(err)
	}

	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "dup"); fr.Rescans != 1 || fr.Missing != 0 || fr.Inserted != 0 || fr.Copies != 1 {
		t.Errorf("sync with the copies unknown: %d rescans, %d missing, %d inserted, %d copies; want 1, 0, 0, 1", fr.Rescans, fr.Missing, fr.Inserted, fr.Copies)
	}
	rep = h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "dup"); fr.Rescans != 0 || fr.Requests != 1 {
		t.Errorf("the sync after it: %d rescans, %d requests; want 0, 1", fr.Rescans, fr.Requests)
	}
}

// TestCopiesInATieAcrossPages: copies at the end of a page whose
// created_at millisecond goes on over the next page are two places of one
// key, not a tie member served twice while another was skipped: the walk
// does not read the page again for the member it would think missing.
func TestCopiesInATieAcrossPages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 44, Variant: apisim.Older, Order: apisim.OldestFirst, Forms: []string{"dup"}, SubmissionsPerForm: 50}, memSink(t))
	// Oldest first, 25 a page: the submission, its copy and a third one in
	// the same microsecond are the 24th and 25th on page 1 and the 1st on
	// page 2.
	orig := h.Sim.Submissions("dup")[23]
	h.Sim.AddCopy("dup", orig.ID)
	h.Sim.AddAt("dup", orig.CreatedAt, 1)
	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "dup"); fr.Rescans != 0 || fr.Inserted != 51 || fr.Copies != 1 {
		t.Errorf("sync: %d rescans, %d inserted, %d copies; want 0, 51, 1", fr.Rescans, fr.Inserted, fr.Copies)
	}
	h.CheckTable(ctx, "dup", distinct(enginetest.Expected(t, h.Sim, "dup", apisim.Older)))
}

// TestCopiesAcrossAPageBorder: a submission and its copy, the last of one
// page and the first of the next, look like one submission served on both
// pages, so they are not counted and the form is reported one short (the
// known limit). A submission added ahead of them in a newest-first form
// moves them onto one page: the next run's full re-read counts the copy,
// and the form is complete.
func TestCopiesAcrossAPageBorder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 45, Variant: apisim.Older, Forms: []string{"dup"}, SubmissionsPerForm: 60}, memSink(t))
	// Newest first, 25 a page: the 25th newest and its copy (placed after
	// it) are the last of page 1 and the first of page 2.
	subs := h.Sim.Submissions("dup")
	if _, ok := h.Sim.AddCopy("dup", subs[len(subs)-25].ID); !ok {
		t.Fatal("no submission to copy")
	}
	rep := h.Sync(ctx)
	if fr := enginetest.FormReport(t, rep, "dup"); fr.Missing != 1 || fr.Copies != 0 {
		t.Fatalf("sync with the copies split: missing %d, copies %d; want 1, 0", fr.Missing, fr.Copies)
	}
	h.Sim.Add("dup", 1)
	rep = h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "dup"); fr.Missing != 0 || fr.Copies != 1 || fr.Inserted != 1 {
		t.Errorf("sync after one was added ahead: missing %d, copies %d, inserted %d; want 0, 1, 1", fr.Missing, fr.Copies, fr.Inserted)
	}
	h.CheckTable(ctx, "dup", distinct(enginetest.Expected(t, h.Sim, "dup", apisim.Older)))
}

// syncedWithAGoneCopy syncs form dup, whose submissions include one copy,
// into s, then deletes the copy upstream.
func syncedWithAGoneCopy(t *testing.T, s enginetest.Sink) *enginetest.Harness {
	t.Helper()
	ctx := t.Context()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 41, Variant: apisim.Older, Forms: []string{"dup"}, SubmissionsPerForm: 60}, s)
	cp, ok := h.Sim.AddCopy("dup", h.Sim.Submissions("dup")[30].ID)
	if !ok {
		t.Fatal("no submission to copy")
	}
	h.MustSync(ctx)
	if st, _ := s.ReadState(ctx, []string{"dup"}); st["dup"].Copies.Count() != 1 {
		t.Fatalf("copies after the first sync: %v, want one", st["dup"].Copies)
	}
	// Delete the copy upstream (Delete picks at random: put the others
	// back).
	for {
		d := h.Sim.Delete("dup", 1)[0]
		if d.ID == cp.ID {
			break
		}
		h.Sim.Restore("dup", d.ID)
	}
	return h
}

// A reconcile's commit that meets a commit of another process merges with
// it, but the copies it counts are those it saw: a copy deleted upstream
// since the other commit's state was written is not counted again.
func TestReconcileMergedWithAConcurrentCommitDropsGoneCopies(t *testing.T) {
	t.Parallel()
	for _, conflict := range []bool{false, true} {
		t.Run(fmt.Sprint("conflict=", conflict), func(t *testing.T) {
			ctx := t.Context()
			mem := memory.New()
			h := syncedWithAGoneCopy(t, mem)
			var s worker.Sink = mem
			if conflict {
				s = &bumpFirst{Sink: mem}
			}
			e, err := worker.New(client(t, h, nil), s, h.Config)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := e.Reconcile(ctx, "dup")
			if err != nil {
				t.Fatal(err)
			}
			if err := rep.Err(); err != nil {
				t.Fatal(err)
			}
			if conflict && rep.Conflicts == 0 {
				t.Fatal("the reconcile met no concurrent commit")
			}
			if st, _ := mem.ReadState(ctx, []string{"dup"}); st["dup"].Copies.Count() != 0 {
				t.Errorf("after the reconcile the state counts copies %v; the API serves none", st["dup"].Copies)
			}
		})
	}
}

// A sync or a backfill whose commit meets a reconcile committed since it
// read the state keeps the copies the reconcile counted, with those its
// own read saw: a copy the reconcile found deleted upstream, which the
// state it read still named, is not counted again.
func TestMergedWithAConcurrentReconcileDropsGoneCopies(t *testing.T) {
	t.Parallel()
	for _, run := range []struct {
		name string
		run  func(ctx context.Context, h *enginetest.Harness) (conflicts int, err error)
	}{
		{"sync", func(ctx context.Context, h *enginetest.Harness) (int, error) {
			rep := h.MustSync(ctx)
			return rep.Conflicts, nil
		}},
		{"backfill", func(ctx context.Context, h *enginetest.Harness) (int, error) {
			rep, err := h.Engine().Backfill(ctx, "dup", worker.BackfillOptions{})
			if err != nil {
				return 0, err
			}
			return rep.Conflicts, nil
		}},
	} {
		for _, sk := range deletionSinks {
			t.Run(run.name+"/"+sk.name, func(t *testing.T) {
				ctx := t.Context()
				base := sk.open(t)
				h := syncedWithAGoneCopy(t, base)
				reconciler := h.Engine()
				h.Sink = &onCommit{Sink: base, n: 1, hook: func(ctx context.Context, _ *sink.Commit) error {
					rep, err := reconciler.Reconcile(ctx, "dup")
					if err == nil {
						err = rep.Err()
					}
					return err
				}}
				conflicts, err := run.run(ctx, h)
				if err != nil {
					t.Fatal(err)
				}
				if conflicts == 0 {
					t.Fatalf("the %s met no concurrent commit", run.name)
				}
				if st, _ := base.ReadState(ctx, []string{"dup"}); st["dup"].Copies.Count() != 0 {
					t.Errorf("after the %s the state counts copies %v; the API serves none", run.name, st["dup"].Copies)
				}
			})
		}
	}
}
