package metrics_test

import (
	"bufio"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
)

// Wiring: every API attempt reaches the metrics through the client's
// Observer, every run through ObserveRun. `formsync run` serves Handler on
// /metrics; a one-shot command calls Push once at the end instead.
func Example() {
	m := metrics.New()
	_ = formsapi.Config{Observer: m.ObserveRequest} // how the client is wired

	// What the client and the engine report during one run.
	m.ObserveRequest(formsapi.Event{FormID: "contact", Status: 200, Duration: 20 * time.Millisecond})
	m.ObserveRequest(formsapi.Event{FormID: "contact", Status: 429, Duration: 5 * time.Millisecond, Wait: time.Second})
	m.ObserveRun(&worker.Report{Duration: 2 * time.Second, Forms: []worker.FormReport{
		{FormID: "contact", Inserted: 3, Pages: 1, Watermark: state.Watermark{CreatedAt: time.Now().Add(-time.Hour)}},
		{FormID: "signup", Err: fmt.Errorf("HTTP 404")},
	}}, time.Second)

	// A scrape of Handler, a few of its lines.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"formsync_api_requests_total", "formsync_rows_total", "formsync_form_failures_total", "formsync_runs_total"} {
			if strings.HasPrefix(line, name+"{") {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// formsync_api_requests_total{status="200"} 1
	// formsync_api_requests_total{status="429"} 1
	// formsync_form_failures_total{form="signup"} 1
	// formsync_rows_total{form="contact",kind="inserted"} 3
	// formsync_rows_total{form="contact",kind="updated"} 0
	// formsync_runs_total{result="failure"} 1
	// formsync_runs_total{result="success"} 0
}
