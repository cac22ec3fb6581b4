package main

import (
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/enginetest"
)

// TestSoak runs `formsync sync` over and over against a simulator that
// misbehaves in every documented way (30% of requests answered 429 with
// every Retry-After shape, 5% 5xx, truncated and stalled bodies, submissions
// added and deleted while pages are read), SIGKILLs most runs at seeded
// random moments and lets some finish, then turns the faults off and runs
// once cleanly: the table must hold every live submission exactly once.
// Every third run is a whole-form backfill (checkpointing every 100 rows)
// instead of a sync, read while submissions are deleted.
// Bounded in time (about 20 s, at most 100 runs and 150 s) and on loopback
// only. The tally is printed with t.Logf and on stdout:
//
//	soak: requests=N faults=N (429=N 5xx=N truncated=N stalled=N) kills=N rows=N duplicates=0 missing=0
func TestSoak(t *testing.T) {
	enginetest.Slow(t, "soak: runs the binary ~40 times, about 20 s")
	bin := buildBinary(t)
	const seed = 20261121
	rng := rand.New(rand.NewPCG(seed, 1))
	forms := []string{"contact", "signup", "feedback", "survey"}
	sim := apisim.New(apisim.Options{
		Seed: seed, Variant: apisim.Newer, Order: apisim.NewestFirst, Forms: forms,
		SubmissionsPerForm: 400, TieEvery: 9,
		RateLimitFaults: 0.30, RetryAfter: apisim.RetryAfterMixed,
		ServerErrors: 0.05, Truncate: 0.02, Stall: 0.02, StallFor: 300 * time.Millisecond,
		Latency:     time.Millisecond,
		MutateEvery: 4, AddPerMutation: 3, DeletePerMutation: 1,
	})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "soak.db")
	env := baseEnv(srv.URL, strings.Join(forms, ","), db, t.TempDir(),
		"FORMSYNC_PAGE_SIZE=20", "FORMSYNC_RATE_LIMIT=200", "FORMSYNC_REQUEST_TIMEOUT=200ms",
		"FORMSYNC_MAX_RETRY_AFTER=50ms", "FORMSYNC_MAX_WAIT=20s",
		"FORMSYNC_BACKOFF_INITIAL=10ms", "FORMSYNC_BACKOFF_MAX=250ms")

	// Runs go on until 24 kills have landed (at most 100 runs, 150 s).
	// A kill lands at a random moment of the run: uniformly within 1.2x the
	// duration of the last run that finished, so it hits start-up, paging,
	// staging, the commit and (sometimes) just after it alike.
	const wantKills, maxRuns = 24, 100
	kills, finished, failed, killedAfterCommit, last, backfills := 0, 0, 0, 0, 0, 0
	typical := time.Second // until a run has finished
	deadline := time.Now().Add(150 * time.Second)
	for i := 0; i < maxRuns && kills < wantKills && time.Now().Before(deadline); i++ {
		args := []string{"sync"}
		if i%3 == 1 {
			args = []string{"backfill", "--form", forms[(i/3)%len(forms)], "--checkpoint-rows", "100"}
			backfills++
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		started := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		// Every fifth run may finish (bounded); the others die at a random
		// moment of their run.
		wait := time.Millisecond + time.Duration(rng.Int64N(int64(typical)*6/5))
		if i%5 == 4 {
			wait = 30 * time.Second
		}
		select {
		case <-done:
		case <-time.After(wait):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
		elapsed := time.Since(started)
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			kills++
			if n := countRows(t, db); n > last { // killed after its commit
				killedAfterCommit++
			}
		case cmd.ProcessState.Success():
			finished++
			if args[0] == "sync" {
				typical = elapsed
			}
		default: // a form failed its wait budget: allowed under faults
			failed++
		}
		n := countRows(t, db)
		t.Logf("run %d (%s): %s after %s (kill timer %s), rows %d -> %d", i, args[0], cmd.ProcessState, elapsed.Round(time.Millisecond), wait, last, n)
		last = n
		for j, f := range forms { // the forms move on between runs too
			sim.Add(f, 4+(i+j)%12)
		}
	}
	if kills < 20 {
		t.Errorf("only %d SIGKILLs landed, want at least 20", kills)
	}

	during := sim.Stats()
	sim.SetFaults(apisim.Faults{})
	sim.SetMutation(0, 0, 0)
	clean := exec.Command(bin, "sync")
	clean.Env = env
	if out, err := clean.CombinedOutput(); err != nil {
		t.Fatalf("final clean run: %v\n%s", err, out)
	}
	total := sim.Stats()

	s, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := &enginetest.Harness{T: t, Sim: sim, Sink: s}
	rows, duplicates, missing, stale := 0, 0, 0, 0
	for _, f := range forms {
		want := enginetest.Expected(t, sim, f, apisim.Newer)
		gone := enginetest.DeletedRows(t, sim, f, apisim.Newer)
		h.CheckTable(t.Context(), f, want, gone...)
		got, err := s.ReadRows(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, r := range got {
			seen[r.SubmissionKey]++
		}
		rows += len(got)
		for _, n := range seen {
			duplicates += n - 1
		}
		live := map[string]bool{}
		for _, w := range want {
			live[w.SubmissionKey] = true
			if seen[w.SubmissionKey] == 0 {
				missing++
			}
		}
		for k := range seen {
			if !live[k] {
				stale++ // deleted after it was loaded: allowed
			}
		}
	}
	fa := total.Faults
	faults := fa["429"] + fa["5xx"] + fa["truncate"] + fa["stall"]
	tally := fmt.Sprintf("soak: requests=%d faults=%d (429=%d 5xx=%d truncated=%d stalled=%d) kills=%d rows=%d duplicates=%d missing=%d",
		total.Requests, faults, fa["429"], fa["5xx"], fa["truncate"], fa["stall"], kills, rows, duplicates, missing)
	t.Log(tally)
	fmt.Println(tally)
	t.Logf("soak: %d runs (%d of them backfills) killed %d times (%d after their commit), %d finished, %d exited with a failed form; %d submissions added and %d deleted during the soak (requests before the clean run %d); %d stored rows were deleted upstream after they were loaded",
		kills+finished+failed, backfills, kills, killedAfterCommit, finished, failed, total.Added, total.Deleted, during.Requests, stale)
	if duplicates != 0 || missing != 0 {
		t.Errorf("duplicates=%d missing=%d, want 0 and 0", duplicates, missing)
	}
}
