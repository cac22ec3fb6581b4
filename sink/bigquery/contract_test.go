package bigquery

import (
	"testing"

	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestContract runs the shared sink contract against the sink on the fake,
// along the production path (upload, load job, transaction).
func TestContract(t *testing.T) {
	t.Parallel()
	if raceEnabled && testing.Short() {
		// About 60 s under the race detector (5 s without): the other
		// tests cover the same code paths under -race.
		t.Skip("skipping the contract suite under -race -short")
	}
	sinktest.Run(t, func(t *testing.T) sinktest.Sink { return setup(t, bqfake.Options{}).sink }, sinktest.Tunes, sinktest.Purges, sinktest.ChecksViews, sinktest.KeepsFiles)
}
