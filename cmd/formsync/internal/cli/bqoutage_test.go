package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
)

// bqBudget is FORMSYNC_BQ_TIMEOUT in these tests; a sync must end within
// it plus bqSlack.
const (
	bqBudget = 2 * time.Second
	bqSlack  = 3 * time.Second
)

// storedForm reads form's state and row count from the fake directly.
func storedForm(t *testing.T, fake *bqfake.Server, form string) (state.Form, int) {
	t.Helper()
	s, err := bigquery.OpenReadOnly(t.Context(), bigquery.Config{Project: "p", Endpoint: fake.URL()})
	if errors.Is(err, bigquery.ErrNotFound) {
		return state.Form{}, 0 // nothing synced yet
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.ReadState(t.Context(), []string{form})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.ReadRows(t.Context(), form)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range rows {
		if keys[r.SubmissionKey] {
			t.Errorf("form %s holds submission %s twice", form, r.SubmissionKey)
		}
		keys[r.SubmissionKey] = true
	}
	return st[form], len(rows)
}

// TestSyncWithBigQueryUnreachable: a sync against a BigQuery that refuses
// connections or never answers, from the start or from the commit on, or
// answers 503, ends within FORMSYNC_BQ_TIMEOUT, says each retry at
// WARNING, fails naming the endpoint, and leaves the watermark; the next
// sync against BigQuery back is exact.
func TestSyncWithBigQueryUnreachable(t *testing.T) {
	isUpload := func(r bqfake.Request) bool { return strings.HasPrefix(r.URL, "/upload/") }
	for _, tc := range []struct {
		name string
		mode bqfake.Mode
		// atCommit: the outage begins with the commit's upload, after a
		// first sync stored the form.
		atCommit bool
	}{
		{"refused from the start", bqfake.Refuse, false},
		{"never answered from the start", bqfake.Hang, false},
		{"refused from the commit on", bqfake.Refuse, true},
		{"never answered from the commit on", bqfake.Hang, true},
		{"503 from the commit on", bqfake.Unavailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := apisim.New(apisim.Options{Seed: 21, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 30})
			syncEnv(t, sim, "a")
			fake := bigQueryEnv(t)
			var before state.Form
			if tc.atCommit {
				if code, _, errOut := run(t, "sync"); code != exitOK {
					t.Fatalf("first sync: exit %d:\n%s", code, errOut)
				}
				before, _ = storedForm(t, fake, "a")
				sim.Add("a", 10)
			}
			mode := tc.mode
			if tc.atCommit {
				mode = bqfake.Pass
			}
			front := bqfake.StartFront(t, fake, mode)
			if tc.atCommit {
				front.SetWhen(tc.mode, isUpload)
			}
			t.Setenv("FORMSYNC_BQ_ENDPOINT", front.URL())
			t.Setenv("FORMSYNC_BQ_TIMEOUT", bqBudget.String())

			start := time.Now()
			code, _, errOut := run(t, "sync")
			took := time.Since(start)
			if code != exitFailed {
				t.Fatalf("sync against an unreachable BigQuery: exit %d, want %d:\n%s", code, exitFailed, errOut)
			}
			if took > bqBudget+bqSlack {
				t.Errorf("sync took %v, budget %v", took, bqBudget)
			}
			var retries int
			for line := range strings.Lines(errOut) {
				if strings.Contains(line, `"message":"BigQuery request failed; retrying"`) {
					retries++
					for _, want := range []string{`"severity":"WARNING"`, `"endpoint":"` + front.URL() + `"`, `"request":"`, `"error":"`} {
						if !strings.Contains(line, want) {
							t.Errorf("retry line without %s: %s", want, line)
						}
					}
				}
			}
			if retries == 0 && tc.mode != bqfake.Hang {
				t.Errorf("no retry said at WARNING:\n%s", errOut)
			}
			if !strings.Contains(errOut, front.URL()+" answered no request for 2s (FORMSYNC_BQ_TIMEOUT)") {
				t.Errorf("the failure does not name the endpoint and the setting:\n%s", errOut)
			}

			after, _ := storedForm(t, fake, "a")
			if !after.Watermark.CreatedAt.Equal(before.Watermark.CreatedAt) || after.Watermark.ID != before.Watermark.ID || after.Revision != before.Revision {
				t.Errorf("the failed sync moved the form: watermark %v/%d rev %d -> %v/%d rev %d",
					before.Watermark.CreatedAt, before.Watermark.ID, before.Revision, after.Watermark.CreatedAt, after.Watermark.ID, after.Revision)
			}

			t.Setenv("FORMSYNC_BQ_ENDPOINT", fake.URL())
			if code, _, errOut := run(t, "sync"); code != exitOK {
				t.Fatalf("sync with BigQuery back: exit %d:\n%s", code, errOut)
			}
			if _, n := storedForm(t, fake, "a"); n != sim.Len("a") {
				t.Errorf("after BigQuery came back the form holds %d rows, the API serves %d", n, sim.Len("a"))
			}
		})
	}
}

// TestShutdownDuringBigQueryOutageSaysNothingCommitted: a sync stopped by
// the signal while its commit waits on an unanswering BigQuery says that
// the form it read was not committed, rather than counting it nowhere.
func TestShutdownDuringBigQueryOutageSaysNothingCommitted(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 22, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 30})
	syncEnv(t, sim, "a")
	fake := bigQueryEnv(t)
	front := bqfake.StartFront(t, fake, bqfake.Pass)
	front.SetWhen(bqfake.Hang, func(r bqfake.Request) bool { return strings.HasPrefix(r.URL, "/upload/") })
	t.Setenv("FORMSYNC_BQ_ENDPOINT", front.URL())
	t.Setenv("FORMSYNC_BQ_TIMEOUT", "1m")
	t.Setenv("FORMSYNC_SHUTDOWN_TIMEOUT", "1s")
	logs, stop := start(t, "sync")
	waitFor(t, "no upload reached BigQuery", func() bool {
		for _, r := range front.Requests() {
			if strings.HasPrefix(r.URL, "/upload/") {
				return true
			}
		}
		return false
	})
	if code := stop(); code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	out := logs.String()
	for _, want := range []string{"the commit did not complete", `"committed":0`, `"read_not_committed":1`, `"read_not_committed_forms":["a"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("the closing line lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "forms read completely were committed") {
		t.Errorf("the closing line says forms read completely were committed:\n%s", out)
	}
}
