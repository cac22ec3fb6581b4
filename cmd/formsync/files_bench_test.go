package main

import (
	"cmp"
	"database/sql"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
)

// BenchmarkFilesFirstSync measures what keeping the files costs a first
// sync: one form of 10,000 submissions with one 50 KB file each (500 MB
// in all), `formsync sync` into a fresh SQLite file and a fresh file://
// store ("files"), beside the same sync with FORMSYNC_FILES_STORE unset
// ("rows": the rows alone). Each round runs both, in turn, the order
// alternating from round to round, each a child process (wall time, CPU
// and peak RSS from its rusage, as runProc reads them); the figures are
// the medians over the rounds (-benchtime Nx sets N) and their ratios.
// Each files run must have stored every file (10,000 copies naming an
// object); its folder is removed before the next run. Run it with
//
//	go test ./cmd/formsync -run '^$' -bench 'FilesFirstSync' -benchtime 5x -timeout 30m
//
// FORMSYNC_BENCH_BASELINE=/path/to/formsync (another build) adds its files
// run to every round ("base-files"), so that a change is measured side by
// side with the tree before it.
func BenchmarkFilesFirstSync(b *testing.B) {
	const (
		n    = 10_000
		size = 50_000
	)
	bin := buildBinary(b)
	baseline := os.Getenv("FORMSYNC_BENCH_BASELINE")
	if baseline != "" {
		if _, err := os.Stat(baseline); err != nil {
			b.Fatalf("FORMSYNC_BENCH_BASELINE: %v", err)
		}
	}
	// A second apart from 2026-01-01 on, every created_at in the past, as
	// BenchmarkCompare's workloads.
	sim := apisim.New(apisim.Options{Seed: 13, Variant: apisim.Newer, Forms: []string{"big"}, SubmissionsPerForm: n,
		Spacing: time.Second, Files: apisim.FileOptions{Every: 1, PerSubmission: 1, Size: size}})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	if err := sim.SetFilesOrigin(srv.URL); err != nil {
		b.Fatal(err)
	}
	runs := map[string][]procRun{}
	var fileBytes int64
	round := 0
	for b.Loop() {
		order := []string{"rows", "files"}
		if baseline != "" {
			order = append(order, "base-files")
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		round++
		for _, kind := range order {
			db := filepath.Join(b.TempDir(), kind+".db")
			dir := filepath.Join(b.TempDir(), "files")
			env := baseEnv(srv.URL, "big", db, b.TempDir(), "FORMSYNC_PAGE_SIZE=100", "FORMSYNC_RATE_LIMIT=100000")
			exe := bin
			if kind == "base-files" {
				exe = baseline
			}
			if kind != "rows" {
				env = append(env, "FORMSYNC_FILES_STORE="+(&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String(),
					"FORMSYNC_FILES_ALLOW_LOOPBACK=true")
			}
			before := sim.Stats()
			r := runProc(b, exe, env, "sync")
			after := sim.Stats()
			b.StopTimer()
			if got := countRows(b, db); got != n {
				b.Fatalf("%s: %d rows stored, want %d", kind, got, n)
			}
			if kind != "rows" {
				if got := storedCopies(b, db); got != n {
					b.Fatalf("%s: %d copies name an object, want %d", kind, got, n)
				}
				fileBytes = after.FileBytes - before.FileBytes
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
			} else if after.FileRequests != before.FileRequests {
				b.Fatalf("rows: %d file requests without a files store", after.FileRequests-before.FileRequests)
			}
			b.StartTimer()
			runs[kind] = append(runs[kind], r)
		}
	}
	med := func(kind string, by func(procRun) float64) float64 {
		v := make([]float64, 0, len(runs[kind]))
		for _, r := range runs[kind] {
			v = append(v, by(r))
		}
		slices.SortFunc(v, cmp.Compare)
		return v[len(v)/2]
	}
	wall := func(r procRun) float64 { return r.wall.Seconds() }
	cpu := func(r procRun) float64 { return r.cpu.Seconds() }
	rss := func(r procRun) float64 {
		kib, exact := r.peakKiB()
		if !exact {
			b.Logf("a run's peak RSS was at most the %.1f MiB it inherited from the test process: reporting the sampled VmHWM, a lower bound", float64(r.floorKiB)/1024)
		}
		return float64(kib) / 1024
	}
	for _, kind := range []string{"rows", "files"} {
		b.Logf("%-5s wall %6.2f s  cpu %6.2f s  peak RSS %6.1f MiB  (medians of %d)", kind, med(kind, wall), med(kind, cpu), med(kind, rss), len(runs[kind]))
	}
	fw, rw := med("files", wall), med("rows", wall)
	b.Logf("files/rows: wall %.2fx  cpu %.2fx  peak RSS %.2fx; a files run fetched %.0f MB (%.1f MB/s over its wall time)",
		fw/rw, med("files", cpu)/med("rows", cpu), med("files", rss)/med("rows", rss), float64(fileBytes)/1e6, float64(fileBytes)/1e6/fw)
	if baseline != "" {
		bw := med("base-files", wall)
		b.Logf("%-5s wall %6.2f s  cpu %6.2f s  peak RSS %6.1f MiB  (medians of %d)", "base-files", bw, med("base-files", cpu), med("base-files", rss), len(runs["base-files"]))
		b.Logf("files/base-files: wall %.2fx  cpu %.2fx", fw/bw, med("files", cpu)/med("base-files", cpu))
		b.ReportMetric(fw/bw, "x-baseline")
	}
	b.ReportMetric(rw, "rows-wall-s")
	b.ReportMetric(fw, "files-wall-s")
	b.ReportMetric(fw/rw, "x-wall")
	b.ReportMetric(med("rows", rss), "rows-peak-MiB")
	b.ReportMetric(med("files", rss), "files-peak-MiB")
	b.ReportMetric(med("files", rss)/med("rows", rss), "x-peak-RSS")
}

// storedCopies counts db's copies that name an object.
func storedCopies(tb testing.TB, db string) int {
	tb.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM ` + sink.FilesTable + ` WHERE sha256 IS NOT NULL`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
