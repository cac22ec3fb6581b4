package bqfake_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	bqv2 "google.golang.org/api/bigquery/v2"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/internal/testkit/bqfake"
)

// TestBytesProcessedInJobStatistics checks the cost model on SELECT *:
// every column of every row (STRING 2 + length, INT64 and TIMESTAMP 8,
// NULL nothing), reported by jobs.get and by jobs.list.
func TestBytesProcessedInJobStatistics(t *testing.T) {
	f, c, tbl := setup(t, bqfake.Options{})
	if err := load(t, tbl, `{"name":"ab","n":1,"at":"2026-01-02T03:04:05Z"}`+"\n"+`{"name":"abcd","n":2}`+"\n", false); err != nil {
		t.Fatal(err)
	}
	job, err := c.Query("SELECT * FROM `proj.ds.t`").Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, err := job.Wait(t.Context())
	if err != nil || st.Err() != nil {
		t.Fatal(err, st.Err())
	}
	const want = (2 + 2 + 8 + 8) + (2 + 4 + 8)
	if got := st.Statistics.TotalBytesProcessed; got != want {
		t.Errorf("jobs.get: totalBytesProcessed %d, want %d", got, want)
	}
	if got := st.Statistics.Details.(*bq.QueryStatistics).TotalBytesProcessed; got != want {
		t.Errorf("jobs.get: query.totalBytesProcessed %d, want %d", got, want)
	}
	if got := f.Stats().BytesProcessed; got != want {
		t.Errorf("Stats().BytesProcessed %d, want %d", got, want)
	}
	it := c.Jobs(t.Context())
	var listed int
	for {
		j, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if j.ID() != job.ID() {
			continue
		}
		listed++
		if got := j.LastStatus().Statistics.TotalBytesProcessed; got != want {
			t.Errorf("jobs.list: totalBytesProcessed %d, want %d", got, want)
		}
	}
	if listed != 1 {
		t.Errorf("jobs.list listed the query job %d times, want once", listed)
	}
}

func TestTablesListShowsExpiration(t *testing.T) {
	f, c, _ := setup(t, bqfake.Options{})
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	tbl := c.Dataset("ds").Table("expiring")
	if err := tbl.Create(t.Context(), &bq.TableMetadata{
		Schema:           bq.Schema{{Name: "at", Type: bq.TimestampFieldType}},
		ExpirationTime:   exp,
		TimePartitioning: &bq.TimePartitioning{Field: "at"},
	}); err != nil {
		t.Fatal(err)
	}
	it := c.Dataset("ds").Tables(t.Context())
	var seen bool
	for {
		lt, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if lt.TableID == "expiring" {
			seen = true
		}
	}
	if !seen {
		t.Fatal("tables.list does not list the table")
	}
	// The Go client's Tables iterator keeps only the reference: read the
	// listing as the REST API answers it.
	raw := listTablesRaw(t, f)
	if raw["expiring"].ExpirationTime != exp.UnixMilli() {
		t.Errorf("tables.list expirationTime %d, want %d", raw["expiring"].ExpirationTime, exp.UnixMilli())
	}
	if raw["expiring"].TimePartitioning == nil || raw["expiring"].TimePartitioning.Field != "at" {
		t.Errorf("tables.list timePartitioning %+v, want field at", raw["expiring"].TimePartitioning)
	}
}

// listTablesRaw is tables.list of proj.ds as the fake answers it, by table id.
func listTablesRaw(t *testing.T, f *bqfake.Server) map[string]*bqv2.TableListTables {
	t.Helper()
	resp, err := http.Get(f.URL() + "/bigquery/v2/projects/proj/datasets/ds/tables")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list bqv2.TableList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]*bqv2.TableListTables{}
	for _, lt := range list.Tables {
		out[lt.TableReference.TableId] = lt
	}
	return out
}
