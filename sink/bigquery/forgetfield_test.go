package bigquery

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
)

// TestForgetByFieldSendsNothingOfTheValue: BigQuery's job history keeps
// every query's text and parameters for whoever may list the project's
// jobs. A forget by a field's value (Find, then a commit forgetting the
// keys found) must leave there nothing a reader could test a guessed
// value against: not the value, not its digest, and no salt and digest
// (one SHA-256 per guess confirms a value).
func TestForgetByFieldSendsNothingOfTheValue(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	rows := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false), b.row(t, "f", 3, 3, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows, "email"), rows})
	const value = "user2@example.com"
	before := len(b.fake.Jobs())

	found, err := b.sink.Find(t.Context(), "f", sink.Match{Field: "email", Value: value})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].SubmissionKey != "2" {
		t.Fatalf("Find: %+v, want row 2", found)
	}
	st := readState(t, b.sink, "f")["f"]
	res, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(2 * time.Hour), Forms: []sink.FormCommit{{State: st, Forget: []string{"2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res["f"].Forgotten != 1 {
		t.Errorf("counts %+v, want 1 forgotten", res["f"])
	}
	checkRows(t, b.sink, "f", []sink.Row{rows[0], rows[2]})

	sum := sha256.Sum256([]byte(value))
	digest := hex.EncodeToString(sum[:])
	// A salt or a digest is a long run of hex digits; the commit's own
	// ids are shorter.
	hexRun := regexp.MustCompile(`[0-9a-fA-F]{32,}`)
	jobs := b.fake.Jobs()[before:]
	if len(jobs) < 3 {
		t.Fatalf("%d jobs recorded, want the finds and the commit", len(jobs))
	}
	for _, j := range jobs {
		for what, text := range map[string]string{"SQL": j.Query, "parameters": j.Params} {
			if strings.Contains(text, value) || strings.Contains(strings.ToLower(text), digest) {
				t.Errorf("job %s: its %s carry the value or its digest:\n%s", j.ID, what, text)
			}
			if m := hexRun.FindString(text); m != "" {
				t.Errorf("job %s: its %s carry %q, a salt or digest:\n%s", j.ID, what, m, text)
			}
		}
	}
}
