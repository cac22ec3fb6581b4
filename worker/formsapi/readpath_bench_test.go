package formsapi

// Benchmarks of the read path without HTTP or SQLite: pages rendered once
// by the simulator are decoded, each submission made a row (canonical
// fields and files, content key) and staged in a spool, as a sync does.
//
//	go test ./worker/formsapi -run '^$' -bench 'DecodePage|ReadPath' -benchmem -count 6
//	go test ./worker/formsapi -run '^$' -bench 'ReadPath' -cpuprofile cpu.out && go tool pprof -top formsapi.test cpu.out

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"unsafe"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state/fieldtype"
)

// benchPages renders the pages of one form of 20,000 submissions.
func benchPages(b *testing.B, v apisim.Variant) (pages [][]byte, n int) {
	b.Helper()
	const form = "bench"
	n = 20_000
	perPage := 100
	if v == apisim.Older {
		perPage = 25 // the older form fixes per_page at 25
	}
	sim := apisim.New(apisim.Options{Seed: 5, Variant: v, Forms: []string{form}, SubmissionsPerForm: n, TieEvery: 50})
	for p := 1; p <= (n+perPage-1)/perPage; p++ {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/forms/%s/submissions?page=%d&limit=%d", form, p, perPage), nil)
		req.Header.Set("Authorization", "Bearer "+sim.Token())
		sim.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("rendering page %d: %d", p, w.Code)
		}
		pages = append(pages, w.Body.Bytes())
	}
	return pages, n
}

// BenchmarkDecodePage decodes every page of a 20,000-submission form.
func BenchmarkDecodePage(b *testing.B) {
	for _, v := range []apisim.Variant{apisim.Newer, apisim.Older} {
		b.Run(v.String(), func(b *testing.B) {
			pages, n := benchPages(b, v)
			b.ReportAllocs()
			for b.Loop() {
				for i, body := range pages {
					if _, err := decodePage("bench", i+1, body); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/submission")
		})
	}
}

// BenchmarkReadPath is what reading a form costs a sync apart from HTTP:
// decode every page, build every row, stage it in a spool, type its
// fields.
func BenchmarkReadPath(b *testing.B) {
	for _, v := range []apisim.Variant{apisim.Newer, apisim.Older} {
		b.Run(v.String(), func(b *testing.B) {
			pages, n := benchPages(b, v)
			dir := b.TempDir()
			b.ReportAllocs()
			var types fieldtype.Set
			for b.Loop() {
				spool, err := sink.NewSpool(dir)
				if err != nil {
					b.Fatal(err)
				}
				for i, body := range pages {
					p, err := decodePage("bench", i+1, body)
					if err != nil {
						b.Fatal(err)
					}
					for _, s := range p.Submissions {
						row, err := sink.NewRow("bench", s.ID, s.CreatedAt, s.IsSpam, s.Fields, s.Files)
						if err != nil {
							b.Fatal(err)
						}
						row.Raw = string(s.Raw)
						if err := spool.Append(row); err != nil {
							b.Fatal(err)
						}
						// The field names and their types, as a sync takes
						// them in (worker's formRun.stage).
						types = types.Observe(unsafe.Slice(unsafe.StringData(row.Fields), len(row.Fields)))
					}
				}
				if err := spool.Finish(); err != nil {
					b.Fatal(err)
				}
				spool.Remove()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/submission")
		})
	}
}
