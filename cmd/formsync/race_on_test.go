//go:build race

package main

// raceFlags are the flags of this test binary's build that a binary built
// by the tests repeats, so that it reuses the packages already compiled
// for the tests rather than compiling every dependency again.
var raceFlags = []string{"-race"}
