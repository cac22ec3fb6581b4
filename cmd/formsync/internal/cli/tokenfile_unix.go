//go:build unix

package cli

import (
	"os"
	"syscall"
)

// openNonBlocking opens path for reading without waiting for a writer: a
// FIFO with none would block the open, and the start, for ever.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
