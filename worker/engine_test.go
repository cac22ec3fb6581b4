package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/testkit/apisim"
	"github.com/formsync/formsync/internal/testkit/enginetest"
)

// TestStartJitter: a run with a start jitter waits the time its Jitter
// draws, bounded by StartJitter, before it reads anything; one stopped
// while it waits reads and commits nothing.
func TestStartJitter(t *testing.T) {
	t.Parallel()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 5}, memSink(t))
	var asked atomic.Int64
	h.Config.StartJitter = time.Hour
	h.Config.Jitter = func(max time.Duration) time.Duration { asked.Store(int64(max)); return 50 * time.Millisecond }
	start := time.Now()
	rep := h.MustSync(t.Context())
	if took := time.Since(start); took < 50*time.Millisecond || time.Duration(asked.Load()) != time.Hour {
		t.Errorf("run took %v, jitter asked for up to %v; want at least 50ms, and up to 1h", took, time.Duration(asked.Load()))
	}
	if fr := enginetest.FormReport(t, rep, "f"); fr.Inserted != 5 {
		t.Errorf("inserted %d, want 5", fr.Inserted)
	}

	h.Sim.Add("f", 3)
	h.Config.Jitter = func(time.Duration) time.Duration { return time.Hour }
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	requests := h.Sim.Stats().Requests
	rep = h.Sync(ctx)
	if len(rep.Forms) != 0 || h.Sim.Stats().Requests != requests {
		t.Errorf("stopped while waiting: %d forms reported, %d requests made; want none", len(rep.Forms), h.Sim.Stats().Requests-requests)
	}
}
