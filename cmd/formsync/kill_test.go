package main

import (
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/worker/enginetest"
	"github.com/formsync/formsync/worker/formsapi/apisim"
)

// TestSIGKILLNeverLosesOrDuplicates kills a real `formsync sync` process at
// many points of its run (while paging, while staging, during the commit),
// then runs it once cleanly: the table must equal the simulator's set.
func TestSIGKILLNeverLosesOrDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, order := range []apisim.Order{apisim.NewestFirst, apisim.OldestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			forms := []string{"a", "b", "c", "d"}
			sim := apisim.New(apisim.Options{Seed: 21, Variant: apisim.Newer, Order: order, Forms: forms, SubmissionsPerForm: 600, TieEvery: 7, Latency: time.Millisecond})
			srv := httptest.NewServer(sim)
			defer srv.Close()
			db := filepath.Join(t.TempDir(), "k.db")
			env := baseEnv(srv.URL, strings.Join(forms, ","), db, t.TempDir(), "FORMSYNC_PAGE_SIZE=20", "FORMSYNC_RATE_LIMIT=300")
			kills, progressed, last := 0, 0, 0
			// Kill moments are fractions of how long a run takes on this
			// machine, measured from the last run allowed to finish, so that
			// they land before, during and after the commit whether the box
			// is idle or busy. The first two runs die during the initial full
			// read (120 pages at 300 requests/s); a fraction of 0 lets the
			// run finish and re-measures (twice at first: the first to finish
			// is the long full read, the second an incremental run).
			fractions := []float64{0.1, 0.3, 0, 0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.1, 0, 0.1, 0.25, 0.5, 0.7, 0.85, 1.0, 0, 0.15, 0.35, 0.55, 0.75, 0.9}
			typical := 400 * time.Millisecond
			for i, f := range fractions {
				cmd := exec.Command(bin, "sync")
				cmd.Env = env
				started := time.Now()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				wait := 30 * time.Second // bounded even when allowed to finish
				if f > 0 {
					wait = time.Duration(f * float64(typical))
				}
				select {
				case <-done:
				case <-time.After(wait):
					cmd.Process.Signal(syscall.SIGKILL)
					<-done
				}
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					kills++
				} else if f == 0 {
					typical = time.Since(started)
				}
				if n := countRows(t, db); n > last {
					progressed, last = progressed+1, n
				}
				for j, f := range forms { // the forms move on between runs
					sim.Add(f, 5+i+j)
				}
			}
			// Some runs must have committed before they were killed or ended,
			// some not: the kills landed on both sides of the commit.
			if progressed == 0 || progressed == len(fractions) {
				t.Errorf("rows grew after %d of %d runs: the kills did not straddle the commit", progressed, len(fractions))
			}
			if kills < len(fractions)/2 {
				t.Errorf("only %d of %d runs were killed before they finished", kills, len(fractions))
			}
			cmd := exec.Command(bin, "sync")
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("final clean run: %v\n%s", err, out)
			}
			s, err := sqlite.Open(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := &enginetest.Harness{T: t, Sim: sim, Sink: s}
			for _, f := range forms {
				h.CheckTable(t.Context(), f, enginetest.Expected(t, sim, f, apisim.Newer))
			}
			t.Logf("%s: %d SIGKILLs (%d runs committed before their end), then one clean run: table equals the simulator's submissions", order, kills, progressed)
		})
	}
}
