package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	bq "cloud.google.com/go/bigquery"
	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/testkit/bqfake"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

// stagedRows returns every row of every table in the fake's staging
// dataset, as JSON text, by table.
func stagedRows(t *testing.T, fake *bqfake.Server) map[string][]string {
	t.Helper()
	c, err := bq.NewClient(t.Context(), "p", option.WithEndpoint(fake.URL()+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[string][]string{}
	it := c.Dataset("formsync_staging").Tables(t.Context())
	for {
		tbl, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows := tbl.Read(t.Context())
		for {
			var row map[string]bq.Value
			err := rows.Next(&row)
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(row)
			out[tbl.TableID] = append(out[tbl.TableID], string(b))
		}
		out[tbl.TableID] = append(out[tbl.TableID], "") // the table exists
	}
	return out
}

// TestForgetByFieldSendsNoValueAndScrubsStaging: forget --field sends
// BigQuery no request holding the value (its job history keeps query
// parameters), and afterwards no staging table of earlier syncs holds the
// forgotten submission.
func TestForgetByFieldSendsNoValueAndScrubsStaging(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 24, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "contact")
	fake := bigQueryEnv(t)
	front := bqfake.StartFront(t, fake, bqfake.Pass)
	t.Setenv("FORMSYNC_BQ_ENDPOINT", front.URL())
	// The sync's staging table is left behind, as by a crash after its
	// commit: a commit deletes its own.
	fake.FailNext(bqfake.OpTableDelete, 403, "accessDenied")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d:\n%s", code, errOut)
	}
	sub := sim.Submissions("contact")[2]
	var fields struct {
		Email string `json:"email"`
	}
	if err := json.Unmarshal(sub.Fields, &fields); err != nil || fields.Email == "" {
		t.Fatalf("submission without an email: %s", sub.Fields)
	}
	key := fmt.Sprint(sub.ID)
	holds := func(rows []string) bool {
		for _, r := range rows {
			if strings.Contains(r, fields.Email) {
				return true
			}
		}
		return false
	}
	staged := 0
	for _, rows := range stagedRows(t, fake) {
		if holds(rows) {
			staged++
		}
	}
	if staged == 0 {
		t.Fatal("no staging table holds the submission after the sync: the test tests nothing")
	}

	sent := len(front.Requests())
	code, out, errOut := run(t, "forget", "--form", "contact", "--field", "email="+fields.Email)
	if code != exitOK || !strings.Contains(out, "Forgot 1 stored row(s)") || !strings.Contains(out, key) {
		t.Fatalf("forget: exit %d, want %d forgetting %s:\n%s%s", code, exitOK, key, out, errOut)
	}
	for _, r := range front.Requests()[sent:] {
		text := r.URL + "\n" + string(r.Body) + "\n" + strings.Join(jsonStrings(r.Body), "\n")
		for _, v := range []string{fields.Email, url.QueryEscape(fields.Email), strings.ReplaceAll(fields.Email, "@", `\u0040`)} {
			if strings.Contains(text, v) {
				t.Errorf("forget sent BigQuery the value in clear (%s %s):\n%s", r.Method, r.URL, r.Body)
			}
		}
	}
	for table, rows := range stagedRows(t, fake) {
		if holds(rows) {
			t.Errorf("staging table %s still holds the forgotten submission", table)
		}
	}
}
