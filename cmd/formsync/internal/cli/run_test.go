package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/worker"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs formsync with args in the background; stop cancels it (the
// signal) and returns its exit code.
func start(t *testing.T, args ...string) (logs *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	logs = &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, logs, logs) }()
	return logs, func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatalf("formsync %s did not stop within 30 s of the signal", strings.Join(args, " "))
			return -1
		}
	}
}

// waitFor waits (bounded) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %s", what)
		}
	}
}

func TestRunSyncsAtStart(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 10})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_SCHEDULE", "0 0 1 1 *") // the first tick is months away
	t.Setenv("FORMSYNC_HTTP_ADDR", "127.0.0.1:0")
	logs, stop := start(t, "run")
	waitFor(t, "no sync at start", func() bool { return strings.Contains(logs.String(), `"message":"sync finished"`) })
	if code := stop(); code != 0 {
		t.Errorf("exit %d:\n%s", code, logs)
	}
	if !strings.Contains(logs.String(), "syncing now, at start") {
		t.Errorf("the sync at start is not logged:\n%s", logs)
	}

	// Told not to, it waits for the tick.
	t.Setenv("FORMSYNC_SYNC_AT_START", "false")
	logs, stop = start(t, "run")
	waitFor(t, "not running", func() bool { return strings.Contains(logs.String(), "formsync is running") })
	before := sim.Stats().Requests
	if code := stop(); code != 0 || sim.Stats().Requests != before || strings.Contains(logs.String(), "sync finished") {
		t.Errorf("FORMSYNC_SYNC_AT_START=false: exit %d, a sync ran:\n%s", code, logs)
	}
	// Stopped while idle, it says no sync was running, then that it stopped.
	for _, want := range []string{`"message":"stopping: no sync is running"`, `"message":"stopped","exit_code":0`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("stopped while idle: no %s in\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "finishing the running sync") {
		t.Errorf("stopped while idle, it says it finishes a sync:\n%s", logs)
	}
}

// TestRunRefusesABusyPortBeforeOpeningTheSink: an address it cannot serve
// on fails `run` (exit 1) before the sink is opened, so no SQLite file (or
// BigQuery dataset) is made for a process that never syncs.
func TestRunRefusesABusyPortBeforeOpeningTheSink(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 10})
	db := syncEnv(t, sim, "a")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("FORMSYNC_HTTP_ADDR", ln.Addr().String())
	code, _, errOut := run(t, "run")
	if code != exitFailed || !strings.Contains(errOut, "cannot serve health and metrics") {
		t.Errorf("busy port: exit %d:\n%s", code, errOut)
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the database was made before the port was refused (%v)", err)
	}
}

// TestRunStopsWhenTheTokenIsRejected: the client refuses every request
// after a 401 and the token is read at start, so `run` stops with exit 1
// (a restart reads the token again) instead of failing every later sync.
func TestRunStopsWhenTheTokenIsRejected(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 10})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_API_TOKEN", "not-the-token")
	t.Setenv("FORMSYNC_SCHEDULE", "0 0 1 1 *")
	t.Setenv("FORMSYNC_HTTP_ADDR", "127.0.0.1:0")
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- Main(t.Context(), []string{"run"}, logs, logs) }()
	select {
	case code := <-done:
		if code != exitFailed {
			t.Errorf("exit %d, want %d:\n%s", code, exitFailed, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("formsync run still running 30 s after the API rejected its token:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "the API rejected the token: stopping") {
		t.Errorf("the reason is not logged:\n%s", logs)
	}
	if n := sim.Stats().Requests; n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestInterruptedRunSaysSo: a sync stopped by the signal says that the
// forms it did not finish are retried, and exits 1. Nothing retries a
// reconcile (the next sync only reads what is new), so its line says to
// run it again instead.
func TestInterruptedRunSaysSo(t *testing.T) {
	for _, tt := range []struct {
		command       string
		want, wantNot []string
	}{
		{"sync", []string{"sync interrupted by a shutdown signal, will be retried"}, nil},
		{"reconcile", []string{"reconcile interrupted by a shutdown signal", "run the same command again"}, []string{"will be retried"}},
	} {
		t.Run(tt.command, func(t *testing.T) {
			forms := []string{"a", "b", "c"}
			sim := apisim.New(apisim.Options{Seed: 6, Variant: apisim.Newer, Forms: forms, SubmissionsPerForm: 400, Latency: 2 * time.Millisecond})
			syncEnv(t, sim, forms...)
			t.Setenv("FORMSYNC_PAGE_SIZE", "10")
			t.Setenv("FORMSYNC_CONCURRENCY", "1")
			logs, stop := start(t, tt.command)
			waitFor(t, "too few requests", func() bool { return sim.Stats().Requests >= 5 })
			if code := stop(); code != exitFailed {
				t.Errorf("exit %d, want %d", code, exitFailed)
			}
			out := logs.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("the interruption line lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("the interruption line says %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestRunOnAnEmptyShardIdles: a shard that no form falls in syncs nothing,
// as a one-shot sync of it does, and stays up until the signal, exit 0.
func TestRunOnAnEmptyShardIdles(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 10})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_SHARD_COUNT", "4")
	for i := range 4 {
		if len(shardForms(Config{Forms: []string{"a"}, ShardIndex: i, ShardCount: 4})) == 0 {
			t.Setenv("FORMSYNC_SHARD_INDEX", strconv.Itoa(i))
			break
		}
	}
	t.Setenv("FORMSYNC_HTTP_ADDR", "127.0.0.1:0")
	logs, stop := start(t, "run")
	waitFor(t, "not running", func() bool { return strings.Contains(logs.String(), "formsync is running") })
	if code := stop(); code != 0 || sim.Stats().Requests != 0 || !strings.Contains(logs.String(), "no form falls in this shard") {
		t.Errorf("run on an empty shard: exit %d, %d requests:\n%s", code, sim.Stats().Requests, logs)
	}
}

// TestInterruptedSyncCountsCommittedParts: a form interrupted after it
// committed parts of a large read keeps those rows, so the interruption
// line must not say it is unchanged, and says how many rows stay.
func TestInterruptedSyncCountsCommittedParts(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	logs := &syncBuffer{}
	e := &env{stdout: logs, stderr: logs, log: newLogger(logs, Config{})}
	rep := &worker.Report{Forms: []worker.FormReport{
		{FormID: "big", Inserted: 20000, Parts: 2, Err: fmt.Errorf("form big: %w", context.Canceled)},
		{FormID: "small", Inserted: 3},
	}}
	if !logInterrupted(ctx, e, rep, false) {
		t.Fatal("not reported as interrupted")
	}
	out := logs.String()
	if strings.Contains(out, "unchanged") || !strings.Contains(out, `"rows_committed_in_parts":20000`) {
		t.Errorf("the interruption line misreports the rows committed in parts:\n%s", out)
	}
}
