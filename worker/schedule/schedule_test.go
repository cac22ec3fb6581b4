package schedule_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/testkit/scheduletest"
	"github.com/formsync/formsync/worker/schedule"
)

// safety bounds how long a test waits for something that must happen; it
// only turns a hang into a failure, it is not a timing assertion.
const safety = 10 * time.Second

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

type bundle struct {
	clock    *scheduletest.Clock
	sched    *schedule.Scheduler
	started  chan time.Time // OnStart
	skipped  chan time.Time // OnSkip
	finished chan time.Time // OnFinish
}

// setup builds a scheduler on a fake clock at start whose hooks feed the
// bundle's channels. run may be nil for a job that returns at once.
func setup(t *testing.T, spec string, start time.Time, run func(ctx context.Context)) *bundle {
	t.Helper()
	if run == nil {
		run = func(context.Context) {}
	}
	b := &bundle{
		clock:    scheduletest.NewClock(start),
		started:  make(chan time.Time, 16),
		skipped:  make(chan time.Time, 16),
		finished: make(chan time.Time, 16),
	}
	s, err := schedule.New(schedule.Config{
		Spec:     spec,
		Run:      run,
		Clock:    b.clock,
		OnStart:  func(at time.Time) { b.started <- at },
		OnSkip:   func(at time.Time) { b.skipped <- at },
		OnFinish: func(at time.Time) { b.finished <- at },
	})
	if err != nil {
		t.Fatalf("New(%q): %v", spec, err)
	}
	b.sched = s
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), safety)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop in cleanup: %v", err)
		}
	})
	return b
}

// waitParked returns once the scheduler is waiting on the clock.
func (b *bundle) waitParked(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), safety)
	defer cancel()
	if err := b.clock.BlockUntilWaiters(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// advanceTo parks, then moves the clock to at.
func (b *bundle) advanceTo(t *testing.T, at time.Time) {
	t.Helper()
	b.waitParked(t)
	b.clock.Advance(at.Sub(b.clock.Now()))
}

func recv(t *testing.T, what string, ch <-chan time.Time) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(safety):
		t.Fatalf("no %s", what)
		return time.Time{}
	}
}

func expectNone(t *testing.T, what string, ch <-chan time.Time) {
	t.Helper()
	select {
	case at := <-ch:
		t.Fatalf("unexpected %s at %s", what, at)
	default:
	}
}

func TestTicksFireAtCronTimes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec  string
		start time.Time
		ticks []time.Time
	}{
		{"*/5 * * * *", t0.Add(2 * time.Minute), []time.Time{
			t0.Add(5 * time.Minute), t0.Add(10 * time.Minute), t0.Add(15 * time.Minute),
		}},
		{"@hourly", t0.Add(90 * time.Minute), []time.Time{
			t0.Add(2 * time.Hour), t0.Add(3 * time.Hour), t0.Add(4 * time.Hour),
		}},
		{"@every 5m", t0, []time.Time{
			t0.Add(5 * time.Minute), t0.Add(10 * time.Minute), t0.Add(15 * time.Minute),
		}},
		// The spec is read in UTC whatever the clock's zone.
		{"0 9 * * *", t0.Add(8 * time.Hour).In(time.FixedZone("UTC+5", 5*3600)), []time.Time{
			t0.Add(9 * time.Hour), t0.Add(33 * time.Hour), t0.Add(57 * time.Hour),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			b := setup(t, tt.spec, tt.start, nil)
			if got := b.sched.Next(); !got.Equal(tt.ticks[0]) {
				t.Errorf("Next before Start = %s, want %s", got, tt.ticks[0])
			}
			if err := b.sched.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.ticks {
				b.waitParked(t)
				if got := b.sched.Next(); !got.Equal(want) {
					t.Fatalf("Next = %s, want %s", got, want)
				}
				// One nanosecond short of the tick must not fire it.
				b.clock.Advance(want.Sub(b.clock.Now()) - time.Nanosecond)
				expectNone(t, "start before the tick", b.started)
				b.clock.Advance(time.Nanosecond)
				if got := recv(t, "start", b.started); !got.Equal(want) {
					t.Fatalf("run scheduled at %s, want %s", got, want)
				}
				recv(t, "finish", b.finished)
			}
			expectNone(t, "skip", b.skipped)
		})
	}
}

func TestTickDuringRunIsSkipped(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var runs atomic.Int32
	b := setup(t, "@every 1m", t0, func(ctx context.Context) {
		if runs.Add(1) == 1 {
			<-release
		}
	})
	if err := b.sched.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	b.advanceTo(t, t0.Add(time.Minute))
	if got := recv(t, "first start", b.started); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("first run scheduled at %s", got)
	}
	if !b.sched.Running() {
		t.Error("Running = false during the first run")
	}

	b.advanceTo(t, t0.Add(2*time.Minute))
	if got := recv(t, "skip", b.skipped); !got.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("skipped tick %s, want %s", got, t0.Add(2*time.Minute))
	}
	expectNone(t, "start while running", b.started)

	close(release)
	recv(t, "finish", b.finished)
	if b.sched.Running() {
		t.Error("Running = true after the run finished")
	}

	b.advanceTo(t, t0.Add(3*time.Minute))
	if got := recv(t, "start after skip", b.started); !got.Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("run after the skip scheduled at %s, want %s", got, t0.Add(3*time.Minute))
	}
	recv(t, "finish", b.finished)
	if n := runs.Load(); n != 2 {
		t.Errorf("runs = %d, want 2", n)
	}
	expectNone(t, "second skip", b.skipped)
}

func TestStopCancelsAndWaitsForRunningJob(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	release := make(chan struct{})
	var done atomic.Bool
	b := setup(t, "@every 1m", t0, func(ctx context.Context) {
		<-ctx.Done()
		close(cancelled)
		<-release // the job's wind-down, e.g. committing what it has read
		done.Store(true)
	})
	if err := b.sched.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.advanceTo(t, t0.Add(time.Minute))
	recv(t, "start", b.started)

	stopped := make(chan error, 1)
	go func() { stopped <- b.sched.Stop(t.Context()) }()
	select {
	case <-cancelled:
	case <-time.After(safety):
		t.Fatal("Stop did not cancel the job's ctx")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v before the job did", err)
	default:
	}
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(safety):
		t.Fatal("Stop did not return after the job did")
	}
	if !done.Load() {
		t.Error("Stop returned before the job finished")
	}
	if b.sched.Running() {
		t.Error("Running = true after Stop")
	}

	// No tick is taken after Stop.
	b.clock.Advance(time.Hour)
	expectNone(t, "start after Stop", b.started)
	expectNone(t, "skip after Stop", b.skipped)
}

func TestStopGivesUpAtItsDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setup(t, "@every 1m", t0, func(context.Context) { <-release }) // ignores ctx
	if err := b.sched.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.advanceTo(t, t0.Add(time.Minute))
	recv(t, "start", b.started)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.sched.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with a done ctx = %v, want context.Canceled", err)
	}
	if !b.sched.Running() {
		t.Error("Running = false while the job still runs")
	}
	close(release)
	if err := b.sched.Stop(t.Context()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if b.sched.Running() {
		t.Error("Running = true after the job returned")
	}
}

func TestContextCancelStops(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	b := setup(t, "@every 1m", t0, func(ctx context.Context) {
		<-ctx.Done()
		close(cancelled)
	})
	ctx, cancel := context.WithCancel(t.Context())
	if err := b.sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	b.advanceTo(t, t0.Add(time.Minute))
	recv(t, "start", b.started)
	b.waitParked(t)

	cancel()
	select {
	case <-cancelled:
	case <-time.After(safety):
		t.Fatal("cancelling Start's ctx did not cancel the job's ctx")
	}
	recv(t, "finish", b.finished)
	if err := b.sched.Stop(t.Context()); err != nil {
		t.Fatalf("Stop after cancel: %v", err)
	}
	b.clock.Advance(time.Hour)
	expectNone(t, "start after cancel", b.started)
	expectNone(t, "skip after cancel", b.skipped)
}

func TestRestartAfterStop(t *testing.T) {
	t.Parallel()
	b := setup(t, "@every 1m", t0, nil)
	if err := b.sched.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.sched.Start(t.Context()); !errors.Is(err, schedule.ErrAlreadyStarted) {
		t.Fatalf("second Start = %v, want ErrAlreadyStarted", err)
	}
	if err := b.sched.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.sched.Start(t.Context()); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	// The stopped loop left its waiter behind; the new loop adds one.
	ctx, cancel := context.WithTimeout(t.Context(), safety)
	defer cancel()
	if err := b.clock.BlockUntilWaiters(ctx, 2); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if got := recv(t, "start", b.started); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("run scheduled at %s", got)
	}
	recv(t, "finish", b.finished)
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	run := func(context.Context) {}
	for _, spec := range []string{"", "61 * * * *", "* * * *", "@every banana", "@fortnightly", "0 0 30 2 *"} {
		_, err := schedule.New(schedule.Config{Spec: spec, Run: run})
		if err == nil {
			t.Errorf("New(%q) accepted a bad spec", spec)
			continue
		}
		if !strings.Contains(err.Error(), `"`+spec+`"`) {
			t.Errorf("New(%q) error %q does not name the spec", spec, err)
		}
	}
	if _, err := schedule.New(schedule.Config{Spec: "@hourly"}); err == nil {
		t.Error("New without Run succeeded")
	}
}

func TestRealClockByDefault(t *testing.T) {
	t.Parallel()
	s, err := schedule.New(schedule.Config{Spec: "@every 5m", Run: func(context.Context) {}})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	next := s.Next()
	if !next.After(before) || next.After(before.Add(5*time.Minute+time.Second)) {
		t.Errorf("Next = %s, want within 5m of %s", next, before)
	}
	if s.Running() {
		t.Error("Running before Start")
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}
}
