package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
)

// The tests and benchmarks of `formsync run`'s webhook endpoint, driven
// as the form service drives it.

const webhookSecret = "0123456789abcdef0123456789abcdef"

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hookRun is a `formsync run` process with its webhook endpoint.
type hookRun struct {
	cmd      *exec.Cmd
	logs     *lockedBuffer
	hooks    string // the endpoint's base URL, http://ADDR/hooks/SECRET/
	httpAddr string // the metrics' address
	done     chan struct{}
}

// freeLoopbackAddr is a loopback address no one listens on, for a
// process that must be told its address before it starts.
func freeLoopbackAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitUntil polls cond every 10 ms for at most limit.
func waitUntil(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("after %s: %s", limit, what)
		}
	}
}

// startHookRun starts `formsync run` with env (plus the webhook endpoint
// on triggerAddr, or a free loopback port when ""), and waits for its
// first sync to finish.
func startHookRun(tb testing.TB, bin string, env []string, triggerAddr string) *hookRun {
	tb.Helper()
	secretFile := filepath.Join(tb.TempDir(), "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(webhookSecret+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if triggerAddr == "" {
		triggerAddr = "127.0.0.1:0"
	}
	r := &hookRun{logs: &lockedBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, "run")
	r.cmd.Env = append(env, "FORMSYNC_LOG_LEVEL=info", "FORMSYNC_HTTP_ADDR=127.0.0.1:0",
		"FORMSYNC_TRIGGER_ADDR="+triggerAddr, "FORMSYNC_TRIGGER_SECRET_FILE="+secretFile)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	tb.Cleanup(func() { r.stop(tb) })
	running := regexp.MustCompile(`"http_addr":"([^"]+)","webhook_addr":"([^"]+)"`)
	waitUntil(tb, 60*time.Second, "formsync run did not say where it listens", func() bool { return running.MatchString(r.logs.String()) })
	m := running.FindStringSubmatch(r.logs.String())
	r.httpAddr, r.hooks = m[1], "http://"+m[2]+"/hooks/"+webhookSecret+"/"
	waitUntil(tb, 60*time.Second, "no sync at start", func() bool { return strings.Contains(r.logs.String(), `"message":"sync finished"`) })
	return r
}

// stop sends SIGTERM and waits (bounded) for the process to end.
func (r *hookRun) stop(tb testing.TB) {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
		tb.Errorf("formsync run did not stop within 30 s of SIGTERM")
	}
}

// triggered is the number of syncs a webhook started so far.
func (r *hookRun) triggered() int {
	return strings.Count(r.logs.String(), `"message":"syncing forms a webhook named"`)
}

// metric reads one sample of the process's /metrics (0 when absent).
func (r *hookRun) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	resp, err := http.Get("http://" + r.httpAddr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	for line := range strings.SplitSeq(buf.String(), "\n") {
		var v float64
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}

// storedIDs are the submission ids of form in the SQLite file db, sorted.
func storedIDs(tb testing.TB, db, form string) []int64 {
	tb.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT submission_id FROM submissions WHERE form_id = ? ORDER BY submission_id`, form)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return ids
}

func simIDs(sim *apisim.Server, form string) []int64 {
	var ids []int64
	for _, s := range sim.Submissions(form) {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestWebhookBurst: 1,000 webhooks for 3 forms within one second, as
// concurrent POSTs, are each answered 202 or 429 (the endpoint's own flood
// limit); they cause a few syncs, not hundreds; every form's table then
// holds exactly the simulator's submissions; and the API, which answers
// 429 past its plan limit, answered none: formsync's client limiter kept
// it. The figures are logged:
//
//	go test ./cmd/formsync -run TestWebhookBurst -v
func TestWebhookBurst(t *testing.T) {
	bin := buildBinary(t)
	forms := []string{"contact", "signup", "feedback"}
	// The plan allows 10 requests a second, twice formsync's default
	// client rate (FORMSYNC_RATE_LIMIT=5).
	sim := apisim.New(apisim.Options{Seed: 50, Variant: apisim.Newer, Forms: forms, SubmissionsPerForm: 40,
		PlanLimit: 10, PlanWindow: time.Second})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "burst.db")
	env := baseEnv(srv.URL, strings.Join(forms, ","), db, t.TempDir(), "FORMSYNC_SCHEDULE=0 0 1 1 *")
	r := startHookRun(t, bin, env, "")
	before := r.triggered()

	// New submissions on every form, then the burst that announces them.
	for i, f := range forms {
		sim.Add(f, 30+10*i)
	}
	const total, workers = 1000, 50
	var accepted, limited, other atomic.Int64
	var next atomic.Int64
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				// Spread over one second: request i not before i ms.
				if d := time.Until(start.Add(time.Duration(i) * time.Millisecond)); d > 0 {
					time.Sleep(d)
				}
				resp, err := client.Post(r.hooks+forms[i%3], "application/json", strings.NewReader(`{"payload":{"name":"x"},"files":{}}`))
				if err != nil {
					other.Add(1)
					continue
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusAccepted:
					accepted.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	sent := time.Since(start)
	if accepted.Load()+limited.Load() != total || accepted.Load() == 0 {
		t.Fatalf("of %d webhooks %d were answered 202, %d 429 and %d otherwise (or not at all)", total, accepted.Load(), limited.Load(), other.Load())
	}

	for _, f := range forms {
		want := simIDs(sim, f)
		waitUntil(t, 60*time.Second, "form "+f+" does not hold the simulator's submissions", func() bool {
			return slices.Equal(storedIDs(t, db, f), want)
		})
	}
	// Let the queue drain: a sync it still holds would count too.
	time.Sleep(500 * time.Millisecond)
	syncs := r.triggered() - before
	st := sim.Stats()
	r.stop(t)
	for _, f := range forms {
		if got, want := storedIDs(t, db, f), simIDs(sim, f); !slices.Equal(got, want) {
			t.Errorf("form %s: %d rows, the simulator %d submissions, or other ids", f, len(got), len(want))
		}
	}
	t.Logf("burst: %d webhooks in %s: %d answered 202, %d answered 429; %d triggered syncs; API: %d requests, %d answered 429",
		total, sent.Round(time.Millisecond), accepted.Load(), limited.Load(), syncs, st.Requests, st.ByStatus[http.StatusTooManyRequests])
	if syncs < 1 || syncs > 5 {
		t.Errorf("%d syncs for a burst of %d webhooks; want between 1 and 5", syncs, total)
	}
	if n := st.ByStatus[http.StatusTooManyRequests]; n > 0 {
		t.Errorf("the API answered 429 %d times: formsync went past its plan limit", n)
	}
}
