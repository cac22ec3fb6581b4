package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/option"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/testkit/bqfake"
)

// BenchmarkWebhookLatency measures how soon a submission is queryable
// under `formsync run`: one form, 20 submissions synced at start, then
// FORMSYNC_WEBHOOK_BENCH_N (default 100) new ones at one a second. For
// each, the latency is from its created_at (the simulator's clock when it
// was added) to the moment a reader polling every 20 ms finds its row:
// in the SQLite file (opened read-only, by submission id) or in the
// BigQuery fake's submissions table (by its row count, tables.get, as a
// commit makes all of a sync's rows visible at once). It reports the
// median and p95 latency and the API requests per submission (the
// simulator's counters from the first new submission on), for:
//
//   - sqlite/webhook: the simulator posts the service's webhook for each
//     submission (apisim Options.Webhook) to formsync run's endpoint; the
//     schedule is months away, so every sync is a triggered one;
//   - sqlite/schedule-1m: no webhook, FORMSYNC_SCHEDULE=@every 1m;
//   - bigquery/webhook: as sqlite/webhook into an in-process bqfake
//     (FORMSYNC_SINK=bigquery, FORMSYNC_BQ_ENDPOINT), also reporting the
//     mean commit duration from formsync_commit_duration_seconds.
//
// Each takes N seconds and more (the schedule's up to a minute more). Run
// it with
//
//	go test ./cmd/formsync -run '^$' -bench WebhookLatency -benchtime 1x -timeout 20m -v
func BenchmarkWebhookLatency(b *testing.B) {
	bin := buildBinary(b)
	n := 100
	if v, err := strconv.Atoi(os.Getenv("FORMSYNC_WEBHOOK_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	for _, c := range []struct {
		name     string
		webhook  bool
		bigquery bool
		schedule string
	}{
		{"sqlite/webhook", true, false, "0 0 1 1 *"},
		{"sqlite/schedule-1m", false, false, "@every 1m"},
		{"bigquery/webhook", true, true, "0 0 1 1 *"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var res latencyResult
			for b.Loop() {
				res = measureLatency(b, bin, n, c.webhook, c.bigquery, c.schedule)
			}
			b.ReportMetric(res.median.Seconds(), "median-s")
			b.ReportMetric(res.p95.Seconds(), "p95-s")
			b.ReportMetric(res.perSubmission, "requests/submission")
			line := fmt.Sprintf("%s: %d submissions at 1/s: latency median %s, p95 %s, max %s; %d API requests (%.2f a submission); %d syncs",
				c.name, n, res.median.Round(time.Millisecond), res.p95.Round(time.Millisecond), res.max.Round(time.Millisecond),
				res.requests, res.perSubmission, res.syncs)
			if c.webhook {
				line += fmt.Sprintf(", %d triggered; webhooks sent %d, failed %d", res.triggered, res.hooksSent, res.hooksFailed)
			}
			if res.commits > 0 {
				line += fmt.Sprintf("; commits: %d, mean %s", res.commits, res.commitMean.Round(time.Millisecond))
				b.ReportMetric(res.commitMean.Seconds(), "commit-s")
			}
			b.Log(line)
			fmt.Println("webhook latency:", line)
		})
	}
}

type latencyResult struct {
	median, p95, max       time.Duration
	requests               int
	perSubmission          float64
	syncs, triggered       int
	hooksSent, hooksFailed int
	commits                int
	commitMean             time.Duration
}

func measureLatency(b *testing.B, bin string, n int, webhook, bigquery bool, schedule string) latencyResult {
	b.StopTimer()
	defer b.StartTimer()
	const form, initial = "contact", 20
	triggerAddr := freeLoopbackAddr(b)
	opts := apisim.Options{Seed: 51, Variant: apisim.Newer, Forms: []string{form}, SubmissionsPerForm: initial}
	if webhook {
		opts.Webhook = "http://" + triggerAddr + "/hooks/" + webhookSecret + "/{form}"
	}
	sim := apisim.New(opts)
	subs := sim.Submissions(form)
	lastInitial := subs[len(subs)-1].ID
	srv := httptest.NewServer(sim)
	defer srv.Close()
	db := filepath.Join(b.TempDir(), "latency.db")
	env := baseEnv(srv.URL, form, db, b.TempDir(), "FORMSYNC_SCHEDULE="+schedule)

	// seen reports how many of the new submissions (in id order) are
	// queryable; each poll is one query.
	var seen func() int
	if bigquery {
		fake, err := bqfake.New(bqfake.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer fake.Close()
		bqSrv := httptest.NewServer(fake.Handler())
		defer bqSrv.Close()
		env = append(env, "FORMSYNC_SINK=bigquery", "FORMSYNC_BQ_PROJECT="+benchBQProject,
			"FORMSYNC_BQ_DATASET="+benchBQDataset, "FORMSYNC_BQ_ENDPOINT="+bqSrv.URL)
		c, err := bq.NewClient(context.Background(), benchBQProject, option.WithEndpoint(bqSrv.URL+"/bigquery/v2/"), option.WithoutAuthentication())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		table := c.Dataset(benchBQDataset).Table("submissions")
		seen = func() int {
			md, err := table.Metadata(context.Background())
			if err != nil {
				return 0
			}
			return int(md.NumRows) - initial
		}
	}
	r := startHookRun(b, bin, env, triggerAddr)
	defer r.stop(b)
	if !bigquery {
		conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		seen = func() int {
			var k int
			// The new submissions have the ids above the initial ones.
			conn.QueryRow(`SELECT count(*) FROM submissions WHERE form_id = ? AND submission_id > ?`, form, lastInitial).Scan(&k)
			return k
		}
	}
	syncsBefore := countLines(r.logs.String(), `"message":"sync finished"`)
	triggeredBefore := r.triggered()
	commitsBefore := r.metric(b, "formsync_commit_duration_seconds_count")
	commitSumBefore := r.metric(b, "formsync_commit_duration_seconds_sum")
	sim.ResetStats()

	created := make([]time.Time, n)
	found := make([]time.Time, n)
	var mu sync.Mutex
	added := 0
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopPoll:
				return
			case <-tick.C:
			}
			k := min(seen(), n)
			now := time.Now()
			mu.Lock()
			for i := range k {
				if found[i].IsZero() {
					found[i] = now
				}
			}
			done := k == n && added == n
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	next := time.Now()
	for i := range n {
		time.Sleep(time.Until(next))
		next = next.Add(time.Second)
		s := sim.Add(form, 1)[0]
		mu.Lock()
		created[i], added = s.CreatedAt, i+1
		mu.Unlock()
	}
	select {
	case <-polled:
	case <-time.After(3 * time.Minute):
		close(stopPoll)
		<-polled
		b.Fatalf("not every submission was queryable 3 minutes after the last was added")
	}
	st := sim.Stats()
	res := latencyResult{requests: st.Requests, perSubmission: float64(st.Requests) / float64(n),
		hooksSent: st.WebhooksSent, hooksFailed: st.WebhooksFailed,
		syncs:     countLines(r.logs.String(), `"message":"sync finished"`) - syncsBefore,
		triggered: r.triggered() - triggeredBefore}
	if bigquery {
		// The commits of the new submissions only, not the one at start.
		res.commits = int(r.metric(b, "formsync_commit_duration_seconds_count") - commitsBefore)
		if res.commits > 0 {
			sum := r.metric(b, "formsync_commit_duration_seconds_sum") - commitSumBefore
			res.commitMean = time.Duration(sum / float64(res.commits) * float64(time.Second))
		}
	}
	lat := make([]time.Duration, n)
	for i := range n {
		lat[i] = found[i].Sub(created[i])
	}
	slices.Sort(lat)
	res.median, res.p95, res.max = lat[n/2], lat[min(n-1, (n*95+99)/100-1)], lat[n-1]
	return res
}

func countLines(logs, what string) int {
	return len(regexp.MustCompile(regexp.QuoteMeta(what)).FindAllStringIndex(logs, -1))
}
