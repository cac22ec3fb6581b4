//go:build !unix

package cli

import "errors"

// Without flock, no process can prove another is gone: nothing is removed.

type registration struct{}

func register(string) (*registration, error) {
	return nil, errors.New("not supported on this system")
}

func (*registration) release() {}

func removeLeftovers(string, *registration) (int, int64, error) { return 0, 0, nil }
