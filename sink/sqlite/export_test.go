package sqlite

import "time"

// setPurgeWait sets how long Purge waits for readers, and returns what
// puts it back.
func setPurgeWait(d time.Duration) (restore func()) {
	old := purgeWait
	purgeWait = d
	return func() { purgeWait = old }
}
