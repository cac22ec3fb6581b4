package worker_test

// Benchmarks of the engine, in process. They run only with -bench:
//
//	go test ./worker -run '^$' -bench 'Pipeline|RequestsVsLowerBound' -benchmem
//	go test ./worker -run '^$' -bench 'Pipeline' -benchtime 5x -cpuprofile cpu.out && go tool pprof -top worker.test cpu.out

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// renderedSource serves pages rendered once by the simulator, from memory,
// through a real client: the benchmark pays for the client and the decode,
// not for the network or the simulator.
type renderedSource struct {
	bodies map[string][][]byte // form -> page (1-based) -> body; the last is empty
}

func (s *renderedSource) RoundTrip(req *http.Request) (*http.Response, error) {
	parts := strings.Split(req.URL.Path, "/") // /api/forms/{id}/submissions
	pages := s.bodies[parts[3]]
	page, _ := strconv.Atoi(req.URL.Query().Get("page"))
	page = min(max(page, 1), len(pages))
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(pages[page-1])), Request: req}, nil
}

func (s *renderedSource) client(b *testing.B) *formsapi.Client {
	c, err := formsapi.New(formsapi.Config{BaseURL: "http://127.0.0.1", Token: "t", RateLimit: 1e9, HTTPClient: &http.Client{Transport: s}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func renderPages(b *testing.B, sim *apisim.Server, formID string, perPage int) [][]byte {
	b.Helper()
	n := sim.Len(formID)
	var pages [][]byte
	for p := 1; p <= (n+perPage-1)/perPage+1; p++ {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/forms/%s/submissions?page=%d&limit=%d", formID, p, perPage), nil)
		req.Header.Set("Authorization", "Bearer "+sim.Token())
		sim.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("rendering page %d: %d", p, w.Code)
		}
		pages = append(pages, w.Body.Bytes())
	}
	return pages
}

// BenchmarkPipeline is one full sync of 20,000 submissions (newer form,
// newest first, 100 a page) into a fresh SQLite file: JSON decode of every
// page, row canonicalisation and content key, NDJSON staging, and the SQLite
// commit. ns/submission is the CPU-bound cost of one submission end to end
// (the loop is single-form, so one core is busy at a time).
func BenchmarkPipeline(b *testing.B) {
	for _, v := range []apisim.Variant{apisim.Newer, apisim.Older} {
		b.Run(v.String(), func(b *testing.B) {
			const n, perPage = 20_000, 100
			sim := apisim.New(apisim.Options{Seed: 5, Variant: v, Forms: []string{"bench"}, SubmissionsPerForm: n, TieEvery: 50})
			pp := perPage
			if v == apisim.Older {
				pp = 25 // the older form fixes per_page at 25
			}
			src := &renderedSource{bodies: map[string][][]byte{"bench": renderPages(b, sim, "bench", pp)}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				syncFresh(b, src, worker.Config{Forms: []string{"bench"}, PageSize: perPage}, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/submission")
		})
	}
}

// BenchmarkRequestsVsLowerBound measures how many requests an incremental
// sync makes for N new submissions per form, against the lower bound
// ceil(N / page size), for both sort orders. Each iteration adds N
// submissions to every form and syncs once; requests are counted by the
// simulator. The initial (full) sync is not counted.
func BenchmarkRequestsVsLowerBound(b *testing.B) {
	forms := []string{"a", "b", "c", "d"}
	for _, order := range []apisim.Order{apisim.NewestFirst, apisim.OldestFirst} {
		for _, ps := range []int{10, 25, 100} {
			for _, n := range []int{1, 10, 99, 250} {
				b.Run(fmt.Sprintf("order=%s/page=%d/new=%d", order, ps, n), func(b *testing.B) {
					s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "r.db"))
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					h := enginetest.NewHarness(b, apisim.Options{Seed: 9, Variant: apisim.Newer, Order: order, Forms: forms, SubmissionsPerForm: 1000, TieEvery: 7}, s)
					h.Config.PageSize = ps
					h.MustSync(b.Context())
					requests, iters := 0, 0
					for b.Loop() {
						b.StopTimer()
						for _, f := range forms {
							h.Sim.Add(f, n)
						}
						h.Sim.ResetStats()
						b.StartTimer()
						h.MustSync(b.Context())
						requests += h.Sim.Stats().Requests
						iters++
					}
					perForm := float64(requests) / float64(iters*len(forms))
					bound := math.Ceil(float64(n) / float64(ps))
					b.ReportMetric(perForm, "requests/form")
					b.ReportMetric(bound, "lower-bound/form")
					b.ReportMetric(perForm-bound, "extra/form")
					b.Logf("order=%s page=%d new=%d: %.2f requests/form, lower bound %.0f", order, ps, n, perForm, bound)
				})
			}
		}
	}
}

// BenchmarkReconcileRequests counts the requests of a reconcile of forms of
// various sizes against the bound ceil(total/page size): a reconcile reads
// every page once. 5 % of each form is deleted upstream before each
// iteration, so that every reconcile marks rows.
//
//	go test ./worker -run '^$' -bench 'ReconcileRequests' -benchtime 3x
func BenchmarkReconcileRequests(b *testing.B) {
	forms := []string{"a", "b", "c", "d"}
	for _, v := range []apisim.Variant{apisim.Newer, apisim.Older} {
		for _, order := range []apisim.Order{apisim.NewestFirst, apisim.OldestFirst} {
			for _, total := range []int{99, 1000, 5000} {
				b.Run(fmt.Sprintf("variant=%s/order=%s/total=%d", v, order, total), func(b *testing.B) {
					s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "r.db"))
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					h := enginetest.NewHarness(b, apisim.Options{Seed: 10, Variant: v, Order: order, Forms: forms, SubmissionsPerForm: total, TieEvery: 7}, s)
					h.Config.PageSize = 100
					h.MustSync(b.Context())
					var requests, bound, marked float64
					iters := 0
					for b.Loop() {
						b.StopTimer()
						for _, f := range forms {
							h.Sim.Delete(f, total/20)
						}
						h.Sim.ResetStats()
						b.StartTimer()
						rep := h.MustReconcile(b.Context())
						b.StopTimer()
						requests += float64(h.Sim.Stats().Requests)
						for _, f := range forms {
							fr := enginetest.FormReport(b, rep, f)
							per := 100
							if v == apisim.Older {
								per = 25 // the older form pages by 25 whatever is asked
							}
							bound += math.Ceil(float64(fr.Total) / float64(per))
							marked += float64(fr.Deleted)
						}
						iters++
						b.StartTimer()
					}
					n := float64(iters * len(forms))
					b.ReportMetric(requests/n, "requests/form")
					b.ReportMetric(bound/n, "bound/form")
					b.ReportMetric((requests-bound)/n, "extra/form")
					b.Logf("variant=%s order=%s total=%d: %.2f requests/form, bound ceil(total/page) %.2f, %.1f rows marked deleted/form", v, order, total, requests/n, bound/n, marked/n)
				})
			}
		}
	}
}

// BenchmarkFirstSyncInParts is a first sync of 1,000,000 submissions
// (newer form, newest first, 100 a page, rendered beforehand, no HTTP) into
// a fresh SQLite file, committed in one commit at the end and in parts
// while the form is read (Config.PartRows). Run it with -benchtime 1x.
func BenchmarkFirstSyncInParts(b *testing.B) {
	const n, perPage = 1_000_000, 100
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"bench"}, SubmissionsPerForm: n})
	src := &renderedSource{bodies: map[string][][]byte{"bench": renderPages(b, sim, "bench", perPage)}}
	for _, parts := range []int{0, worker.DefaultPartRows, 50_000} {
		b.Run(fmt.Sprintf("parts=%d", parts), func(b *testing.B) {
			for b.Loop() {
				syncFresh(b, src, worker.Config{Forms: []string{"bench"}, PageSize: perPage, PartRows: parts}, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/submission")
		})
	}
}

// syncFresh times one sync of src into a new SQLite file under cfg, and
// the file's closing (its last WAL checkpoint) but not its creation, and
// fails b unless the form's n rows were inserted.
func syncFresh(b *testing.B, src *renderedSource, cfg worker.Config, n int) {
	b.Helper()
	b.StopTimer()
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "p.db"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.TmpDir = b.TempDir()
	e, err := worker.New(src.client(b), s, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	rep, err := e.Sync(b.Context())
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		b.Fatal(err)
	}
	if got := rep.Forms[0].Inserted; got != int64(n) {
		b.Fatalf("inserted %d, want %d", got, n)
	}
}
