package main

// BenchmarkCompare puts formsync beside two reference clients, each a whole
// process reading the same simulator (served from this test process on
// loopback):
//
//   - floor: GET every page of every form (the forms at once) and discard
//     the body: what reading the API costs at the least;
//   - naive: page 1..N of each form in turn, decode each page with
//     encoding/json and upsert every row into SQLite, a transaction a page:
//     what a script would do;
//   - formsync: `formsync sync` into a fresh SQLite file;
//   - idle: `formsync sync` again into the file formsync filled, with
//     nothing new: what a CronJob run costs on most schedules;
//   - backfill: for a workload of one form, `formsync backfill --form` of
//     it into a fresh SQLite file, so that a backfill is timed beside the
//     sync it should be no slower than.
//
// Each round runs the clients one after the other; the figures are medians
// over the rounds (-benchtime Nx sets N), so that a noisy machine slows all
// of them alike. Run, for example:
//
//	go test ./cmd/formsync -run '^$' -bench 'Compare/newer-4x250k' -benchtime 3x -timeout 60m
//
// The reference clients are this test binary, run again with
// FORMSYNC_BENCH_CLIENT set (see TestBenchClient).
//
// To see what a change buys, build formsync from the commit before it and
// name that binary in FORMSYNC_BENCH_BASELINE: every round then also runs
// its sync ("base-sync", and "base-backfill" beside backfill), alternated
// with this tree's, and the log gives formsync/baseline.

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
)

type workload struct {
	name    string
	variant apisim.Variant
	forms   int
	perForm int
}

var workloads = []workload{
	{"newer-4x250k", apisim.Newer, 4, 250_000},
	{"newer-1x1M", apisim.Newer, 1, 1_000_000},
	{"older-4x250k", apisim.Older, 4, 250_000},
	{"older-1x1M", apisim.Older, 1, 1_000_000},
	{"newer-4x25k", apisim.Newer, 4, 25_000}, // a quick check of the harness
}

func BenchmarkCompare(b *testing.B) {
	bin := buildBinary(b)
	baseline := os.Getenv("FORMSYNC_BENCH_BASELINE")
	if baseline != "" {
		if _, err := os.Stat(baseline); err != nil {
			b.Fatalf("FORMSYNC_BENCH_BASELINE: %v", err)
		}
	}
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			forms := make([]string, w.forms)
			for i := range forms {
				forms[i] = fmt.Sprintf("form%d", i)
			}
			// A second apart from 2026-01-01 on: a million submissions end
			// within two weeks, every created_at in the past, so that the
			// idle run finds nothing it must read again (at the default 37
			// s the last quarter would lie ahead of today and, not trusted
			// to move the watermark, be read again by every run).
			sim := apisim.New(apisim.Options{Seed: 11, Variant: w.variant, Order: apisim.NewestFirst, Forms: forms, SubmissionsPerForm: w.perForm, Spacing: time.Second})
			srv := httptest.NewServer(sim)
			defer srv.Close()
			list := strings.Join(forms, ",")
			runs := map[string][]procRun{}
			// idle syncs again the file formsync just filled: a run with
			// nothing new.
			clients := []string{"floor", "naive", "formsync", "idle"}
			if w.forms == 1 {
				clients = append(clients, "backfill")
			}
			if baseline != "" {
				clients = append(clients, "base-sync")
				if w.forms == 1 {
					clients = append(clients, "base-backfill")
				}
			}
			for b.Loop() {
				var synced string
				for _, client := range clients {
					db := filepath.Join(b.TempDir(), client+".db")
					exe := bin
					if strings.HasPrefix(client, "base-") {
						exe = baseline
					}
					var r procRun
					switch client {
					case "formsync", "idle":
						if client == "formsync" {
							synced = db
						}
						env := baseEnv(srv.URL, list, synced, b.TempDir(), "FORMSYNC_PAGE_SIZE=100", "FORMSYNC_RATE_LIMIT=100000")
						r = runProc(b, bin, env, "sync")
						db = synced
					case "base-sync", "backfill", "base-backfill":
						args := []string{"sync"}
						if client != "base-sync" {
							args = []string{"backfill", "--form", forms[0]}
						}
						env := baseEnv(srv.URL, list, db, b.TempDir(), "FORMSYNC_PAGE_SIZE=100", "FORMSYNC_RATE_LIMIT=100000")
						r = runProc(b, exe, env, args...)
					default:
						env := append(os.Environ(), "FORMSYNC_BENCH_CLIENT="+client, "FORMSYNC_BENCH_URL="+srv.URL,
							"FORMSYNC_BENCH_FORMS="+list, "FORMSYNC_BENCH_DB="+db)
						r = runProc(b, os.Args[0], env, "-test.run=^TestBenchClient$")
					}
					if client != "floor" {
						if got, want := countRows(b, db), w.forms*w.perForm; got != want {
							b.Fatalf("%s stored %d rows, want %d", client, got, want)
						}
					}
					runs[client] = append(runs[client], r)
				}
			}
			med := map[string]procRun{}
			for c, rs := range runs {
				med[c] = median(rs)
			}
			f, n, s := med["floor"], med["naive"], med["formsync"]
			for _, c := range clients {
				m := med[c]
				kib, _ := m.peakKiB()
				b.Logf("%-13s %-13s wall %6.2f s  cpu %6.2f s  peak RSS %6.1f MiB  (median of %d)", c, w.name, m.wall.Seconds(), m.cpu.Seconds(), float64(kib)/1024, len(runs[c]))
			}
			b.Logf("formsync/floor: wall %.1fx  cpu %.1fx;  formsync/naive: wall %.2fx  cpu %.2fx",
				s.wall.Seconds()/f.wall.Seconds(), s.cpu.Seconds()/f.cpu.Seconds(), s.wall.Seconds()/n.wall.Seconds(), s.cpu.Seconds()/n.cpu.Seconds())
			if bf, ok := med["backfill"]; ok {
				b.Logf("backfill/sync: wall %.2fx  cpu %.2fx", bf.wall.Seconds()/s.wall.Seconds(), bf.cpu.Seconds()/s.cpu.Seconds())
				b.ReportMetric(bf.wall.Seconds()/s.wall.Seconds(), "x-backfill/sync")
			}
			if base, ok := med["base-sync"]; ok {
				b.Logf("formsync/baseline: sync wall %.2fx  cpu %.2fx", s.wall.Seconds()/base.wall.Seconds(), s.cpu.Seconds()/base.cpu.Seconds())
				b.ReportMetric(s.wall.Seconds()/base.wall.Seconds(), "x-baseline")
			}
			if bf, ok := med["base-backfill"]; ok {
				b.Logf("formsync/baseline: backfill wall %.2fx  cpu %.2fx", med["backfill"].wall.Seconds()/bf.wall.Seconds(), med["backfill"].cpu.Seconds()/bf.cpu.Seconds())
			}
			kib, _ := s.peakKiB()
			b.ReportMetric(s.wall.Seconds(), "formsync-wall-s")
			b.ReportMetric(f.wall.Seconds(), "floor-wall-s")
			b.ReportMetric(n.wall.Seconds(), "naive-wall-s")
			b.ReportMetric(s.wall.Seconds()/f.wall.Seconds(), "x-floor")
			b.ReportMetric(s.wall.Seconds()/n.wall.Seconds(), "x-naive")
			b.ReportMetric(float64(kib)/1024, "formsync-peak-MiB")
		})
	}
}

// median is the run of median wall time (and its CPU and RSS).
func median(rs []procRun) procRun {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b procRun) int { return cmp.Compare(a.wall, b.wall) })
	return s[len(s)/2]
}

// TestBenchClient is a reference client of BenchmarkCompare when
// FORMSYNC_BENCH_CLIENT is set, and skips otherwise.
func TestBenchClient(t *testing.T) {
	client := os.Getenv("FORMSYNC_BENCH_CLIENT")
	if client == "" {
		t.Skip("a reference client of BenchmarkCompare, run by it")
	}
	base, db := os.Getenv("FORMSYNC_BENCH_URL"), os.Getenv("FORMSYNC_BENCH_DB")
	forms := strings.Split(os.Getenv("FORMSYNC_BENCH_FORMS"), ",")
	var err error
	switch client {
	case "floor":
		err = floorClient(t.Context(), base, forms)
	case "naive":
		err = naiveClient(t.Context(), base, forms, db)
	default:
		err = fmt.Errorf("unknown client %q", client)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func get(ctx context.Context, base, form string, page int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/forms/%s/submissions?page=%d&limit=100", base, form, page), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apisim.DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("page %d of %s: HTTP %d", page, form, resp.StatusCode)
	}
	return body, err
}

type naivePage struct {
	Data []struct {
		ID        *int64          `json:"id"`
		Fields    json.RawMessage `json:"fields"`
		Files     json.RawMessage `json:"files"`
		IsSpam    bool            `json:"is_spam"`
		CreatedAt string          `json:"created_at"`
	} `json:"data"`
	Meta struct {
		Pagination struct {
			TotalPages int `json:"total_pages"`
		} `json:"pagination"`
	} `json:"meta"`
}

// floorClient reads every page of every form, the forms at once, and
// discards what it reads but the page count.
func floorClient(ctx context.Context, base string, forms []string) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(forms))
	for _, f := range forms {
		wg.Go(func() {
			for page, pages := 1, 1; page <= pages; page++ {
				body, err := get(ctx, base, f, page)
				if err != nil {
					errs <- err
					return
				}
				if page == 1 { // the one number a reader cannot do without
					i := strings.Index(string(body), `"total_pages":`)
					if i < 0 {
						errs <- fmt.Errorf("no total_pages in page 1 of %s", f)
						return
					}
					rest := string(body[i+len(`"total_pages":`):])
					end := strings.IndexAny(rest, ",}")
					pages, _ = strconv.Atoi(strings.TrimSpace(rest[:end]))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// naiveClient reads each form's pages in turn and upserts every row.
func naiveClient(ctx context.Context, base string, forms []string, dbPath string) error {
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE submissions (form_id TEXT, submission_key TEXT, submission_id INTEGER, created_at TEXT,
		is_spam INTEGER, fields TEXT, files TEXT, PRIMARY KEY (form_id, submission_key))`); err != nil {
		return err
	}
	for _, f := range forms {
		for page, pages := 1, 1; page <= pages; page++ {
			body, err := get(ctx, base, f, page)
			if err != nil {
				return err
			}
			var p naivePage
			if err := json.Unmarshal(body, &p); err != nil {
				return err
			}
			pages = p.Meta.Pagination.TotalPages
			tx, err := db.Begin()
			if err != nil {
				return err
			}
			for _, s := range p.Data {
				key := s.CreatedAt + string(s.Fields) // the older form has no id
				if s.ID != nil {
					key = strconv.FormatInt(*s.ID, 10)
				}
				_, err := tx.Exec(`INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?)
					ON CONFLICT (form_id, submission_key) DO UPDATE SET is_spam = excluded.is_spam, fields = excluded.fields, files = excluded.files`,
					f, key, s.ID, s.CreatedAt, s.IsSpam, string(s.Fields), string(s.Files))
				if err != nil {
					tx.Rollback()
					return err
				}
			}
			if err := tx.Commit(); err != nil {
				return err
			}
		}
	}
	return nil
}
