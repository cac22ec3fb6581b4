// Package schedule runs formsync's sync on a cron schedule in the
// long-running mode (`formsync run`), as an alternative to a Kubernetes
// CronJob of one-shot syncs.
//
//	s, err := schedule.New(schedule.Config{
//		Spec:   "*/15 * * * *",          // UTC unless it starts with CRON_TZ=
//		Run:    func(ctx context.Context) { eng.Sync(ctx) },
//		OnSkip: func(tick time.Time) { log.Warn("previous sync still running") },
//	})
//	_ = s.Start(ctx)                     // returns at once
//	...
//	_ = s.Stop(shutdownCtx)              // cancels the run and waits for it
//
// At most one run is in flight: a tick that comes while a run is going is
// skipped (OnSkip), not queued, so a slow API never piles runs up. Time
// comes from a Clock; testkit/scheduletest has one that tests
// advance by hand.
package schedule
