//go:build !unix

package cli

import "os"

// termWidth is 0, unknown, where the terminal's size is not read.
func termWidth(*os.File) int { return 0 }

// onResize does nothing where there is no SIGWINCH.
func onResize(func()) {}
