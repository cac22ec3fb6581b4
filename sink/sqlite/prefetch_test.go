package sqlite

import (
	"errors"
	"iter"
	"strconv"
	"testing"

	"github.com/formsync/formsync/sink"
)

// prefetch yields every row in order, then the source's error, and stops
// its goroutine (and the source) when the caller stops early.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	source := func(n int, err error, stopped *bool) iter.Seq2[sink.Row, error] {
		return func(yield func(sink.Row, error) bool) {
			defer func() { *stopped = true }()
			for i := range n {
				if !yield(sink.Row{SubmissionKey: strconv.Itoa(i), CreatedAt: t0}, nil) {
					return
				}
			}
			if err != nil {
				yield(sink.Row{}, err)
			}
		}
	}
	for _, n := range []int{0, 1, prefetchBatch, prefetchBatch*prefetchDepth*3 + 7} {
		for _, fail := range []error{nil, boom} {
			var stopped bool
			i := 0
			var got error
			for r, err := range prefetch(source(n, fail, &stopped), nil) {
				if err != nil {
					got = err
					break
				}
				if r.SubmissionKey != strconv.Itoa(i) || r.created != t0.Format(sink.TimeLayout) {
					t.Fatalf("n=%d: row %d is %q %q", n, i, r.SubmissionKey, r.created)
				}
				i++
			}
			if i != n || got != fail || !stopped {
				t.Errorf("n=%d fail=%v: %d rows, error %v, source stopped %v", n, fail, i, got, stopped)
			}
		}
		var stopped bool
		for range prefetch(source(n, nil, &stopped), nil) {
			break
		}
		if !stopped {
			t.Errorf("n=%d: source still running after the caller stopped", n)
		}
	}
}
