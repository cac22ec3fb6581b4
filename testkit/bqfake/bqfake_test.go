package bqfake_test

import (
	"errors"
	"strings"
	"testing"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/formsync/formsync/testkit/bqfake"
)

func setup(t *testing.T, opts bqfake.Options) (*bqfake.Server, *bq.Client, *bq.Table) {
	t.Helper()
	f := bqfake.Start(t, opts)
	c, err := bq.NewClient(t.Context(), "proj", option.WithEndpoint(f.URL()+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Dataset("ds").Create(t.Context(), &bq.DatasetMetadata{Location: "US"}); err != nil {
		t.Fatal(err)
	}
	tbl := c.Dataset("ds").Table("t")
	err = tbl.Create(t.Context(), &bq.TableMetadata{Schema: bq.Schema{
		{Name: "name", Type: bq.StringFieldType, Required: true},
		{Name: "n", Type: bq.IntegerFieldType},
		{Name: "at", Type: bq.TimestampFieldType},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, tbl
}

// load runs a load job and returns its error, with the details of the
// status's errors[] joined to it (a failed load's error only points there).
func load(t *testing.T, tbl *bq.Table, ndjson string, ignoreUnknown bool) error {
	t.Helper()
	src := bq.NewReaderSource(strings.NewReader(ndjson))
	src.SourceFormat = bq.JSON
	src.IgnoreUnknownValues = ignoreUnknown
	l := tbl.LoaderFrom(src)
	job, err := l.Run(t.Context())
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	st, err := job.Wait(t.Context())
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if st.Err() == nil {
		return nil
	}
	errs := []error{st.Err()}
	for _, e := range st.Errors {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func TestLoadSchemaChecks(t *testing.T) {
	t.Parallel()
	_, c, tbl := setup(t, bqfake.Options{PageRows: 2})
	for _, tt := range []struct{ name, data, want string }{
		{"unknown field", `{"name":"a","extra":1}` + "\n", "No such field: extra"},
		{"wrong type", `{"name":"a","n":"x"}` + "\n", "Could not convert value to integer"},
		{"missing required", `{"n":1}` + "\n", "Missing required field: name"},
		{"bad timestamp", `{"name":"a","at":"yesterday"}` + "\n", "timestamp"},
	} {
		err := load(t, tbl, tt.data, false)
		var be *bq.Error
		if !errors.As(err, &be) || be.Reason != "invalid" || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want reason invalid mentioning %q", tt.name, err, tt.want)
		}
		if strings.Contains(be.Error(), tt.want) {
			t.Errorf("%s: errorResult %v names the problem; BigQuery's only points to errors[]", tt.name, be)
		}
	}
	if err := load(t, tbl, `{"name":"a","extra":1,"at":"2026-01-02T03:04:05.123456Z"}`+"\n"+`{"name":"b","n":"7"}`+"\n"+`{"name":"c"}`+"\n", true); err != nil {
		t.Fatalf("ignoreUnknownValues: %v", err)
	}
	// Read back with paging (PageRows 2).
	it, err := c.Query("SELECT * FROM `proj.ds.t`").Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		var row []bq.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, row[0].(string))
		if row[0] == "a" && row[2].(interface{ UnixMicro() int64 }).UnixMicro()%1000000 != 123456 {
			t.Errorf("timestamp lost microseconds: %v", row[2])
		}
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("rows %v, want a,b,c (failed loads must load nothing)", names)
	}
}

func TestRefusesUnknownStatements(t *testing.T) {
	t.Parallel()
	_, c, _ := setup(t, bqfake.Options{})
	for _, q := range []string{
		"DELETE FROM `proj.ds.t` WHERE TRUE",
		"SELECT * FROM `proj.ds.t` WHERE name = 'x'",
		"SELECT 1",
	} {
		_, err := c.Query(q).Read(t.Context())
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != 400 || len(ge.Errors) == 0 || ge.Errors[0].Reason != "invalidQuery" || !strings.Contains(ge.Message, "bqfake: unsupported statement") {
			t.Errorf("%q: %v, want 400 invalidQuery unsupported statement", q, err)
		}
	}
}

func TestDuplicateJobID(t *testing.T) {
	t.Parallel()
	f, c, _ := setup(t, bqfake.Options{})
	q := c.Query("SELECT * FROM `proj.ds.t`")
	q.JobID = "fixed"
	if _, err := q.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := q.Run(t.Context())
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != 409 || ge.Errors[0].Reason != "duplicate" {
		t.Errorf("second insert: %v, want 409 duplicate", err)
	}
	if got := f.Stats().QueryJobs; got != 1 {
		t.Errorf("%d query jobs, want 1", got)
	}
}

func TestPatchAppendsNullableColumnsOnly(t *testing.T) {
	t.Parallel()
	_, _, tbl := setup(t, bqfake.Options{})
	meta, err := tbl.Metadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	grown := append(bq.Schema{}, meta.Schema...)
	grown = append(grown, &bq.FieldSchema{Name: "extra", Type: bq.StringFieldType})
	for name, schema := range map[string]bq.Schema{
		"dropped column":  meta.Schema[:2],
		"required column": append(append(bq.Schema{}, meta.Schema...), &bq.FieldSchema{Name: "req", Type: bq.StringFieldType, Required: true}),
		"changed type":    append(bq.Schema{{Name: "name", Type: bq.IntegerFieldType, Required: true}}, meta.Schema[1:]...),
	} {
		if _, err := tbl.Update(t.Context(), bq.TableMetadataToUpdate{Schema: schema}, meta.ETag); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := tbl.Update(t.Context(), bq.TableMetadataToUpdate{Schema: grown}, meta.ETag); err != nil {
		t.Fatalf("appending a nullable column: %v", err)
	}
	// The etag moved on: a second update from the old metadata fails.
	var ge *googleapi.Error
	if _, err := tbl.Update(t.Context(), bq.TableMetadataToUpdate{Schema: grown}, meta.ETag); !errors.As(err, &ge) || ge.Code != 412 {
		t.Errorf("stale etag: %v, want 412", err)
	}
	if err := load(t, tbl, `{"name":"a","extra":"x"}`+"\n", false); err != nil {
		t.Errorf("loading into the new column: %v", err)
	}
}
