package schedule

import (
	"testing"
	"time"
)

func TestPeriod(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 3, 2, 10, 7, 0, 0, time.UTC) // a Monday
	for spec, want := range map[string]time.Duration{
		"*/15 * * * *":      15 * time.Minute,
		"@every 5m":         5 * time.Minute,
		"@hourly":           time.Hour,
		"0 3 * * *":         24 * time.Hour,
		"*/15 9-17 * * 1-5": 63*time.Hour + 15*time.Minute, // Friday 17:45 to Monday 09:00
		"0 0 1 * *":         31 * 24 * time.Hour,
		"* * * * 1-5":       48*time.Hour + time.Minute, // Friday 23:59 to Monday 00:00
		"@every 1s":         time.Second,
	} {
		got, err := Period(spec, from)
		if err != nil || got != want {
			t.Errorf("Period(%q) = %v, %v; want %v", spec, got, err, want)
		}
	}
	for _, spec := range []string{"not a spec", "0 0 30 2 *"} {
		if _, err := Period(spec, from); err == nil {
			t.Errorf("Period(%q): no error", spec)
		}
	}
}
