//go:build !unix

package cli

import "os"

// openNonBlocking opens path for reading (there are no FIFOs to wait on).
func openNonBlocking(path string) (*os.File, error) {
	return os.Open(path)
}
