//go:build !race

package deploy

// raceFlags: see race_on_test.go.
var raceFlags []string
