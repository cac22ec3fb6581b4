package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Period returns the longest wait between two ticks of spec after from:
// how long the data may go without a sync when every tick runs. A schedule
// whose ticks are uneven ("*/15 9-17 * * 1-5") gives its longest gap (the
// weekend), which is what a freshness check must allow. It looks at every
// tick of the next eight days, so that every day of the week is seen, then
// on up to 2000 ticks or a year, so that a monthly schedule's longest month
// is; never at more than 50,000 ticks (an @every of seconds is even).
func Period(spec string, from time.Time) (time.Duration, error) {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return 0, fmt.Errorf("schedule: cron spec %q: %w", spec, err)
	}
	end, week := from.AddDate(1, 0, 0), from.AddDate(0, 0, 8)
	prev := sched.Next(from.UTC())
	if prev.IsZero() {
		return 0, fmt.Errorf("schedule: cron spec %q never fires", spec)
	}
	var longest time.Duration
	for n := 0; n < 50000; n++ {
		next := sched.Next(prev)
		if next.IsZero() || next.After(end) || n >= 2000 && next.After(week) {
			break
		}
		longest = max(longest, next.Sub(prev))
		prev = next
	}
	if longest == 0 {
		// One tick in the year (a date such as 29 February): the year.
		longest = end.Sub(from)
	}
	return longest, nil
}
