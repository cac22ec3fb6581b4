package main

// Process-level benchmarks: the real formsync binary against the simulator
// served from the test process on loopback. They run only with -bench, e.g.
//
//	go test ./cmd/formsync -run '^$' -bench 'BackfillSQLite' -benchtime 1x -timeout 20m
//
// Each iteration is one whole run of the binary, so -benchtime 1x is the
// intended setting. Figures are reported with b.ReportMetric and b.Log.

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
)

// procRun is what one run of the binary cost.
type procRun struct {
	wall time.Duration
	// maxRSSKiB is the child's ru_maxrss, which is max(floorKiB, its own
	// peak): see resetPeakRSS. sampledKiB is the highest VmHWM read from
	// /proc/<pid>/status while it ran, a lower bound of its own peak.
	maxRSSKiB, floorKiB, sampledKiB int64
	cpu                             time.Duration // user + system
	out                             string
}

// peakKiB is the child's own peak RSS: ru_maxrss when it is above what the
// child inherited from the test process, else the sampled lower bound
// (exact reports whether it is ru_maxrss).
func (r procRun) peakKiB() (kib int64, exact bool) {
	if r.maxRSSKiB > r.floorKiB {
		return r.maxRSSKiB, true
	}
	return r.sampledKiB, false
}

// runProc runs the binary to completion and fails tb if it exits non-zero.
func runProc(tb testing.TB, bin string, env []string, args ...string) procRun {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	floor := resetPeakRSS(tb)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	sampled := make(chan int64)
	go func() { // VmHWM is monotonic: the last good read is the highest
		var hwm int64
		tick := time.NewTicker(2 * time.Millisecond) // an idle run lasts some 20 ms
		defer tick.Stop()
		for {
			if v := vmHWM(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); v > 0 {
				hwm = v
			}
			select {
			case <-done:
				sampled <- hwm
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	hwm := <-sampled
	if err != nil {
		tb.Fatalf("formsync %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return procRun{wall: wall, maxRSSKiB: ru.Maxrss, floorKiB: floor, sampledKiB: hwm, cpu: cpu, out: out.String()}
}

// resetPeakRSS lowers the test process's peak RSS to its current RSS and
// returns it, in KiB; runProc calls it just before each start. Go starts
// children with clone(CLONE_VM|CLONE_VFORK), and at execve Linux folds the
// high-water RSS of the memory the child shared with its parent into the
// child's ru_maxrss (exec_mmap -> setmax_mm_hiwater_rss). Without the reset
// ru_maxrss is max(the test process's peak so far, formsync's peak), and a
// simulator of a million submissions or a BigQuery fake holding them makes
// that the test process's figure; after it, it is max(the test process's
// RSS now, formsync's peak). When /proc/self/clear_refs is not writable it
// logs so and returns the unreset peak.
func resetPeakRSS(tb testing.TB) int64 {
	tb.Helper()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Logf("cannot reset the test process's peak RSS (%v): the reported peak RSS may be the test process's", err)
	}
	return vmHWM("/proc/self/status")
}

// vmHWM reads the VmHWM line of a /proc status file, in KiB; 0 when it
// cannot.
func vmHWM(path string) int64 {
	st, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kib); err == nil {
				return kib
			}
		}
	}
	return 0
}

// BenchmarkBackfillSQLite backfills one form of 100,000 and of 1,000,000
// submissions (newer form, page size 100, client rate unlimited in effect)
// into a fresh SQLite file with `formsync backfill --form big`, and reports
// the wall time, rows/s, the process's peak RSS and its CPU time per row.
// Targets for 1M on a 2-core machine: at most 60 s and 150 MiB, RSS flat
// from 100k to 1M.
func BenchmarkBackfillSQLite(b *testing.B) {
	bin := buildBinary(b)
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			sim := apisim.New(apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"big"}, SubmissionsPerForm: n, TieEvery: 50})
			srv := httptest.NewServer(sim)
			defer srv.Close()
			var last procRun
			for b.Loop() {
				b.StopTimer()
				db := filepath.Join(b.TempDir(), "bench.db")
				env := baseEnv(srv.URL, "big", db, b.TempDir(), "FORMSYNC_PAGE_SIZE=100", "FORMSYNC_RATE_LIMIT=100000")
				b.StartTimer()
				last = runProc(b, bin, env, "backfill", "--form", "big")
				b.StopTimer()
				if got := countRows(b, db); got != n {
					b.Fatalf("table holds %d rows, want %d", got, n)
				}
				b.StartTimer()
			}
			reportProc(b, "sqlite", n, last, sim.Stats().Requests)
		})
	}
}

func reportProc(b *testing.B, sinkName string, n int, r procRun, requests int) {
	kib, exact := r.peakKiB()
	mib := float64(kib) / 1024
	if !exact {
		b.Logf("formsync's peak RSS was at most the %.1f MiB it inherited from the test process; reporting the sampled VmHWM, a lower bound", float64(r.floorKiB)/1024)
	}
	b.ReportMetric(r.wall.Seconds(), "wall-s")
	b.ReportMetric(float64(n)/r.wall.Seconds(), "rows/s")
	b.ReportMetric(mib, "peak-RSS-MiB")
	b.ReportMetric(float64(r.cpu.Nanoseconds())/float64(n), "cpu-ns/row")
	b.Logf("backfill %s: %d rows in %.2f s wall (%.0f rows/s), peak RSS %.1f MiB (sampled %.1f, test process %.1f), process CPU %.2f s (%.0f ns/row), simulator requests %d",
		sinkName, n, r.wall.Seconds(), float64(n)/r.wall.Seconds(), mib, float64(r.sampledKiB)/1024, float64(r.floorKiB)/1024,
		r.cpu.Seconds(), float64(r.cpu.Nanoseconds())/float64(n), requests)
}

// arrivals wraps the simulator and records when each request arrived, so
// that the sustained rate is measured on the server side, without the
// process start and the final commit.
type arrivals struct {
	h  http.Handler
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.at = append(a.at, time.Now())
	a.mu.Unlock()
	a.h.ServeHTTP(w, r)
}

// sustained is requests per second between the first and the last arrival,
// and the highest count of arrivals in any one-second window.
func (a *arrivals) sustained() (perSecond float64, peak1s int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := slices.Clone(a.at)
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	if len(at) < 2 {
		return 0, len(at)
	}
	j := 0
	for i := range at {
		for at[i].Sub(at[j]) >= time.Second {
			j++
		}
		peak1s = max(peak1s, i-j+1)
	}
	return float64(len(at)-1) / at[len(at)-1].Sub(at[0]).Seconds(), peak1s
}

// BenchmarkSustainedRate syncs 50 forms with `formsync sync` while the
// simulator enforces R requests/s (excess answered 429) with 20 ms latency,
// and the client is configured with the same rate R. It reports the achieved
// requests/s (server side, first to last request) against R, and the 429s.
func BenchmarkSustainedRate(b *testing.B) {
	bin := buildBinary(b)
	const rate = 10.0
	forms := make([]string, 50)
	for i := range forms {
		forms[i] = fmt.Sprintf("f%02d", i)
	}
	// 450 submissions per form at 100 a page: 5 pages a form, 250 requests,
	// about 25 s at 10 requests/s.
	sim := apisim.New(apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: forms, SubmissionsPerForm: 450,
		RateLimit: rate, Latency: 20 * time.Millisecond})
	var last *arrivals
	var lastStats apisim.Stats
	var lastRun procRun
	for b.Loop() {
		b.StopTimer()
		sim.ResetStats()
		rec := &arrivals{h: sim}
		srv := httptest.NewServer(rec)
		db := filepath.Join(b.TempDir(), "rate.db")
		env := baseEnv(srv.URL, strings.Join(forms, ","), db, b.TempDir(),
			"FORMSYNC_PAGE_SIZE=100", fmt.Sprintf("FORMSYNC_RATE_LIMIT=%g", rate))
		b.StartTimer()
		lastRun = runProc(b, bin, env, "sync")
		b.StopTimer()
		srv.Close()
		if got, want := countRows(b, db), 50*450; got != want {
			b.Fatalf("table holds %d rows, want %d", got, want)
		}
		last, lastStats = rec, sim.Stats()
		b.StartTimer()
	}
	perSecond, peak := last.sustained()
	limited := lastStats.ByStatus[http.StatusTooManyRequests]
	b.ReportMetric(perSecond, "req/s")
	b.ReportMetric(rate, "configured-req/s")
	b.ReportMetric(float64(limited), "429s")
	b.ReportMetric(float64(lastStats.Requests), "requests")
	b.Logf("sustained rate: %d requests (%d answered 429) in %.1f s wall, %.2f requests/s first to last (configured %g, server limit %g), busiest 1 s window %d requests; lower bound %d requests (50 forms x ceil(450/100))",
		lastStats.Requests, limited, lastRun.wall.Seconds(), perSecond, rate, rate, peak, 50*int(math.Ceil(450.0/100)))
}
