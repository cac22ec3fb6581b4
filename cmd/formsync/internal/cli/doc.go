// Package cli is the formsync command line: it reads the configuration from
// FORMSYNC_* variables, builds the API client, the sink and the engine, runs
// one of the subcommands and turns the outcome into an exit code
// (0 success, 1 a form or the run failed, 2 bad configuration or usage).
// cmd/formsync/main.go only hands it the signal context and the process's
// streams.
package cli
