package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
)

// TestREADMEDocumentsEveryMetric: every formsync_ metric the binary
// exposes has a row in the README's metrics table.
func TestREADMEDocumentsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
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
