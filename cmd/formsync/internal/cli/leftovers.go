package cli

import "os"

// prepareTmpDir registers this process in FORMSYNC_TMP_DIR and removes the
// spool files that processes which are gone left there (see
// leftovers_unix.go). The returned func ends the registration; it must run
// after the last spool of the process is removed. A failure here is logged
// and never stops the run: the leftovers wait for the next one.
func prepareTmpDir(e *env) (release func()) {
	dir := e.cfg.TmpDir
	if dir == "" {
		dir = os.TempDir()
	}
	r, err := register(dir)
	if err != nil {
		e.log.Warn("cannot register in the staging directory: spool files left by earlier runs are not removed this time", "dir", dir, "error", err.Error())
		return func() {}
	}
	n, size, err := removeLeftovers(dir, r)
	if n > 0 {
		e.log.Info("removed spool files left by formsync processes that are gone", "dir", dir, "files", n, "bytes", size)
	}
	if err != nil {
		e.log.Warn("cannot remove every leftover spool file", "dir", dir, "error", err.Error())
	}
	return r.release
}
