// Package schedule runs formsync's sync on a cron schedule in the
// long-running mode (the `formsync run` command), as an alternative to a
// Kubernetes CronJob running one-shot syncs.
//
// A Scheduler parses its spec with robfig/cron's standard parser (five
// fields, or a descriptor such as "@hourly" or "@every 5m") and reads the
// times in UTC unless the spec starts with CRON_TZ=. It then loops:
//
//	wait on Clock.After until the next tick
//	  -> a run is still going: OnSkip(tick); the tick is dropped
//	  -> otherwise: OnStart(tick), then Run(ctx) in its own goroutine
//
// OnFinish follows each run. At most one run is in flight. A sync that outlasts its interval makes the
// ticks that fall inside it be skipped rather than queued, so a slow API or
// warehouse never piles runs up behind each other: the next tick after the
// run ends starts the next run. Skips are reported through OnSkip because
// libraries do not log; the caller decides how loud a skip is.
//
// Start(ctx) returns at once; the loop and the running job stop when ctx is
// done or Stop is called. Stop cancels the job's context and waits for the
// job to return, up to Stop's own ctx, so a SIGTERM lets a sync commit what
// it has read (worker.Engine does that within its ShutdownGrace).
//
// Time comes from a Clock, real time by default; package scheduletest
// provides a manually advanced one so that tests never sleep.
package schedule
