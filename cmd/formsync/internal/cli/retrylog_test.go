package cli

import (
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
)

// TestRetriesAreLogged: while the API answers errors, each retry is said at
// WARNING as it is scheduled (an outage shows in the log while the worker
// waits, not minutes later); 429s, expected, stay at debug level.
func TestRetriesAreLogged(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 9, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 200,
		ServerErrors: 0.3})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_BACKOFF_INITIAL", "1ms")
	t.Setenv("FORMSYNC_BACKOFF_MAX", "100ms")
	t.Setenv("FORMSYNC_MAX_RETRY_AFTER", "10ms")
	code, _, errOut := run(t, "sync")
	if code != exitOK {
		t.Fatalf("sync: exit %d:\n%s", code, errOut)
	}
	if sim.Stats().Faults["5xx"] == 0 {
		t.Fatal("the simulator answered no 5xx: the test tests nothing")
	}
	var retries int
	for line := range strings.Lines(errOut) {
		if strings.Contains(line, `"message":"API request failed; retrying"`) {
			retries++
			for _, want := range []string{`"severity":"WARNING"`, `"form":"a"`, `"page":`, `"retry_in_seconds":`, `"status":5`} {
				if !strings.Contains(line, want) {
					t.Errorf("retry line without %s: %s", want, line)
				}
			}
		}
	}
	if retries != sim.Stats().Faults["5xx"] {
		t.Errorf("%d retries logged for %d 5xx answers", retries, sim.Stats().Faults["5xx"])
	}

	sim.SetFaults(apisim.Faults{RateLimitFaults: 0.7})
	sim.Add("a", 1000)
	code, _, errOut = run(t, "sync")
	if code != exitOK || sim.Stats().Faults["429-random"] == 0 {
		t.Fatalf("sync under 429s: exit %d, %d 429s:\n%s", code, sim.Stats().Faults["429-random"], errOut)
	}
	if strings.Contains(errOut, "retrying") {
		t.Errorf("429s logged above debug level:\n%s", errOut)
	}
}
