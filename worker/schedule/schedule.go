package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Clock is the source of time of a Scheduler.
type Clock interface {
	Now() time.Time
	// After delivers the time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Scheduler.
type Config struct {
	// Spec is the cron spec: five fields (minute hour day-of-month month
	// day-of-week) or a descriptor (@hourly, @daily, @every 5m, ...).
	// Times are UTC unless the spec starts with CRON_TZ=<zone>. Required.
	Spec string
	// Run is the job. Its ctx is cancelled when the Start ctx is done or
	// Stop is called; Run should then wind down and return. Required.
	Run func(ctx context.Context)
	// Clock is the source of time. Defaults to real time.
	Clock Clock
	// OnSkip is called with the tick's scheduled time when a tick comes
	// while a run is still going; that tick is dropped. Optional. It is
	// called from the scheduler's goroutine, so it must not block.
	OnSkip func(scheduled time.Time)
	// OnStart is called with the tick's scheduled time just before a run
	// starts. Optional; must not block.
	OnStart func(scheduled time.Time)
	// OnFinish is called with the tick's scheduled time after a run has
	// returned and Running reports false. Optional; must not block.
	OnFinish func(scheduled time.Time)
}

// ErrAlreadyStarted is returned by Start on a scheduler that is running.
var ErrAlreadyStarted = errors.New("schedule: already started")

// Scheduler runs a job on a cron schedule, one run at a time.
type Scheduler struct {
	cfg   Config
	sched cron.Schedule

	mu       sync.Mutex
	next     time.Time          // next tick, zero before Start
	running  bool               // a run is in flight
	stopLoop context.CancelFunc // nil when not started
	loopDone chan struct{}      // closed when the loop has returned
	jobDone  chan struct{}      // closed when the in-flight run returns; nil when none
}

// New parses the spec and returns a scheduler that is not started yet.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	var errs []error
	sched, err := cron.ParseStandard(cfg.Spec)
	if err != nil {
		errs = append(errs, fmt.Errorf("cron spec %q: %w", cfg.Spec, err))
	} else if sched.Next(cfg.Clock.Now().UTC()).IsZero() {
		// robfig/cron gives up after five years, e.g. for "0 0 30 2 *".
		errs = append(errs, fmt.Errorf("cron spec %q never fires", cfg.Spec))
	}
	if cfg.Run == nil {
		errs = append(errs, errors.New("no job to run"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	return &Scheduler{cfg: cfg, sched: sched}, nil
}

// Start starts taking ticks in a goroutine and returns. The scheduler
// stops when ctx is done or Stop is called; the job's ctx derives from ctx.
// A stopped scheduler can be started again.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopLoop != nil {
		return ErrAlreadyStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	s.stopLoop = cancel
	s.loopDone = make(chan struct{})
	s.next = s.nextAfter(s.cfg.Clock.Now(), time.Time{})
	go s.loop(ctx, s.next, s.loopDone)
	return nil
}

// Stop stops taking ticks, cancels the running job's ctx and waits for the
// job to return, or for ctx to be done: then it returns ctx's error and the
// job is left to finish on its own (Running still reports it).
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	stop, loopDone := s.stopLoop, s.loopDone
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	// Cancelling the loop's ctx cancels the job's too: it derives from it.
	stop()
	select {
	case <-loopDone:
	case <-ctx.Done():
		return fmt.Errorf("schedule: stopping: %w", context.Cause(ctx))
	}
	s.mu.Lock()
	jobDone := s.jobDone
	s.mu.Unlock()
	if jobDone != nil {
		select {
		case <-jobDone:
		case <-ctx.Done():
			return fmt.Errorf("schedule: stopping: job still running: %w", context.Cause(ctx))
		}
	}
	s.mu.Lock()
	s.stopLoop, s.loopDone, s.next = nil, nil, time.Time{}
	s.mu.Unlock()
	return nil
}

// Running reports whether a run is in flight.
func (s *Scheduler) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Next returns the time of the next tick: the one the scheduler waits for
// once started, or the one after now before that.
func (s *Scheduler) Next() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.next.IsZero() {
		return s.next
	}
	return s.nextAfter(s.cfg.Clock.Now(), time.Time{})
}

// nextAfter returns the tick after now, and never one at or before prev:
// a wall clock stepped back must not fire the same tick twice.
func (s *Scheduler) nextAfter(now, prev time.Time) time.Time {
	from := now.UTC()
	if from.Before(prev) {
		from = prev
	}
	return s.sched.Next(from)
}

func (s *Scheduler) loop(ctx context.Context, next time.Time, done chan<- struct{}) {
	defer close(done)
	for {
		if next.IsZero() {
			// The schedule has no more ticks within robfig/cron's horizon.
			<-ctx.Done()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.Clock.After(next.Sub(s.cfg.Clock.Now())):
		}
		if ctx.Err() != nil {
			return
		}
		s.tick(ctx, next)
		next = s.nextAfter(s.cfg.Clock.Now(), next)
		s.mu.Lock()
		s.next = next
		s.mu.Unlock()
	}
}

// tick starts a run for the tick scheduled at t, or skips it.
func (s *Scheduler) tick(ctx context.Context, t time.Time) {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		if s.cfg.OnSkip != nil {
			s.cfg.OnSkip(t)
		}
		return
	}
	s.running = true
	jobDone := make(chan struct{})
	s.jobDone = jobDone
	s.mu.Unlock()
	if s.cfg.OnStart != nil {
		s.cfg.OnStart(t)
	}
	go func() {
		defer close(jobDone)
		s.cfg.Run(ctx)
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
		if s.cfg.OnFinish != nil {
			s.cfg.OnFinish(t)
		}
	}()
}
