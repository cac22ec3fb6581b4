package sinktest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

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

var broken = map[string]func() sinktest.Sink{
	"rows-without-state": func() sinktest.Sink { return rowsWithoutState{memory.New()} },
	"double-count":       func() sinktest.Sink { return doubleCount{memory.New()} },
}

// TestBrokenSinkUnderContract runs the contract on the broken sink named by
// SINKTEST_BROKEN; it is meant to fail, and runs only as the child process
// of TestContractCatchesBrokenSinks.
func TestBrokenSinkUnderContract(t *testing.T) {
	t.Parallel()
	open, ok := broken[os.Getenv("SINKTEST_BROKEN")]
	if !ok {
		t.Skip("runs only as a child of TestContractCatchesBrokenSinks")
	}
	sinktest.Run(t, func(*testing.T) sinktest.Sink { return open() })
}

// TestContractCatchesBrokenSinks shows the contract can fail: a sink that
// commits rows without their state, and one that double-counts row_count,
// each fail it, in the checks that should catch them.
func TestContractCatchesBrokenSinks(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"rows-without-state": "--- FAIL: TestBrokenSinkUnderContract/StateRoundTrip",
		"double-count":       "row_count",
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
