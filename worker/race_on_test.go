//go:build race

package worker_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = true
