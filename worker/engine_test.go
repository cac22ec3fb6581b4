package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker/formsapi"
)

// open returns a fresh, empty sink for one test: the in-memory reference
// sink, since what these scenarios prove is about reading the API, and
// every sink's own promises are checked by testkit/sinktest.
type open func(t *testing.T) enginetest.Sink

func memSink(t *testing.T) enginetest.Sink {
	s := memory.New()
	t.Cleanup(func() { s.Close() })
	return s
}

var variants = []struct {
	name string
	v    apisim.Variant
}{{"older", apisim.Older}, {"newer", apisim.Newer}, {"live", apisim.Live}}

var orders = []struct {
	name string
	o    apisim.Order
}{{"newest-first", apisim.NewestFirst}, {"oldest-first", apisim.OldestFirst}}

// TestScenarios syncs simulated forms through the engine under every shape
// the API takes (both response forms, both orders, ties, pages moving
// while they are read, backdated inserts, a form switching response forms,
// lookback, failing forms and commits) and checks the table is exact.
func TestScenarios(t *testing.T) {
	t.Parallel()
	runScenarios(t, memSink)
}

// TestScenariosInParts runs every scenario again with the sync committing
// each form's rows in parts of 7 while it reads on (Config.PartRows):
// the tables must come out the same.
func TestScenariosInParts(t *testing.T) {
	t.Parallel()
	runScenarios(t, func(t *testing.T) enginetest.Sink { return inParts{memSink(t), 7} })
}

// inParts is a sink whose scenarios sync in parts of rows rows.
type inParts struct {
	enginetest.Sink
	rows int
}

// partsOf is the Config.PartRows a scenario's sink asks for.
func partsOf(s enginetest.Sink) int {
	switch s := s.(type) {
	case inParts:
		return s.rows
	case *failingSink:
		return partsOf(s.Sink)
	}
	return 0
}

// newHarness is enginetest.NewHarness with the sink's parts applied.
func newHarness(t *testing.T, opts apisim.Options, s enginetest.Sink) *enginetest.Harness {
	t.Helper()
	h := enginetest.NewHarness(t, opts, s)
	h.Config.PartRows = partsOf(s)
	// As the command runs a sync into SQLite.
	h.Config.SortContentKeys = h.Config.PartRows > 0
	return h
}

func runScenarios(t *testing.T, open open) {
	for _, v := range variants {
		for _, o := range orders {
			t.Run("Incremental/"+v.name+"/"+o.name, func(t *testing.T) {
				t.Parallel()
				testIncremental(t, open(t), v.v, o.o)
			})
			t.Run("MovingPages/"+v.name+"/"+o.name, func(t *testing.T) {
				t.Parallel()
				testMovingPages(t, open(t), v.v, o.o)
			})
		}
		t.Run("Ties/"+v.name, func(t *testing.T) {
			t.Parallel()
			testTies(t, open(t), v.v)
		})
	}
	t.Run("OnePage/live", func(t *testing.T) {
		t.Parallel()
		testOnePage(t, open(t))
	})
	t.Run("SwitchingForms", func(t *testing.T) {
		t.Parallel()
		testSwitching(t, open(t))
	})
	for _, o := range orders {
		t.Run("OlderToNewer/"+o.name, func(t *testing.T) {
			t.Parallel()
			testOlderToNewer(t, open(t), o.o)
		})
		t.Run("BackdatedInsert/"+o.name, func(t *testing.T) {
			t.Parallel()
			testBackdated(t, open(t), o.o)
		})
		t.Run("Copies/"+o.name, func(t *testing.T) {
			t.Parallel()
			testCopies(t, open(t), o.o)
		})
	}
	t.Run("MovingPagesManySeeds", func(t *testing.T) {
		t.Parallel()
		testMovingSeeds(t, open)
	})
	t.Run("Lookback", func(t *testing.T) {
		t.Parallel()
		testLookback(t, open(t))
	})
	t.Run("FailingFormDoesNotBlockOthers", func(t *testing.T) {
		t.Parallel()
		testFailingForm(t, open(t))
	})
	t.Run("FailedCommitChangesNothing", func(t *testing.T) {
		t.Parallel()
		testFailedCommit(t, open(t))
	})
	t.Run("FailureBetweenPages", func(t *testing.T) {
		t.Parallel()
		testFailureBetweenPages(t, open(t))
	})
}

func perPage(v apisim.Variant, asked int) int {
	if v == apisim.Older {
		return 25
	}
	return asked
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func testIncremental(t *testing.T, s enginetest.Sink, v apisim.Variant, o apisim.Order) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 1, Variant: v, Order: o, Forms: []string{"alpha", "beta"}, SubmissionsPerForm: 95}, s)
	rep := h.MustSync(ctx)
	for _, f := range []string{"alpha", "beta"} {
		fr := enginetest.FormReport(t, rep, f)
		if fr.Inserted != 95 {
			t.Errorf("first sync of %s inserted %d rows, want 95", f, fr.Inserted)
		}
		wantParts := 0
		if rows := partsOf(s); rows > 0 && v != apisim.Older {
			// A part every rows rows staged; the rest comes with the
			// watermark. Rows keyed by content are never committed in
			// parts.
			wantParts = 95 / rows
		}
		if fr.Parts != wantParts {
			t.Errorf("first sync of %s committed %d parts, want %d", f, fr.Parts, wantParts)
		}
		h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, v))
	}

	// Nothing new: the minimum number of requests, nothing written.
	rep = h.MustSync(ctx)
	maxReq := map[apisim.Order]int{apisim.NewestFirst: 1, apisim.OldestFirst: 2}[o]
	for _, f := range []string{"alpha", "beta"} {
		fr := enginetest.FormReport(t, rep, f)
		if fr.Requests > maxReq {
			t.Errorf("unchanged %s cost %d requests, want at most %d", f, fr.Requests, maxReq)
		}
		if fr.Inserted != 0 || fr.Updated != 0 {
			t.Errorf("unchanged %s: %d inserted, %d updated, want none", f, fr.Inserted, fr.Updated)
		}
	}

	// N new: at most ceil(N / page size) + 1 requests newest-first (one
	// more oldest-first, for page 1).
	const n = 23
	h.Sim.Add("alpha", n)
	rep = h.MustSync(ctx)
	fr := enginetest.FormReport(t, rep, "alpha")
	bound := ceilDiv(n, perPage(v, h.Config.PageSize)) + 1
	if o == apisim.OldestFirst {
		bound++
	}
	if fr.Inserted != n {
		t.Errorf("after adding %d, inserted %d", n, fr.Inserted)
	}
	if fr.Requests > bound {
		t.Errorf("%d new submissions cost %d requests, want at most %d", n, fr.Requests, bound)
	}
	for _, f := range []string{"alpha", "beta"} {
		h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, v))
	}
	st, err := s.ReadState(ctx, []string{"alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if got := st["alpha"].Rows; got != 95+n {
		t.Errorf("sync_state rows = %d, want %d", got, 95+n)
	}
	wantOrder := map[apisim.Order]state.Order{apisim.NewestFirst: state.OrderNewestFirst, apisim.OldestFirst: state.OrderOldestFirst}[o]
	if got := st["alpha"].Order; got != wantOrder {
		t.Errorf("detected order %q, want %q", got, wantOrder)
	}
}

func testTies(t *testing.T, s enginetest.Sink, v apisim.Variant) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 2, Variant: v, Order: apisim.NewestFirst, Forms: []string{"ties"}, SubmissionsPerForm: 60, TieEvery: 2}, s)
	h.MustSync(ctx)
	h.CheckTable(ctx, "ties", enginetest.Expected(t, h.Sim, "ties", v))

	// More submissions at the watermark's very timestamp, then a run of
	// ties that straddles a page boundary.
	subs := h.Sim.Submissions("ties")
	h.Sim.AddAt("ties", subs[len(subs)-1].CreatedAt, 3)
	h.MustSync(ctx)
	h.CheckTable(ctx, "ties", enginetest.Expected(t, h.Sim, "ties", v))
	h.Sim.AddAt("ties", subs[len(subs)-1].CreatedAt.Add(time.Second), 2*perPage(v, h.Config.PageSize)+3)
	h.MustSync(ctx)
	h.MustSync(ctx)
	h.CheckTable(ctx, "ties", enginetest.Expected(t, h.Sim, "ties", v))

	h.Sim.SetOrder(apisim.OldestFirst)
	h.Sim.AddAt("ties", subs[len(subs)-1].CreatedAt.Add(time.Second), 4)
	h.MustSync(ctx)
	h.CheckTable(ctx, "ties", enginetest.Expected(t, h.Sim, "ties", v))
}

func testMovingPages(t *testing.T, s enginetest.Sink, v apisim.Variant, o apisim.Order) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{
		Seed: 3, Variant: v, Order: o, Forms: []string{"busy"}, SubmissionsPerForm: 120,
		MutateEvery: 2, AddPerMutation: 2, DeletePerMutation: 1,
	}, s)
	h.Sync(ctx)
	h.Sim.Add("busy", 5)
	h.Sync(ctx)
	h.Sim.SetMutation(0, 0, 0) // the form goes quiet
	h.MustSync(ctx)
	h.CheckTable(ctx, "busy", enginetest.Expected(t, h.Sim, "busy", v), enginetest.DeletedRows(t, h.Sim, "busy", v)...)
}

// testMovingSeeds mutates forms of every shape (ties everywhere, several
// additions and deletions per page read) under many seeds: 2 by default,
// 10 with FORMSYNC_SLOW_TESTS=1.
func testMovingSeeds(t *testing.T, open open) {
	seeds := int64(10)
	if !enginetest.SlowTests() {
		seeds = 2
	}
	for seed := int64(1); seed <= seeds; seed++ {
		for _, v := range variants {
			for _, o := range orders {
				t.Run(fmt.Sprintf("%d/%s/%s", seed, v.name, o.name), func(t *testing.T) {
					t.Parallel()
					ctx := t.Context()
					h := newHarness(t, apisim.Options{
						Seed: seed, Variant: v.v, Order: o.o, Forms: []string{"busy"}, SubmissionsPerForm: 150,
						MutateEvery: 1 + int(seed%3), AddPerMutation: int(seed % 4), DeletePerMutation: 1 + int(seed%2), TieEvery: int(seed % 5),
					}, open(t))
					h.Sync(ctx)
					h.Sim.Add("busy", 5)
					h.Sync(ctx)
					h.Sync(ctx)
					h.Sim.SetMutation(0, 0, 0)
					h.MustSync(ctx)
					h.CheckTable(ctx, "busy", enginetest.Expected(t, h.Sim, "busy", v.v), enginetest.DeletedRows(t, h.Sim, "busy", v.v)...)
				})
			}
		}
	}
}

// testOnePage: a live form on a single page answers "links": [].
func testOnePage(t *testing.T, s enginetest.Sink) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 31, Variant: apisim.Live, Forms: []string{"tiny"}, SubmissionsPerForm: 7}, s)
	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "tiny"); fr.Inserted != 7 || fr.Requests != 1 {
		t.Errorf("one-page live form: %d inserted in %d requests, want 7 in 1", fr.Inserted, fr.Requests)
	}
	h.CheckTable(ctx, "tiny", enginetest.Expected(t, h.Sim, "tiny", apisim.Live))
	rows, _ := s.ReadRows(ctx, "tiny")
	for _, r := range rows {
		if !strings.Contains(r.Raw, `"data":{`) || strings.Contains(r.Raw, `"fields"`) {
			t.Errorf("raw %s is not the live object as served", r.Raw)
			break
		}
	}
}

// testSwitching moves a form between the three response forms, with new
// submissions in between: every submission stays stored exactly once.
//
// A row loaded from the older form is re-keyed to its id when it is next
// read with one. Read in the live form, which sends no files, a row with
// files cannot be matched to its content key (README, Known limits): so
// after the older form the newer one reads every row again, as a lookback
// would. Without that, whether the rows added under the older form were
// re-read by the next sync depended on the clock (those in the
// watermark's millisecond are), and the test on the timing.
func testSwitching(t *testing.T, s enginetest.Sink) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 32, Variant: apisim.Live, Forms: []string{"f"}, SubmissionsPerForm: 45, TieEvery: 6}, s)
	prev := apisim.Live
	for _, v := range []apisim.Variant{apisim.Live, apisim.Newer, apisim.Live, apisim.Older, apisim.Newer, apisim.Live} {
		h.Sim.SetVariant(v)
		h.Sim.Add("f", 6)
		h.Config.Lookback = 0
		if prev == apisim.Older {
			h.Config.Lookback = 365 * 24 * time.Hour
		}
		prev = v
		rep := h.MustSync(ctx)
		if v == apisim.Older {
			continue // rows read by content: checked once ids are back
		}
		if fr := enginetest.FormReport(t, rep, "f"); fr.Err != nil {
			t.Fatal(fr.Err)
		}
		h.CheckKeys(ctx, "f", enginetest.Expected(t, h.Sim, "f", v))
	}
	// Read everything again: every row becomes what the live form says.
	h.Config.Lookback = 365 * 24 * time.Hour
	h.MustSync(ctx)
	h.CheckTable(ctx, "f", enginetest.Expected(t, h.Sim, "f", apisim.Live))
}

func testOlderToNewer(t *testing.T, s enginetest.Sink, o apisim.Order) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 4, Variant: apisim.Older, Order: o, Forms: []string{"moving"}, SubmissionsPerForm: 70, TieEvery: 5}, s)
	h.MustSync(ctx)
	h.Sim.SetVariant(apisim.Newer)
	h.MustSync(ctx)
	h.Sim.Add("moving", 12)
	rep := h.MustSync(ctx)
	if got := enginetest.FormReport(t, rep, "moving").Inserted; got != 12 {
		t.Errorf("after the switch, inserted %d, want 12", got)
	}
	// Every submission once: by id where it was read in the newer form, by
	// content where it was loaded from the older form and not read since.
	h.CheckTable(ctx, "moving", enginetest.Expected(t, h.Sim, "moving", apisim.Newer))
}

func testBackdated(t *testing.T, s enginetest.Sink, o apisim.Order) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Order: o, Forms: []string{"late"}, SubmissionsPerForm: 80}, s)
	h.MustSync(ctx)
	subs := h.Sim.Submissions("late")
	h.Sim.AddAt("late", subs[10].CreatedAt.Add(time.Millisecond), 1) // behind the watermark
	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "late"); fr.Inserted != 1 || fr.Rescans == 0 {
		t.Errorf("backdated insert: inserted %d with %d rescans, want 1 row found by a rescan", fr.Inserted, fr.Rescans)
	}
	h.CheckTable(ctx, "late", enginetest.Expected(t, h.Sim, "late", apisim.Newer))
}

func testLookback(t *testing.T, s enginetest.Sink) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 6, Variant: apisim.Newer, Forms: []string{"spam"}, SubmissionsPerForm: 40}, s)
	h.MustSync(ctx)
	subs := h.Sim.Submissions("spam")
	target := subs[len(subs)-3]
	h.Sim.SetSpam("spam", target.ID, !target.IsSpam)

	rep := h.MustSync(ctx) // no lookback: the change is behind the watermark
	if fr := enginetest.FormReport(t, rep, "spam"); fr.Updated != 0 {
		t.Errorf("without lookback updated %d rows", fr.Updated)
	}
	h.Config.Lookback = 24 * time.Hour * 365
	rep = h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "spam"); fr.Updated != 1 || fr.Inserted != 0 {
		t.Errorf("lookback: %d updated, %d inserted, want 1 and 0", fr.Updated, fr.Inserted)
	}
	h.CheckTable(ctx, "spam", enginetest.Expected(t, h.Sim, "spam", apisim.Newer))
	before, _ := s.ReadState(ctx, []string{"spam"})
	h.MustSync(ctx)
	after, _ := s.ReadState(ctx, []string{"spam"})
	if !after["spam"].Watermark.CreatedAt.Equal(before["spam"].Watermark.CreatedAt) {
		t.Errorf("lookback moved the watermark: %v -> %v", before["spam"].Watermark.CreatedAt, after["spam"].Watermark.CreatedAt)
	}
}

func testFailingForm(t *testing.T, s enginetest.Sink) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"ok1", "gone", "off", "ok2"}, SubmissionsPerForm: 30}, s)
	h.Sim.SetFormStatus("gone", 404)
	h.Sim.SetFormStatus("off", 400)
	rep := h.Sync(ctx)
	if rep.Failed() != 2 {
		t.Fatalf("%d forms failed, want 2: %v", rep.Failed(), rep.Err())
	}
	if err := enginetest.FormReport(t, rep, "gone").Err; !errors.Is(err, formsapi.ErrFormNotFound) {
		t.Errorf("gone: %v, want ErrFormNotFound", err)
	}
	if err := enginetest.FormReport(t, rep, "off").Err; !errors.Is(err, formsapi.ErrAccessDisabled) || !strings.Contains(err.Error(), "HTTP API Access") {
		t.Errorf("off: %v, want ErrAccessDisabled telling to enable HTTP API Access", err)
	}
	for _, f := range []string{"ok1", "ok2"} {
		h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, apisim.Newer))
	}
	st, err := s.ReadState(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := st["gone"]; g.LastError == "" || !g.Watermark.IsZero() {
		t.Errorf("gone state: error %q, watermark %v", g.LastError, g.Watermark)
	}
	h.Sim.SetFormStatus("gone", 0)
	h.Sim.SetFormStatus("off", 0)
	h.MustSync(ctx)
	st, _ = s.ReadState(ctx, nil)
	for _, f := range []string{"gone", "off"} {
		h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, apisim.Newer))
		if st[f].LastError != "" {
			t.Errorf("%s: last error %q survived a success", f, st[f].LastError)
		}
	}
}

// failingSink fails the next commit.
type failingSink struct {
	enginetest.Sink
	fail bool
}

func (f *failingSink) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	if f.fail {
		f.fail = false
		return nil, fmt.Errorf("injected commit failure")
	}
	return f.Sink.Commit(ctx, c)
}

func testFailedCommit(t *testing.T, s enginetest.Sink) {
	ctx := t.Context()
	fs := &failingSink{Sink: s}
	h := newHarness(t, apisim.Options{Seed: 8, Variant: apisim.Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 35}, fs)
	h.MustSync(ctx)
	before, _ := s.ReadState(ctx, nil)
	h.Sim.Add("a", 7)
	fs.fail = true
	rep := h.Sync(ctx)
	if partsOf(s) > 0 {
		// The failing commit is a's part: a fails, b commits.
		if rep.Failed() != 1 || enginetest.FormReport(t, rep, "a").Err == nil {
			t.Fatalf("part commit failure not reported: %v", rep.Err())
		}
	} else if rep.CommitErr == nil || rep.Failed() != 2 {
		t.Fatalf("commit failure not reported: %v", rep.Err())
	}
	after, _ := s.ReadState(ctx, nil)
	if !after["a"].Watermark.CreatedAt.Equal(before["a"].Watermark.CreatedAt) {
		t.Errorf("a failed commit moved the watermark")
	}
	h.MustSync(ctx)
	for _, f := range []string{"a", "b"} {
		h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, apisim.Newer))
	}
}

func testFailureBetweenPages(t *testing.T, s enginetest.Sink) {
	ctx := t.Context()
	h := newHarness(t, apisim.Options{Seed: 9, Variant: apisim.Newer, Forms: []string{"flaky"}, SubmissionsPerForm: 90}, s)
	// Every request fails: the form fails in the middle of its pages and
	// must keep its (empty) watermark.
	h.Sim.SetFaults(apisim.Faults{ServerErrors: 1})
	h.Config.Forms = []string{"flaky"}
	rep := h.Sync(ctx)
	if rep.Failed() != 1 {
		t.Fatalf("want the form to fail, got %v", rep.Err())
	}
	st, _ := s.ReadState(ctx, nil)
	if !st["flaky"].Watermark.IsZero() {
		t.Errorf("a failed form moved its watermark to %v", st["flaky"].Watermark)
	}
	h.Sim.SetFaults(apisim.Faults{ServerErrors: 0.3})
	for range 10 {
		if rep = h.Sync(ctx); rep.Err() == nil {
			break
		}
	}
	h.Sim.SetFaults(apisim.Faults{})
	h.MustSync(ctx)
	h.CheckTable(ctx, "flaky", enginetest.Expected(t, h.Sim, "flaky", apisim.Newer))
}

// TestStartJitter: a run with a start jitter waits the time its Jitter
// draws, bounded by StartJitter, before it reads anything; one stopped
// while it waits reads and commits nothing.
func TestStartJitter(t *testing.T) {
	t.Parallel()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 5}, memSink(t))
	var asked atomic.Int64
	h.Config.StartJitter = time.Hour
	h.Config.Jitter = func(max time.Duration) time.Duration { asked.Store(int64(max)); return 50 * time.Millisecond }
	start := time.Now()
	rep := h.MustSync(t.Context())
	if took := time.Since(start); took < 50*time.Millisecond || time.Duration(asked.Load()) != time.Hour {
		t.Errorf("run took %v, jitter asked for up to %v; want at least 50ms, and up to 1h", took, time.Duration(asked.Load()))
	}
	if fr := enginetest.FormReport(t, rep, "f"); fr.Inserted != 5 {
		t.Errorf("inserted %d, want 5", fr.Inserted)
	}

	h.Sim.Add("f", 3)
	h.Config.Jitter = func(time.Duration) time.Duration { return time.Hour }
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	requests := h.Sim.Stats().Requests
	rep = h.Sync(ctx)
	if len(rep.Forms) != 0 || h.Sim.Stats().Requests != requests {
		t.Errorf("stopped while waiting: %d forms reported, %d requests made; want none", len(rep.Forms), h.Sim.Stats().Requests-requests)
	}
}
