package worker_test

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// onCommit runs hook before the n-th commit (from 1) the sink receives,
// then lets it through unless the hook returns an error.
type onCommit struct {
	enginetest.Sink
	mu   sync.Mutex
	seen int
	n    int
	hook func(ctx context.Context, c *sink.Commit) error
}

func (s *onCommit) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	s.mu.Lock()
	s.seen++
	run := s.seen == s.n
	s.mu.Unlock()
	if run {
		if err := s.hook(ctx, c); err != nil {
			return nil, err
		}
	}
	return s.Sink.Commit(ctx, c)
}

// TestSyncInParts syncs forms in parts into every sink: the tables, the
// states and the counts are those of a sync in one commit, the other
// forms are read while the parts are written, and nothing is read twice.
func TestSyncInParts(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		for _, o := range orders {
			t.Run(sk.name+"/"+o.name, func(t *testing.T) {
				ctx := t.Context()
				s := sk.open(t)
				h := enginetest.NewHarness(t, apisim.Options{Seed: 41, Variant: apisim.Newer, Order: o.o, Forms: []string{"big", "small"}, SubmissionsPerForm: 230}, s)
				h.Config.PartRows = 50
				rep := h.MustSync(ctx)
				for _, f := range []string{"big", "small"} {
					fr := enginetest.FormReport(t, rep, f)
					if fr.Parts != 4 || fr.Inserted != 230 || fr.Staged != 230 {
						t.Errorf("%s: %d parts, %d inserted, %d staged; want 4, 230, 230", f, fr.Parts, fr.Inserted, fr.Staged)
					}
					h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, apisim.Newer))
				}
				if want := 2 * ((230 + 9) / 10); h.Sim.Stats().Requests > want+2 {
					t.Errorf("%d requests for two forms of 23 pages, want at most %d", h.Sim.Stats().Requests, want+2)
				}
				st, err := s.ReadState(ctx, []string{"big"})
				if err != nil {
					t.Fatal(err)
				}
				subs := h.Sim.Submissions("big") // oldest first
				// The newer response form prints milliseconds.
				newest := subs[len(subs)-1].CreatedAt.Truncate(time.Millisecond)
				if b := st["big"]; b.Rows != 230 || !b.Watermark.CreatedAt.Equal(newest) || b.LastSuccessAt.IsZero() {
					t.Errorf("state after parts: rows %d, watermark %v, last success %v; want 230, %v, set", b.Rows, b.Watermark.CreatedAt, b.LastSuccessAt, newest)
				}

				// Then incrementally, below the threshold and above it.
				h.Sim.Add("big", 20)
				h.Sim.Add("small", 120)
				rep = h.MustSync(ctx)
				if fr := enginetest.FormReport(t, rep, "big"); fr.Parts != 0 || fr.Inserted != 20 {
					t.Errorf("big: %d parts, %d inserted; want 0, 20", fr.Parts, fr.Inserted)
				}
				if fr := enginetest.FormReport(t, rep, "small"); fr.Parts != 2 || fr.Inserted != 120 {
					t.Errorf("small: %d parts, %d inserted; want 2, 120", fr.Parts, fr.Inserted)
				}
				for _, f := range []string{"big", "small"} {
					h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, apisim.Newer))
				}
			})
		}
	}
}

// TestInterruptedSyncInParts stops a sync while its second part is being
// committed, the form not read to its end: that part still commits (within
// the shutdown grace), the watermark stays where it was, and the next sync
// completes the table exactly. Under a field policy, the parts' state
// records it: the next sync goes on with the form instead of taking its
// rows for rows of another policy.
func TestInterruptedSyncInParts(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"", "email=drop"} {
		for _, sk := range deletionSinks {
			t.Run(cmp.Or(spec, "no policy")+"/"+sk.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				base := sk.open(t)
				second := make(chan struct{})
				s := &onCommit{Sink: base, n: 2, hook: func(context.Context, *sink.Commit) error { cancel(); close(second); return nil }}
				h := enginetest.NewHarness(t, apisim.Options{Seed: 42, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 300}, s)
				h.Config.PartRows = 40
				policy := ""
				if spec != "" {
					pol := mustPolicy(t, spec)
					h.Config.FieldPolicy, policy = pol, pol.Identity()
				}
				// Pages of 10: the second part is full after page 8; page 11
				// waits for its commit to start, so the signal always comes
				// with the form half read.
				src := &gatedSource{Source: client(t, h, nil), after: 10, open: second}
				rep, err := newEngine(t, h, src).Sync(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if fr := enginetest.FormReport(t, rep, "f"); !errors.Is(fr.Err, context.Canceled) {
					t.Fatalf("interrupted form: err %v, want context.Canceled", fr.Err)
				}
				st, err := base.ReadState(t.Context(), []string{"f"})
				if err != nil {
					t.Fatal(err)
				}
				if f := st["f"]; !f.Watermark.IsZero() || f.Rows != 80 || f.FieldPolicy != policy {
					t.Errorf("after the interruption: watermark %v, %d rows under policy %q; want none, the two parts' 80 under %q", f.Watermark, f.Rows, f.FieldPolicy, policy)
				}
				rep = h.MustSync(t.Context())
				if fr := enginetest.FormReport(t, rep, "f"); fr.Inserted != 220 {
					t.Errorf("the next sync inserted %d rows, want the 220 not committed", fr.Inserted)
				}
				if spec == "" { // the expected table is the API's values, unchanged by a policy
					h.CheckTable(t.Context(), "f", enginetest.Expected(t, h.Sim, "f", apisim.Newer))
				}
			})
		}
	}
}

// TestPartMeetingACommitKeepsTheFieldPolicy: a part of a first sync under
// a field policy that meets a concurrent commit of its form (a forget)
// records that policy for its rows all the same.
func TestPartMeetingACommitKeepsTheFieldPolicy(t *testing.T) {
	t.Parallel()
	pol := mustPolicy(t, "email=drop")
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			base := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 44, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 200}, base)
			h.Config.PartRows = 50
			h.Config.FieldPolicy = pol
			forgetter := h.Engine()
			// The first part's commit meets the forget's and is merged
			// and committed again; the state is read as the second part
			// commits.
			first := &onCommit{Sink: base, n: 1, hook: func(ctx context.Context, _ *sink.Commit) error {
				_, err := forgetter.Forget(ctx, "f", sink.Match{Keys: []string{"no-such-submission"}}, false)
				return err
			}}
			var stored string
			h.Sink = &onCommit{Sink: first, n: 3, hook: func(ctx context.Context, _ *sink.Commit) error {
				st, err := base.ReadState(ctx, []string{"f"})
				stored = st["f"].FieldPolicy
				return err
			}}
			if fr := enginetest.FormReport(t, h.MustSync(ctx), "f"); fr.Parts != 4 {
				t.Errorf("%d parts, want 4", fr.Parts)
			}
			if stored != pol.Identity() {
				t.Errorf("the first part's rows were stored under policy %q, want %q", stored, pol.Identity())
			}
		})
	}
}

// gatedSource holds every page after the first `after` until open is
// closed.
type gatedSource struct {
	worker.Source
	after int
	open  <-chan struct{}
}

func (g *gatedSource) Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error) {
	if page > g.after {
		select {
		case <-g.open:
		case <-time.After(30 * time.Second):
			return nil, nil, errors.New("gatedSource: never opened")
		}
	}
	return g.Source.Page(ctx, formID, page, limit)
}

// TestShutdownDuringCommitCommits: a shutdown signal that comes while the
// run's final commit is running does not cancel it: what was read is
// committed within Config.ShutdownGrace.
func TestShutdownDuringCommitCommits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := &onCommit{Sink: openSQLite(t), n: 1, hook: func(ctx context.Context, _ *sink.Commit) error {
		cancel() // the signal, once the commit has started
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond): // a commit that takes a while
			return nil
		}
	}}
	h := enginetest.NewHarness(t, apisim.Options{Seed: 43, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 30}, s)
	h.Config.ShutdownGrace = 10 * time.Second
	rep := h.Sync(ctx)
	if rep.CommitErr != nil {
		t.Fatalf("commit: %v, want it to finish within the grace", rep.CommitErr)
	}
	if fr := enginetest.FormReport(t, rep, "f"); fr.Err != nil || fr.Inserted != 30 {
		t.Errorf("form: err %v, %d inserted; want none, 30", fr.Err, fr.Inserted)
	}
	// The shutdown skips the completeness check: nothing was compared,
	// which the report must not pass off as complete.
	if fr := enginetest.FormReport(t, rep, "f"); fr.Checked {
		t.Error("the form is reported checked after a shutdown skipped the completeness check")
	}
	h.CheckTable(t.Context(), "f", enginetest.Expected(t, h.Sim, "f", apisim.Newer))
	if fr := enginetest.FormReport(t, h.MustSync(t.Context()), "f"); !fr.Checked || fr.Missing != 0 {
		t.Errorf("the next sync: checked %v, missing %d; want true, 0", fr.Checked, fr.Missing)
	}
}

// TestForgetBetweenParts forgets, between two parts of a sync, one
// submission already committed and one still to come: neither may be
// stored when the sync ends, and the tombstones stay.
func TestForgetBetweenParts(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			base := sk.open(t)
			s := &onCommit{Sink: base, n: 2}
			h := enginetest.NewHarness(t, apisim.Options{Seed: 43, Variant: apisim.Newer, Order: apisim.NewestFirst, Forms: []string{"f"}, SubmissionsPerForm: 200}, s)
			h.Config.PartRows = 50
			// Oldest first; read newest first, the last 50 are the first part.
			subs := h.Sim.Submissions("f")
			early, late := strconv.FormatInt(subs[190].ID, 10), strconv.FormatInt(subs[10].ID, 10)
			forgetter := h.Engine()
			s.hook = func(ctx context.Context, _ *sink.Commit) error {
				for _, key := range []string{early, late} {
					if _, err := forgetter.Forget(ctx, "f", sink.Match{Keys: []string{key}}, false); err != nil {
						t.Errorf("forget %s: %v", key, err)
					}
				}
				return nil
			}
			rep := h.MustSync(ctx)
			if fr := enginetest.FormReport(t, rep, "f"); fr.Parts != 4 {
				t.Errorf("%d parts, want 4", fr.Parts)
			}
			live, _ := split(t, base, "f")
			for _, key := range []string{early, late} {
				if _, ok := live[key]; ok {
					t.Errorf("submission %s was forgotten during the sync but is stored", key)
				}
			}
			if len(live) != 198 {
				t.Errorf("%d rows stored, want 198", len(live))
			}
			st, err := base.ReadState(ctx, []string{"f"})
			if err != nil {
				t.Fatal(err)
			}
			if f := st["f"]; f.Forgotten == nil || f.Forgotten.Count != 2 || f.Rows != 198 {
				t.Errorf("state: forgotten %+v, rows %d; want 2 tombstones, 198 rows", f.Forgotten, f.Rows)
			}
		})
	}
}

// TestReconcileIsNeverInParts: a reconcile marks what it did not read in
// the commit of everything it read, so it commits once, whatever
// PartRows says.
func TestReconcileIsNeverInParts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 44, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 120}, memSink(t))
	h.Config.PartRows = 30
	h.MustSync(ctx)
	h.Sim.Delete("f", 3)
	rep := h.MustReconcile(ctx)
	if fr := enginetest.FormReport(t, rep, "f"); fr.Parts != 0 || fr.Deleted != 3 {
		t.Errorf("reconcile: %d parts, %d marked deleted; want 0, 3", fr.Parts, fr.Deleted)
	}
}

// TestPartRowsIsValidated: a negative part size is refused.
func TestPartRowsIsValidated(t *testing.T) {
	t.Parallel()
	err := worker.Config{Forms: []string{"f"}, PartRows: -1}.Validate()
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "PartRows" {
		t.Errorf("Validate: %v, want a PartRows problem", err)
	}
}

// TestBackfillCheckpointFailsWhileReadingOn: a backfill commits each
// checkpoint while it reads the next; when one fails, the backfill fails
// with that error, keeps the progress of the one before, and a second
// backfill resumes there and completes the table.
func TestBackfillCheckpointFailsWhileReadingOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	base := openSQLite(t)
	injected := errors.New("injected commit failure")
	s := &onCommit{Sink: base, n: 3, hook: func(context.Context, *sink.Commit) error { return injected }}
	h := enginetest.NewHarness(t, apisim.Options{Seed: 45, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 300}, s)
	e := h.Engine()
	rep, err := e.Backfill(ctx, "f", worker.BackfillOptions{CheckpointRows: 40})
	if !errors.Is(err, injected) {
		t.Fatalf("backfill: %v, want the injected failure", err)
	}
	if rep.Checkpoints != 2 || rep.Staged != 80 {
		t.Errorf("%d checkpoints of %d rows in, want 2 of 80", rep.Checkpoints, rep.Staged)
	}
	st, err := base.ReadState(ctx, []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	if f := st["f"]; f.Backfill == nil || f.Backfill.Cursor.IsZero() || f.Rows != 80 || !f.Watermark.IsZero() {
		t.Fatalf("after the failure: progress %+v, rows %d, watermark %v; want a cursor, 80, none", f.Backfill, f.Rows, f.Watermark)
	}
	rep, err = e.Backfill(ctx, "f", worker.BackfillOptions{CheckpointRows: 40})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ResumedFrom.IsZero() || rep.Inserted != 220 {
		t.Errorf("resumed from %v, inserted %d; want a cursor and the 220 rows not committed", rep.ResumedFrom, rep.Inserted)
	}
	h.CheckTable(ctx, "f", enginetest.Expected(t, h.Sim, "f", apisim.Newer))
}

// TestContentKeyedRowsAreNotCommittedInParts: rows of the older response
// form are keyed by content hashes, which land all over the table; they
// are committed once, at the end.
func TestContentKeyedRowsAreNotCommittedInParts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 46, Variant: apisim.Older, Forms: []string{"f"}, SubmissionsPerForm: 120}, memSink(t))
	h.Config.PartRows = 30
	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "f"); fr.Parts != 0 || fr.Inserted != 120 {
		t.Errorf("older form: %d parts, %d inserted; want 0, 120", fr.Parts, fr.Inserted)
	}
	h.CheckTable(ctx, "f", enginetest.Expected(t, h.Sim, "f", apisim.Older))
}

// TestBackfillCheckpoints: without an explicit CheckpointRows a backfill
// checkpoints every Config.PartRows rows keyed by id. Rows keyed by content
// checkpoint past a least count of rows (DefaultCheckpointRows, 10 here),
// and, into a sink that takes them in key order (Config.SortContentKeys),
// only once worker.CheckpointInterval has gone by since the checkpoint
// before, or once they are the most allowed (MaxCheckpointRows).
func TestBackfillCheckpoints(t *testing.T) {
	for _, c := range []struct {
		name        string
		newer       bool
		sorted      bool
		most        int
		step        time.Duration // the clock's move on every reading of it
		checkpoints int
	}{
		// Parts of 30 rows: 30, 60, 90 ... 300, and an empty final one.
		{"ids", true, true, 1000, 0, 11},
		// 300 rows read at once: one commit, as a sync.
		{"sorted", false, true, 1000, 0, 1},
		// 12 pages of 25: 100 rows in each of three checkpoints, and none
		// left for the final one.
		{"sorted, at most 100", false, true, 100, 0, 4},
		// Every page makes a checkpoint, and the final one holds nothing.
		{"sorted, a minute a page", false, true, 1000, worker.CheckpointInterval, 13},
		{"unsorted", false, false, 1000, 0, 13},
	} {
		t.Run(c.name, func(t *testing.T) {
			worker.SetContentCheckpointRows(t, 10, c.most)
			v := apisim.Older
			if c.newer {
				v = apisim.Newer
			}
			h := enginetest.NewHarness(t, apisim.Options{Seed: 48, Variant: v, Forms: []string{"f"}, SubmissionsPerForm: 300}, memSink(t))
			h.Config.PartRows = 30
			h.Config.SortContentKeys = c.sorted
			now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
			h.Config.Now = func() time.Time { now = now.Add(c.step); return now }
			rep, err := h.Engine().Backfill(t.Context(), "f", worker.BackfillOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Checkpoints != c.checkpoints || rep.Inserted != 300 {
				t.Errorf("%d checkpoints, %d inserted; want %d, 300", rep.Checkpoints, rep.Inserted, c.checkpoints)
			}
			h.CheckTable(t.Context(), "f", enginetest.Expected(t, h.Sim, "f", v))
		})
	}
}

// spoolWatch keeps a weak pointer to the spool of every commit it lets
// through and, before the commit numbered at, counts how many spools of
// the commits before it are still reachable.
type spoolWatch struct {
	enginetest.Sink
	at     int
	mu     sync.Mutex
	spools []weak.Pointer[sink.Spool]
	alive  int
}

func (s *spoolWatch) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	s.mu.Lock()
	if len(s.spools) == s.at-1 {
		runtime.GC()
		runtime.GC()
		s.alive = 0
		for _, w := range s.spools {
			if w.Value() != nil {
				s.alive++
			}
		}
	}
	for _, fc := range c.Forms {
		if fc.Rows != nil {
			s.spools = append(s.spools, weak.Make(fc.Rows))
		}
	}
	s.mu.Unlock()
	// A slow sink, as real ones are beside an in-process API: the worker
	// reads on and queues more while a commit runs.
	time.Sleep(3 * time.Millisecond)
	return s.Sink.Commit(ctx, c)
}

// TestCommittedSpoolsAreReleased checks that the spools of parts and
// checkpoints already committed are not kept for the rest of a long read:
// each held a write buffer, and a chain of checkpoints kept every one of a
// backfill's alive to its end.
func TestCommittedSpoolsAreReleased(t *testing.T) {
	t.Parallel()
	const at = 25
	for _, backfill := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync in parts", true: "backfill"}[backfill], func(t *testing.T) {
			w := &spoolWatch{Sink: memSink(t), at: at}
			h := enginetest.NewHarness(t, apisim.Options{Seed: 49, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 300}, w)
			h.Config.PartRows = 10
			var err error
			if backfill {
				_, err = h.Engine().Backfill(t.Context(), "f", worker.BackfillOptions{})
			} else {
				_, err = h.Engine().Sync(t.Context())
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(w.spools) < at {
				t.Fatalf("%d commits, want at least %d", len(w.spools), at)
			}
			// Before commit 25 the worker may still hold the few parts or
			// checkpoints just committed, not yet taken in: at most 4.
			if w.alive > at-1-20 {
				t.Errorf("before commit %d, %d of the %d spools committed were still reachable", at, w.alive, at-1)
			}
			h.CheckTable(t.Context(), "f", enginetest.Expected(t, h.Sim, "f", apisim.Newer))
		})
	}
}

// TestContentKeyedRowsIntoBigQueryAreCommittedInParts: into BigQuery,
// whose transactions must end within the job timeout, rows of the older
// response form are committed in parts as any others (the sink's
// tuning). A sync stopped while its second part commits leaves the parts
// queued stored and the watermark where it was; the next sync completes
// the table exactly, with nothing stored twice.
func TestContentKeyedRowsIntoBigQueryAreCommittedInParts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base, _, _ := bqSinkOnFake(t)
	second := make(chan struct{})
	s := &onCommit{Sink: base, n: 2, hook: func(context.Context, *sink.Commit) error { cancel(); close(second); return nil }}
	h := enginetest.NewHarness(t, apisim.Options{Seed: 46, Variant: apisim.Older, Forms: []string{"f"}, SubmissionsPerForm: 300}, s)
	h.Config = h.Config.TunedFor(base)
	if !h.Config.PartsByContent {
		t.Fatal("the BigQuery sink does not ask for rows keyed by content in parts")
	}
	h.Config.PartRows = 40
	src := &gatedSource{Source: client(t, h, nil), after: 10, open: second}
	rep, err := newEngine(t, h, src).Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fr := enginetest.FormReport(t, rep, "f"); !errors.Is(fr.Err, context.Canceled) {
		t.Fatalf("interrupted form: err %v, want context.Canceled", fr.Err)
	}
	st, err := base.ReadState(t.Context(), []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	stored := st["f"].Rows
	if f := st["f"]; !f.Watermark.IsZero() || stored < 80 || stored >= 300 || stored%40 != 0 {
		t.Errorf("after the interruption: watermark %v, %d rows; want none, the parts' (at least two of 40, not all 300)", f.Watermark, stored)
	}
	rep = h.MustSync(t.Context())
	if fr := enginetest.FormReport(t, rep, "f"); fr.Inserted != 300-stored || fr.Parts < 1 {
		t.Errorf("the next sync inserted %d rows in %d parts, want the %d not committed, in parts", fr.Inserted, fr.Parts, 300-stored)
	}
	h.CheckTable(t.Context(), "f", enginetest.Expected(t, h.Sim, "f", apisim.Older))
	if f := readStateOf(t, base, "f"); f.Rows != 300 {
		t.Errorf("state counts %d rows, want 300", f.Rows)
	}
}

func readStateOf(t *testing.T, s enginetest.Sink, form string) state.Form {
	t.Helper()
	st, err := s.ReadState(t.Context(), []string{form})
	if err != nil {
		t.Fatal(err)
	}
	return st[form]
}
