package deploy

import (
	"os"
	"testing"
)

// slowTestsVar switches on the slow tests: those that sweep many seeds,
// soak a binary for minutes or compile it again with other flags (the
// image's build). They add minutes to a run; .ci/run sets it, and so can
// anyone: FORMSYNC_SLOW_TESTS=1 go test ./...
const slowTestsVar = "FORMSYNC_SLOW_TESTS"

// slow skips t unless FORMSYNC_SLOW_TESTS=1; cost says what the test costs.
func slow(t testing.TB, cost string) {
	t.Helper()
	if os.Getenv(slowTestsVar) != "1" {
		t.Skipf("slow test (%s): runs with %s=1, as .ci/run does", cost, slowTestsVar)
	}
}
