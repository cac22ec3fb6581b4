package sink

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"
)

// oneRow is a row of form f with an id.
func oneRow(t *testing.T) Row {
	t.Helper()
	id := int64(1)
	r, err := NewRow("f", &id, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), false, json.RawMessage(`{"a":"1"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFinishedSpoolsHoldNoBuffers checks that a finished spool gives up
// its write buffers: a backfill keeps several finished spools waiting for
// their commits, and each held 64 KiB.
func TestFinishedSpoolsHoldNoBuffers(t *testing.T) {
	const n = 64
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	r := oneRow(t)
	before := heap()
	spools := make([]*Spool, n)
	for i := range spools {
		sp := spoolOf(t, r)
		if err := sp.Finish(); err != nil {
			t.Fatal(err)
		}
		spools[i] = sp
	}
	// Each spool keeps its file and a few counters: well under 4 KiB.
	after := heap()
	if grew := after - min(before, after); grew > n*4<<10 {
		t.Errorf("%d finished spools hold %d KiB of heap, want under %d", n, grew>>10, n*4)
	}
	for _, sp := range spools {
		got := 0
		for _, err := range sp.Rows() {
			if err != nil {
				t.Fatal(err)
			}
			got++
		}
		if got != 1 {
			t.Fatalf("read %d rows back, want 1", got)
		}
	}
}

// TestFailedFinishStaysFailed: a spool whose last rows could not be
// written fails every later Finish and every read, so that no caller
// commits it short of rows.
func TestFailedFinishStaysFailed(t *testing.T) {
	t.Parallel()
	r := oneRow(t)
	sp := spoolOf(t, r)
	sp.f.Close() // the row is still buffered: writing it fails
	if err := sp.Finish(); err == nil {
		t.Fatal("Finish succeeded writing to a closed file")
	}
	if err := sp.Finish(); err == nil {
		t.Error("a second Finish succeeded after the first failed")
	}
	if rc, err := sp.Open(); err == nil {
		rc.Close()
		t.Error("Open succeeded on a spool whose Finish failed")
	}
	for _, err := range sp.Rows() {
		if err == nil {
			t.Error("Rows yielded a row of a spool whose Finish failed")
		}
		break
	}
}

// spoolOf returns a new spool, removed when the test ends, holding r
// appended and not yet finished.
func spoolOf(t *testing.T, r Row) *Spool {
	t.Helper()
	sp, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Remove() })
	if err := sp.Append(r); err != nil {
		t.Fatal(err)
	}
	return sp
}
