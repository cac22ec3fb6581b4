package bigquery

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
	"google.golang.org/api/iterator"

	bq "cloud.google.com/go/bigquery"
)

// TestFirstCommitsOfANewFormAtOnce: two processes make the first commit
// of a new form at the same time, against a fake where transactions that
// only insert run side by side and both commit (as BigQuery's do). Both
// would pass the revision check at 0 and insert the state and the rows
// twice; the lock row every commit updates first makes them conflict, so
// that the form gets one sync_state row and every submission once,
// whichever of the two BigQuery cancels: the later one at once, or the
// earlier one mid-script when it finishes.
func TestFirstCommitsOfANewFormAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name         string
		abortEarlier bool
	}{{"later cancelled at once", false}, {"earlier aborted mid-script", true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, bqfake.Options{PendingPolls: 2, AbortEarlier: tt.abortEarlier})
			const form = "fresh"
			rows := []sink.Row{b.row(t, form, 1, 1, false), b.row(t, form, 2, 2, false), b.row(t, form, 3, 3, false)}

			// The first transaction's job stays running until the second
			// one's has started.
			var scripts atomic.Int32
			both := make(chan struct{})
			remove := b.fake.OnStatement(func(kind string) {
				if kind != "SCRIPT" {
					return
				}
				switch scripts.Add(1) {
				case 1:
					select {
					case <-both:
					case <-time.After(10 * time.Second):
					}
				case 2:
					close(both)
				}
			})
			defer remove()

			var wg sync.WaitGroup
			var aborted atomic.Int32
			for i, name := range []string{"one", "two"} {
				cfg := b.cfg
				cfg.StagingTable = "_formsync_staging_" + name
				s, err := Open(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				wg.Add(1)
				go func() {
					defer wg.Done()
					for attempt := 0; attempt < 20; attempt++ {
						stored, err := s.ReadState(t.Context(), []string{form})
						if err != nil {
							t.Error(err)
							return
						}
						st, ok := stored[form]
						if !ok {
							st = state.New(form)
						}
						for _, r := range rows {
							st.Watermark = st.Watermark.Advance(r.CreatedAt, *r.SubmissionID, r.SubmissionKey)
						}
						c := &sink.Commit{SyncedAt: b.t0.Add(time.Duration(i+1) * time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, rows...)}}}
						_, err = s.Commit(t.Context(), c)
						switch {
						case err == nil:
							return
						case errors.Is(err, sink.ErrStateConflict), errors.Is(err, ErrConcurrentUpdate):
							aborted.Add(1)
							continue
						default:
							t.Errorf("%s: %v", name, err)
							return
						}
					}
					t.Errorf("%s: never committed", name)
				}()
			}
			wg.Wait()
			if scripts.Load() < 2 {
				t.Fatalf("%d transactions ran, want both", scripts.Load())
			}

			if n := stateRows(t, b, form); n != 1 {
				t.Errorf("%d sync_state rows of form %s, want 1", n, form)
			}
			checkRows(t, b.sink, form, rows)
			if st := b.fake.Stats(); st.Aborted == 0 {
				t.Errorf("no transaction was cancelled: the two commits did not conflict")
			}
		})
	}
}

// stateRows counts the sync_state rows of form, duplicates included.
func stateRows(t *testing.T, b *bundle, form string) int {
	t.Helper()
	it, err := b.sink.client.Query("SELECT * FROM " + b.sink.t.State).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for {
		var row map[string]bq.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if row["form_id"] == form {
			n++
		}
	}
}
