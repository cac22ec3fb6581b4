package main

import (
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// TestSIGKILLNeverLosesOrDuplicates kills a real `formsync sync` process at
// many points of its run (while paging, while staging, during the commit),
// then runs it once cleanly: the table must equal the simulator's set.
// Without FORMSYNC_SLOW_TESTS=1 it runs six times in one order (about
// 20 s with -race); with it, 24 runs of each order (about 160 s).
func TestSIGKILLNeverLosesOrDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	orders := []apisim.Order{apisim.NewestFirst, apisim.OldestFirst}
	// The first two runs die during the initial full read (120 pages at
	// 300 requests/s); a fraction of 0 lets the run finish and re-measures
	// (twice at first: the first to finish is the long full read, the
	// second an incremental run).
	fractions := []float64{0.1, 0.3, 0, 0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.1, 0, 0.1, 0.25, 0.5, 0.7, 0.85, 1.0, 0, 0.15, 0.35, 0.55, 0.75, 0.9}
	if !enginetest.SlowTests() {
		// Two kills during the full read, two runs to their end (the
		// second measures an incremental run), two kills of incremental
		// runs.
		orders, fractions = orders[:1], []float64{0.1, 0.3, 0, 0, 0.2, 0.5}
	}
	for _, order := range orders {
		t.Run(order.String(), func(t *testing.T) {
			forms := []string{"a", "b", "c", "d"}
			sim := apisim.New(apisim.Options{Seed: 21, Variant: apisim.Newer, Order: order, Forms: forms, SubmissionsPerForm: 600, TieEvery: 7, Latency: time.Millisecond})
			env := killEnv(t, sim, forms, "FORMSYNC_PAGE_SIZE=20", "FORMSYNC_RATE_LIMIT=300")
			kills, progressed := killRuns(t, sim, forms, env, fractions, 400*time.Millisecond)
			// Some runs must have committed before they were killed or
			// ended, some not: the kills landed on both sides of the commit.
			if progressed == 0 || progressed == len(fractions) {
				t.Errorf("rows grew after %d of %d runs: the kills did not straddle the commit", progressed, len(fractions))
			}
			if kills < len(fractions)/2 {
				t.Errorf("only %d of %d runs were killed before they finished", kills, len(fractions))
			}
		})
	}
}

// TestSIGKILLDuringPartsNeverLosesOrDuplicates kills `formsync sync` while
// it commits a large form in parts as it reads on (worker.DefaultPartRows
// rows a part), every run a first sync killed somewhere in it: the parts
// that got in stay, the watermark does not move, and one clean run ends
// with the simulator's set.
func TestSIGKILLDuringPartsNeverLosesOrDuplicates(t *testing.T) {
	enginetest.Slow(t, "SIGKILLs 12 first syncs of 3,000 rows, 4 min with -race")
	for _, order := range []apisim.Order{apisim.NewestFirst, apisim.OldestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			forms := []string{"big", "small"}
			sim := apisim.New(apisim.Options{Seed: 22, Variant: apisim.Newer, Order: order, Forms: forms, SubmissionsPerForm: 3 * worker.DefaultPartRows, TieEvery: 7})
			sim.Delete("small", 3*worker.DefaultPartRows-100)
			// At 1,000 requests a second a run reads for at least 0.3 s, a
			// part landing every 0.1 s, whether it inserts or finds the
			// rows of a killed run's parts unchanged.
			env := killEnv(t, sim, forms, "FORMSYNC_PAGE_SIZE=100", "FORMSYNC_RATE_LIMIT=1000")
			// How long a first sync takes here, into files of their own:
			// the faster of two, the first warming the simulator up.
			full := time.Hour
			for i := range 2 {
				scratch := append(slices.Clone(env), "FORMSYNC_SQLITE_PATH="+filepath.Join(t.TempDir(), fmt.Sprintf("scratch%d.db", i)))
				started := time.Now()
				run(t, buildBinary(t), scratch, "sync")
				full = min(full, time.Since(started))
			}
			fractions := []float64{0.15, 0.3, 0.45, 0.6, 0.75, 0.9}
			kills, progressed := killRuns(t, sim, forms, env, fractions, full)
			// A run after parts got in finds their rows unchanged, which
			// is faster than inserting them (much faster in a binary built
			// with -race): some later runs may finish.
			if kills < len(fractions)/2 || progressed == 0 {
				t.Errorf("%d of %d first syncs killed, rows grew after %d: the kills did not land among the parts", kills, len(fractions), progressed)
			}
		})
	}
}

// killEnv is the environment of the runs of a kill test, into a database
// of its own.
func killEnv(t *testing.T, sim *apisim.Server, forms []string, extra ...string) []string {
	t.Helper()
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return baseEnv(srv.URL, strings.Join(forms, ","), filepath.Join(t.TempDir(), "k.db"), t.TempDir(), extra...)
}

// command is `formsync sync` (or the args given) in env.
func command(t *testing.T, env []string, args ...string) *exec.Cmd {
	if len(args) == 0 {
		args = []string{"sync"}
	}
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = env
	return cmd
}

// runOrKill runs cmd and kills it (SIGKILL) once fraction of typical has
// passed; a fraction of 0 lets it finish (bounded at a minute). It says
// whether the process was killed and how long it ran.
func runOrKill(t *testing.T, cmd *exec.Cmd, fraction float64, typical time.Duration) (killed bool, took time.Duration) {
	t.Helper()
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	wait := 60 * time.Second
	if fraction > 0 {
		wait = time.Duration(fraction * float64(typical))
	}
	select {
	case <-done:
	case <-time.After(wait):
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled(), time.Since(started)
}

// killRuns runs `formsync sync` once per fraction, killing it (SIGKILL)
// after that fraction of how long a run takes on this machine (typical at
// first, then measured from the last run allowed to finish), so that kills
// land before, during and after the commits whether the box is idle or
// busy; a fraction of 0 lets the run finish and re-measures. The forms move
// on between runs. Then one clean run: the table must equal sim's. It
// returns how many runs were killed and after how many the table had grown.
func killRuns(t *testing.T, sim *apisim.Server, forms []string, env []string, fractions []float64, typical time.Duration) (kills, progressed int) {
	t.Helper()
	db := envValue(env, "FORMSYNC_SQLITE_PATH")
	last := 0
	for i, f := range fractions {
		killed, took := runOrKill(t, command(t, env), f, typical)
		if killed {
			kills++
		} else if f == 0 {
			typical = took
		}
		if n := countRows(t, db); n > last {
			progressed, last = progressed+1, n
		}
		for j, f := range forms { // the forms move on between runs
			sim.Add(f, 5+i+j)
		}
	}
	run(t, buildBinary(t), env, "sync") // the clean run
	s, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := &enginetest.Harness{T: t, Sim: sim, Sink: s}
	for _, f := range forms {
		h.CheckTable(t.Context(), f, enginetest.Expected(t, sim, f, apisim.Newer))
	}
	t.Logf("%d SIGKILLs (%d runs committed before their end), then one clean run: table equals the simulator's submissions", kills, progressed)
	return kills, progressed
}

// envValue is the last value env gives name.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
