package bqfake_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	bqv2 "google.golang.org/api/bigquery/v2"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/testkit/bqfake"
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

// TestViewReadIsItsTablesRead: BigQuery applies a view's query to the
// table it reads. A SELECT * of a view is billed for the table's columns
// the view reads (not raw, which it leaves out), and is refused when the
// table requires a partition filter and the view's query has none; the
// same view with a filter on created_at over all of time answers.
func TestViewReadIsItsTablesRead(t *testing.T) {
	t.Parallel()
	f, c, _ := setup(t, bqfake.Options{})
	ctx := t.Context()
	subs := c.Dataset("ds").Table("submissions")
	if err := subs.Create(ctx, &bq.TableMetadata{
		Schema: bq.Schema{
			{Name: "form_id", Type: bq.StringFieldType}, {Name: "submission_id", Type: bq.IntegerFieldType},
			{Name: "submission_key", Type: bq.StringFieldType}, {Name: "created_at", Type: bq.TimestampFieldType},
			{Name: "is_spam", Type: bq.BooleanFieldType}, {Name: "synced_at", Type: bq.TimestampFieldType},
			{Name: "deleted_at", Type: bq.TimestampFieldType}, {Name: "fields", Type: bq.JSONFieldType},
			{Name: "fields_text", Type: bq.StringFieldType}, {Name: "raw", Type: bq.StringFieldType},
		},
		TimePartitioning:       &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"},
		RequirePartitionFilter: true,
	}); err != nil {
		t.Fatal(err)
	}
	row := `{"form_id":"f","submission_id":1,"submission_key":"k","created_at":"2026-01-02T03:04:05Z","is_spam":true,"synced_at":"2026-01-02T03:04:05Z","fields":{"a":"x"},"raw":"a long raw text that the view does not read"}` + "\n"
	if err := load(t, subs, row, false); err != nil {
		t.Fatal(err)
	}
	const head = "CREATE OR REPLACE VIEW `proj.ds.%s` AS SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at, JSON_VALUE(fields['a']) AS `a` FROM `proj.ds.submissions` WHERE form_id = 'f' AND deleted_at IS NULL"
	for _, q := range []string{
		fmt.Sprintf(head, "filtered") + "\n  AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'",
		fmt.Sprintf(head, "unfiltered"),
	} {
		if _, err := c.Query(q).Read(ctx); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	_, err := c.Query("SELECT * FROM `proj.ds.unfiltered`").Read(ctx)
	if want := "without a filter over column(s) 'created_at'"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("SELECT * of a view that does not filter created_at: %v, want BigQuery's refusal (%q)", err, want)
	}

	before := f.Stats().BytesProcessed
	job, err := c.Query("SELECT * FROM `proj.ds.filtered`").Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := job.Wait(ctx)
	if err != nil || st.Err() != nil {
		t.Fatalf("SELECT * of the filtered view: %v %v", err, st.Err())
	}
	// form_id 2+1, submission_id 8, submission_key 2+1, created_at 8,
	// is_spam 1, synced_at 8, deleted_at NULL, fields 2+len({"a":"x"}).
	const want = 3 + 8 + 3 + 8 + 1 + 8 + 2 + 9
	if got := f.Stats().BytesProcessed - before; got != want {
		t.Errorf("SELECT * of the view processed %d bytes, want %d (the table's columns the view reads)", got, want)
	}
}
