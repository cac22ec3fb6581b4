//go:build unix

package cli

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// termWidth is the width of terminal f in columns, 0 when it cannot be
// read.
func termWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// onResize calls f whenever the terminal is resized (SIGWINCH), for as
// long as the process runs.
func onResize(f func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGWINCH)
	go func() {
		for range c {
			f()
		}
	}()
}
