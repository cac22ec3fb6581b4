package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/option"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/testkit/bqfake"
)

const (
	benchBQProject = "p"
	benchBQDataset = "formsync" // FORMSYNC_BQ_DATASET's default
)

// BenchmarkBackfillBigQueryFake backfills one form of 100,000 and of
// 1,000,000 submissions (newer form, page size 100, client rate unlimited in
// effect) with `formsync backfill --form big` into the BigQuery sink, pointed
// with FORMSYNC_BQ_ENDPOINT at an in-process bqfake (no credentials are
// sent when an endpoint is set). It measures the NDJSON path: rows staged
// in the spool, uploaded as load jobs into the staging table and merged
// into submissions at each checkpoint (every 50,000 rows by default, so
// about n/50,000 load jobs). It reports the wall time, rows/s, the formsync
// process's peak RSS and its CPU time per row, checks that the fake's
// submissions table holds exactly n rows, and logs how many load and query
// jobs the fake saw.
//
// The peak RSS is the formsync process's only: the fake (its in-memory
// SQLite tables, the uploads it buffers) and the simulator live in the test
// process and are not counted (runProc resets the test process's
// high-water mark before the start; see resetPeakRSS). The wall time does
// include the fake's work, which is serialised under one lock and executes
// every MERGE on SQLite, and the client's polling of jobs, so it is an
// upper bound on formsync's own cost.
//
// Run it with
//
//	go test ./cmd/formsync -run '^$' -bench 'BackfillBigQueryFake' -benchtime 1x -timeout 30m
func BenchmarkBackfillBigQueryFake(b *testing.B) {
	bin := buildBinary(b)
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			sim := apisim.New(apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"big"}, SubmissionsPerForm: n, TieEvery: 50})
			srv := httptest.NewServer(sim)
			defer srv.Close()
			var (
				last  procRun
				stats bqfake.Stats
			)
			for b.Loop() {
				b.StopTimer()
				fake, err := bqfake.New(bqfake.Options{}) // a fresh, empty BigQuery per run
				if err != nil {
					b.Fatal(err)
				}
				bqSrv := httptest.NewServer(fake.Handler())
				sim.ResetStats()
				env := baseEnv(srv.URL, "big", filepath.Join(b.TempDir(), "unused.db"), b.TempDir(),
					"FORMSYNC_PAGE_SIZE=100", "FORMSYNC_RATE_LIMIT=100000",
					"FORMSYNC_SINK=bigquery", "FORMSYNC_BQ_PROJECT="+benchBQProject,
					"FORMSYNC_BQ_DATASET="+benchBQDataset, "FORMSYNC_BQ_ENDPOINT="+bqSrv.URL)
				b.StartTimer()
				last = runProc(b, bin, env, "backfill", "--form", "big")
				b.StopTimer()
				got := countBQTable(b, bqSrv.URL, "submissions")
				bqSrv.Close()
				if got != uint64(n) {
					fake.Close()
					b.Fatalf("fake's submissions table holds %d rows, want %d", got, n)
				}
				stats = fake.Stats()
				fake.Close()
				b.StartTimer()
			}
			reportProc(b, "bigquery-fake", n, last, sim.Stats().Requests)
			b.ReportMetric(float64(stats.LoadJobs), "load-jobs")
			b.Logf("bigquery fake: %d load jobs (%d multipart, %d resumable uploads), %d query jobs, DML %v; expected about %d load jobs (n/50,000 checkpoints)",
				stats.LoadJobs, stats.MultipartUploads, stats.ResumableUploads, stats.QueryJobs, stats.DML, (n+49_999)/50_000)
		})
	}
}

// countBQTable reads a table's row count from the fake through the real
// client, as formsync talks to it (tables.get reports numRows).
func countBQTable(tb testing.TB, endpoint, table string) uint64 {
	tb.Helper()
	ctx := context.Background()
	c, err := bq.NewClient(ctx, benchBQProject, option.WithEndpoint(endpoint+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	md, err := c.Dataset(benchBQDataset).Table(table).Metadata(ctx)
	if err != nil {
		tb.Fatalf("reading %s.%s metadata from the fake: %v", benchBQDataset, table, err)
	}
	return md.NumRows
}
