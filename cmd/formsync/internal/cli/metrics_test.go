package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
)

// TestREADMEDocumentsEveryMetric: every formsync_ metric the binary
// exposes has a row in the README's metrics table.
func TestREADMEDocumentsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	// Vectors are exposed once they have a child: observe one of each.
	m.ObserveRequest(formsapi.Event{FormID: "a", Status: 429, Duration: time.Millisecond, Wait: time.Second})
	wm := state.Watermark{CreatedAt: time.Now().Add(-time.Hour)}
	m.ObserveRun(&worker.Report{Duration: time.Second, Forms: []worker.FormReport{
		{FormID: "a", Inserted: 1, Updated: 1, Pages: 1, Watermark: wm},
		{FormID: "b", Err: errors.New("failed")},
	}}, time.Second)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "formsync_") {
			continue
		}
		n++
		if !strings.Contains(string(readme), "| `"+name) {
			t.Errorf("README.md's metrics table has no row for %s (%s)", name, f.GetHelp())
		}
	}
	if n < 10 {
		t.Errorf("only %d formsync_ metrics gathered", n)
	}
}

// TestFailedRunIsPushed: a one-shot sync or reconcile that cannot run at
// all (here its sink does not open) pushes a failed run, so that the
// Pushgateway's group says so rather than keep the last success.
func TestFailedRunIsPushed(t *testing.T) {
	for _, cmd := range []string{"sync", "reconcile"} {
		t.Run(cmd, func(t *testing.T) {
			clearEnv(t)
			var (
				mu     sync.Mutex
				pushed []string
			)
			pg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
				var got []string
				for {
					var mf dto.MetricFamily
					if err := dec.Decode(&mf); err != nil {
						break
					}
					if mf.GetName() != "formsync_runs_total" {
						continue
					}
					for _, m := range mf.GetMetric() {
						for _, l := range m.GetLabel() {
							got = append(got, fmt.Sprintf("%s=%s %g", l.GetName(), l.GetValue(), m.GetCounter().GetValue()))
						}
					}
				}
				mu.Lock()
				pushed = append(pushed, strings.Join(got, ", "))
				mu.Unlock()
			}))
			defer pg.Close()
			t.Setenv("FORMSYNC_PUSHGATEWAY_URL", pg.URL)
			t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"))
			t.Setenv("FORMSYNC_FORMS", "a")
			t.Setenv("FORMSYNC_API_BASE_URL", "http://127.0.0.1:1")
			t.Setenv("FORMSYNC_API_TOKEN", "t")
			if code, _, errOut := run(t, cmd); code != exitFailed {
				t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, errOut)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(pushed) != 1 || !strings.Contains(pushed[0], "result=failure 1") {
				t.Errorf("pushed %d times; want one push of a failed run:\n%s", len(pushed), strings.Join(pushed, "\n---\n"))
			}
		})
	}
}
