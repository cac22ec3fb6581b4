package files

import (
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/testkit/filestest"
)

// BenchmarkFetchStore fetches distinct 50 KB files from a loopback
// server into a file:// store, one file an op, and reports the peak heap
// sampled during the run: it stays flat however many files are fetched,
// as bodies stream and are never held whole.
//
//	go test ./worker/files -run '^$' -bench FetchStore -benchtime 1000x -benchmem
func BenchmarkFetchStore(b *testing.B) {
	const size = 50 << 10
	filler := make([]byte, size-8)
	for i := range filler {
		filler[i] = byte(i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseUint(r.URL.Path[1:], 10, 64)
		var head [8]byte
		binary.BigEndian.PutUint64(head[:], n)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(head[:])
		w.Write(filler)
	}))
	defer srv.Close()
	f, err := NewFetcher(FetcherConfig{AddressPolicy: AddressPolicy{AllowLoopback: true},
		Resolver: &filestest.Resolver{T: b, Hosts: map[string][]string{}}, Dialer: &filestest.Dialer{T: b, Loopback: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer f.CloseIdleConnections()
	s, err := OpenStore(b.Context(), (&url.URL{Scheme: "file", Path: filepath.ToSlash(b.TempDir())}).String(), StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		name := strconv.Itoa(i)
		res, err := f.Fetch(b.Context(), Entry{Name: &name, URL: ptrTo(srv.URL + "/" + name)}, s)
		if err != nil {
			b.Fatal(err)
		}
		if res.Existed || res.Size != size {
			b.Fatalf("file %d: %+v", i, res)
		}
	}
	b.StopTimer()
	close(done)
	<-sampled
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
}

func ptrTo[T any](v T) *T { return &v }
