package main

import (
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/enginetest"
)

// TestSIGTERMStopsCleanly sends SIGTERM to a `formsync sync` in the middle of
// its reading: it must exit within the shutdown bound, leave every form
// either committed completely or untouched, and a later run completes them.
func TestSIGTERMStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	forms := []string{"a", "b", "c", "d", "e", "f"}
	sim := apisim.New(apisim.Options{Seed: 31, Variant: apisim.Newer, Forms: forms, SubmissionsPerForm: 400, Latency: 2 * time.Millisecond})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "t.db")
	env := baseEnv(srv.URL, strings.Join(forms, ","), db, t.TempDir(), "FORMSYNC_CONCURRENCY=2",
		"FORMSYNC_PAGE_SIZE=10", "FORMSYNC_RATE_LIMIT=150", "FORMSYNC_SHUTDOWN_TIMEOUT=5s", "FORMSYNC_LOG_LEVEL=info")
	cmd := exec.Command(bin, "sync")
	cmd.Env = env
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// 6 forms of 40 pages, two at a time: stop it once the simulator has
	// served 120 requests, when the first two forms are read and the next
	// two are half read (at 150 requests/s, about 0.8 s in), however
	// slowly the process started.
	for deadline := time.Now().Add(20 * time.Second); sim.Stats().Requests < 120; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests after 20 s", sim.Stats().Requests)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	cmd.Wait()
	waited := time.Since(start)
	if waited > 5*time.Second {
		t.Errorf("took %s to stop after SIGTERM, bound is 5s", waited)
	}

	s, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := &enginetest.Harness{T: t, Sim: sim, Sink: s}
	states, _ := s.ReadState(t.Context(), nil)
	done := 0
	for _, f := range forms {
		rows, _ := s.ReadRows(t.Context(), f)
		switch st, ok := states[f]; {
		case ok && !st.Watermark.IsZero():
			done++
			h.CheckTable(t.Context(), f, enginetest.Expected(t, sim, f, apisim.Newer))
		case len(rows) > 0:
			t.Errorf("form %s: %d rows without a watermark: half-done", f, len(rows))
		}
	}
	if !strings.Contains(logs.String(), "will be retried") {
		t.Errorf("the interrupted run does not say it will be retried:\n%s", logs.String())
	}
	if done == 0 || done == len(forms) {
		t.Errorf("%d of %d forms committed: SIGTERM did not land mid-run\n%s", done, len(forms), logs.String())
	}
	cmd = exec.Command(bin, "sync")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run after the stop: %v\n%s", err, out)
	}
	for _, f := range forms {
		h.CheckTable(t.Context(), f, enginetest.Expected(t, sim, f, apisim.Newer))
	}
	t.Logf("SIGTERM after 120 requests: stopped in %s; %d of %d forms committed, the rest untouched; the next run completed them", waited.Round(time.Millisecond), done, len(forms))
}
