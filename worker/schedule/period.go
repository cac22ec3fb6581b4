package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Period returns the longest wait between two ticks of spec in the year
// after from, looking at no more than 2000 ticks: how long the data may
// go without a sync when every tick runs. A schedule whose ticks are
// uneven ("*/15 9-17 * * 1-5") gives its longest gap (the weekend), which
// is what a freshness check must allow.
func Period(spec string, from time.Time) (time.Duration, error) {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return 0, fmt.Errorf("schedule: cron spec %q: %w", spec, err)
	}
	end := from.AddDate(1, 0, 0)
	prev := sched.Next(from.UTC())
	if prev.IsZero() {
		return 0, fmt.Errorf("schedule: cron spec %q never fires", spec)
	}
	var longest time.Duration
	for range 2000 {
		next := sched.Next(prev)
		if next.IsZero() || next.After(end) {
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
