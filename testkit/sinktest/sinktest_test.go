package sinktest_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/sinktest"
)

// rowsWithoutState commits the rows but keeps each form's stored state:
// the watermark would never move with its rows.
type rowsWithoutState struct{ *memory.Sink }

func (s rowsWithoutState) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	stored, err := s.ReadState(ctx, nil)
	if err != nil {
		return nil, err
	}
	kept := &sink.Commit{SyncedAt: c.SyncedAt}
	for _, fc := range c.Forms {
		st, ok := stored[fc.State.FormID]
		if !ok {
			st = state.New(fc.State.FormID)
		}
		kept.Forms = append(kept.Forms, sink.FormCommit{State: st, Rows: fc.Rows})
	}
	return s.Sink.Commit(ctx, kept)
}

// doubleCount reports twice the rows it stores in row_count.
type doubleCount struct{ *memory.Sink }

func (s doubleCount) ReadState(ctx context.Context, ids []string) (map[string]state.Form, error) {
	got, err := s.Sink.ReadState(ctx, ids)
	for id, st := range got {
		st.Rows *= 2
		got[id] = st
	}
	return got, err
}

// copiesOutliveRows keeps file copies apart from its rows: whatever it
// is given, for as long as it lives.
type copiesOutliveRows struct {
	*memory.Sink
	mu     sync.Mutex
	copies map[[3]string]sink.FileCopy
}

func (s *copiesOutliveRows) RecordFiles(_ context.Context, copies []sink.FileCopy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range copies {
		s.copies[[3]string{c.FormID, c.SubmissionKey, c.URL}] = c
	}
	return nil
}

func (s *copiesOutliveRows) FileRows(ctx context.Context, formIDs []string, since time.Time) ([]sink.FileRow, error) {
	rows, err := s.Sink.FileRows(ctx, formIDs, since)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range rows {
		rows[i].Copies = nil
		for k, c := range s.copies {
			if k[0] == r.FormID && k[1] == r.SubmissionKey {
				rows[i].Copies = append(rows[i].Copies, c)
			}
		}
		slices.SortFunc(rows[i].Copies, func(a, b sink.FileCopy) int { return strings.Compare(a.URL, b.URL) })
	}
	return rows, err
}

func (s *copiesOutliveRows) NamedDigests(_ context.Context, digests []string) (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, c := range s.copies {
		if slices.Contains(digests, c.SHA256) {
			out[c.SHA256] = true
		}
	}
	return out, nil
}

var broken = map[string]func() sinktest.Sink{
	"rows-without-state": func() sinktest.Sink { return rowsWithoutState{memory.New()} },
	"double-count":       func() sinktest.Sink { return doubleCount{memory.New()} },
	"copies-outlive-rows": func() sinktest.Sink {
		return &copiesOutliveRows{Sink: memory.New(), copies: map[[3]string]sink.FileCopy{}}
	},
}

// brokenHas are the abilities a broken sink is run with.
var brokenHas = map[string][]sinktest.Ability{"copies-outlive-rows": {sinktest.KeepsFiles}}

// TestBrokenSinkUnderContract runs the contract on the broken sink named by
// SINKTEST_BROKEN; it is meant to fail, and runs only as the child process
// of TestContractCatchesBrokenSinks.
func TestBrokenSinkUnderContract(t *testing.T) {
	t.Parallel()
	open, ok := broken[os.Getenv("SINKTEST_BROKEN")]
	if !ok {
		t.Skip("runs only as a child of TestContractCatchesBrokenSinks")
	}
	name := os.Getenv("SINKTEST_BROKEN")
	sinktest.Run(t, func(*testing.T) sinktest.Sink { return open() }, brokenHas[name]...)
}

// TestContractCatchesBrokenSinks shows the contract can fail: a sink that
// commits rows without their state, one that double-counts row_count, and
// one whose file copies outlive their rows each fail it, in the checks
// that should catch them.
func TestContractCatchesBrokenSinks(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"rows-without-state":  "--- FAIL: TestBrokenSinkUnderContract/StateRoundTrip",
		"double-count":        "row_count",
		"copies-outlive-rows": "--- FAIL: TestBrokenSinkUnderContract/FilesForgottenWithTheirRow",
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenSinkUnderContract$", "-test.v")
			cmd.Env = append(os.Environ(), "SINKTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the contract passed a sink that is broken (%s):\n%s", name, out)
			}
			if !strings.Contains(string(out), want) {
				t.Errorf("the contract failed %s, but not with %q:\n%s", name, want, out)
			}
		})
	}
}
