package formsapi

import (
	"testing"
	"time"
)

// TestCreatedAtAsRFC3339Says: lower-case 't' and 'z' are RFC 3339; an
// offset of 24 hours and a leap second are refused.
func TestCreatedAtAsRFC3339Says(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"2026-03-01T12:00:00Z", "2026-03-01t12:00:00z", "2026-03-01t12:00:00.000000Z", "2026-03-01T14:00:00+02:00", "2026-03-02T11:59:00+23:59"} {
		if got, err := ParseCreatedAt(v); err != nil || !got.Equal(want) {
			t.Errorf("ParseCreatedAt(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"2026-03-01T12:00:00+24:00", "2026-03-01T12:00:00-24:00", "2016-12-31T23:59:60Z", "2026-03-01 12:00:00Z", "2026-03-01T12:00:00"} {
		if got, err := ParseCreatedAt(v); err == nil {
			t.Errorf("ParseCreatedAt(%q) = %v, want it refused", v, got)
		}
	}
}
