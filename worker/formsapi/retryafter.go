package formsapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter reads a Retry-After header value: delta-seconds or an
// HTTP-date (relative to now). Empty or unparseable values give ok=false;
// zero, negative and past dates give (0, true), which callers treat as "no
// usable hint". Absurdly large values saturate rather than overflow; capping
// them is the caller's policy.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if digits := strings.TrimPrefix(v, "-"); digits != "" && strings.Trim(digits, "0123456789") == "" {
		if v[0] == '-' {
			return 0, true
		}
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || n > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	if d <= 0 {
		return 0, true
	}
	return d, true
}
