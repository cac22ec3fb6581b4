package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/formsync/formsync/testkit/scheduletest"
	"github.com/formsync/formsync/worker/schedule"
)

// A sync that outlasts its interval makes the next tick be skipped, not
// queued. The fake clock stands in for time.
func Example() {
	ctx := context.Background()
	clock := scheduletest.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	release := make(chan struct{})
	finished := make(chan struct{})
	skipped := make(chan time.Time, 1)
	s, err := schedule.New(schedule.Config{
		Spec:     "@every 5m",
		Clock:    clock,
		Run:      func(ctx context.Context) { <-release }, // a slow sync
		OnStart:  func(at time.Time) { fmt.Println("sync started for", at.Format(time.TimeOnly)) },
		OnSkip:   func(at time.Time) { skipped <- at },
		OnFinish: func(time.Time) { close(finished) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Start(ctx)

	_ = clock.BlockUntilWaiters(ctx, 1)
	clock.Advance(5 * time.Minute) // 00:05: starts
	_ = clock.BlockUntilWaiters(ctx, 1)
	clock.Advance(5 * time.Minute) // 00:10: still running
	fmt.Println("skipped", (<-skipped).Format(time.TimeOnly))

	close(release)
	<-finished
	_ = clock.BlockUntilWaiters(ctx, 1) // parked on the next tick
	fmt.Println("next tick", s.Next().Format(time.TimeOnly))
	_ = s.Stop(ctx)
	// Output:
	// sync started for 00:05:00
	// skipped 00:10:00
	// next tick 00:15:00
}
