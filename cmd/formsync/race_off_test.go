//go:build !race

package main

// raceFlags: see race_on_test.go.
var raceFlags []string
