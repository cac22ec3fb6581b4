package apisim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
)

const million = 1_000_000

func serveRecorder(sim *Server, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Authorization", "Bearer "+DefaultToken)
	sim.ServeHTTP(w, req)
	return w
}

// TestMillionSubmissions checks a 1,000,000-submission form is cheap to build
// and that pages anywhere in it are served correctly. Memory is logged, not
// asserted tightly (the heap is shared with the test binary).
func TestMillionSubmissions(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sim := New(Options{Seed: 1, Variant: Newer, Forms: []string{"big"}, SubmissionsPerForm: million, TieEvery: 50})
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap for %d submissions: %.1f MB", million, float64(grew)/1e6)
	if grew > 150e6 {
		t.Errorf("heap grew %.1f MB for 1M submissions, want well under 150 MB", float64(grew)/1e6)
	}

	for _, page := range []int{1, 5000, 10000, 10001} {
		w := serveRecorder(sim, fmt.Sprintf("/api/forms/big/submissions?page=%d&limit=100", page))
		var p wirePage
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		want := 100
		if page > 10000 {
			want = 0
		}
		if pp := p.Meta.Pagination; pp.Total != million || pp.TotalPages != 10000 || pp.Count != want {
			t.Fatalf("page %d: %+v", page, pp)
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		serveRecorder(sim, "/api/forms/big/submissions?page=7777&limit=100")
	})
	t.Logf("allocations per 100-item page: %.0f", allocs)
	sim.Add("big", 10)
	if n := sim.Len("big"); n != million+10 {
		t.Fatalf("len %d", n)
	}
}

func BenchmarkNewMillion(b *testing.B) {
	for b.Loop() {
		New(Options{Forms: []string{"big"}, SubmissionsPerForm: million})
	}
}

func BenchmarkServePage(b *testing.B) {
	sim := New(Options{Variant: Newer, Forms: []string{"big"}, SubmissionsPerForm: million})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		w := serveRecorder(sim, fmt.Sprintf("/api/forms/big/submissions?page=%d&limit=100", 1+i%10000))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

func BenchmarkServePageParallel(b *testing.B) {
	sim := New(Options{Variant: Newer, Forms: []string{"big"}, SubmissionsPerForm: million})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			serveRecorder(sim, fmt.Sprintf("/api/forms/big/submissions?page=%d&limit=100", 1+i%10000))
		}
	})
}
