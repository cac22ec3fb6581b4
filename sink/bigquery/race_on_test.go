//go:build race

package bigquery

const raceEnabled = true
