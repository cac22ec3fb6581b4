package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
)

// TestFilesSyncBigQueryBucket is TestFilesSyncSQLiteFolder into the
// BigQuery sink (the in-process fake, FORMSYNC_BQ_ENDPOINT) with a gs://
// store on an in-process GCS fake (STORAGE_EMULATOR_HOST, as the storage
// client honours it): every file is stored by its bytes or recorded
// expired, submission_files (read through the fake) says where, and a
// second sync requests no file, stores no object and records no copy.
// 1,000 submissions with FORMSYNC_SLOW_TESTS=1 (about 60 s, the GCS fake
// taking most of it), 150 without.
func TestFilesSyncBigQueryBucket(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	n := 150
	if enginetest.SlowTests() {
		n = 1000
	}
	bin := buildBinary(t)
	sims, srvURL := filesSims(t, n, apisim.Options{Seed: 71, Files: apisim.FileOptions{Expired: 0.05, Redirect: 0.02}})
	// PublicHost: the fake serves the XML API's reads (GET /bucket/key),
	// which the storage client uses when STORAGE_EMULATOR_HOST is set,
	// only to a request for its public host.
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1", Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "bucket"})
	gcsURL, err := url.Parse(gcs.URL())
	if err != nil || gcsURL.Hostname() != "127.0.0.1" {
		t.Fatalf("the GCS fake listens on %s, not on loopback", gcs.URL())
	}
	fake, err := bqfake.New(bqfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	bqSrv := httptest.NewServer(fake.Handler())
	t.Cleanup(bqSrv.Close)

	const base = "gs://bucket/formsync/files"
	env := filesEnv(t, sims, srvURL, filepath.Join(t.TempDir(), "unused.db"), base, "FORMSYNC_PAGE_SIZE=100",
		"FORMSYNC_SINK=bigquery", "FORMSYNC_BQ_PROJECT="+benchBQProject, "FORMSYNC_BQ_DATASET="+benchBQDataset,
		"FORMSYNC_BQ_ENDPOINT="+bqSrv.URL, "STORAGE_EMULATOR_HOST="+gcsURL.Host)
	read := func(uri string) ([]byte, error) {
		bucket, key, ok := strings.Cut(strings.TrimPrefix(uri, "gs://"), "/")
		if !ok || !strings.HasPrefix(uri, "gs://") {
			return nil, fmt.Errorf("object URI %q: not a gs:// URI", uri)
		}
		o, err := gcs.GetObject(bucket, key)
		return o.Content, err
	}

	run(t, bin, env, "sync")
	if got := countBQTable(t, bqSrv.URL, "submissions"); got != uint64(n) {
		t.Fatalf("%d rows stored, want %d", got, n)
	}
	c := checkViewFiles(t, sims, bqFiles(t, bqSrv.URL), base, read)
	if c.expired == 0 || c.stored == 0 {
		t.Fatalf("%d files stored, %d expired: want some of each", c.stored, c.expired)
	}
	requests, objects, copies := sims.fileRequests(), bucketObjects(t, gcs), countBQTable(t, bqSrv.URL, sink.FilesTable)
	t.Logf("first sync: %d files stored, %d recorded expired, %d file requests, %d objects in the bucket, %d copy records", c.stored, c.expired, requests, len(objects), copies)

	out := run(t, bin, env, "sync")
	if got := sims.fileRequests(); got != requests {
		t.Errorf("the second sync made %d file requests, want none\n%s", got-requests, out)
	}
	if got := bucketObjects(t, gcs); !maps.Equal(got, objects) {
		t.Errorf("the second sync changed the bucket: %d objects before, %d after", len(objects), len(got))
		for k, v := range got {
			if objects[k] != v {
				t.Logf("%s: %q, then %q", k, objects[k], v)
			}
		}
	}
	if got := countBQTable(t, bqSrv.URL, sink.FilesTable); got != copies {
		t.Errorf("the second sync recorded copies: %d records before, %d after", copies, got)
	}
	checkViewFiles(t, sims, bqFiles(t, bqSrv.URL), base, read)
}

// bucketObjects lists the GCS fake's objects in bucket "bucket" with
// their generation: two listings are equal when nothing was stored
// between them.
func bucketObjects(t testing.TB, gcs *fakestorage.Server) map[string]string {
	t.Helper()
	objs, _, err := gcs.ListObjects("bucket", "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range objs {
		out[o.Name] = fmt.Sprintf("%d %d", o.Size, o.Generation)
	}
	return out
}

// bqFiles reads the fake's submission_files view through the real client.
func bqFiles(t testing.TB, endpoint string) []viewFile {
	t.Helper()
	ctx := t.Context()
	c, err := bq.NewClient(ctx, benchBQProject, option.WithEndpoint(endpoint+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	it, err := c.Query("SELECT * FROM `" + benchBQProject + "." + benchBQDataset + ".submission_files`").Read(ctx)
	if err != nil {
		t.Fatalf("reading submission_files from the fake: %v", err)
	}
	var out []viewFile
	for {
		row := map[string]bq.Value{}
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		v := viewFile{FormID: bqString(row["form_id"]).String, SubmissionKey: bqString(row["submission_key"]).String,
			URL: bqString(row["url"]).String, ObjectURI: bqString(row["object_uri"]), SHA256: bqString(row["sha256"]),
			ContentType: bqString(row["content_type"]), StoredAt: bqString(row["stored_at"]), Why: bqString(row["not_stored_reason"])}
		if n, ok := row["stored_size"].(int64); ok {
			v.StoredSize = sql.NullInt64{Int64: n, Valid: true}
		}
		out = append(out, v)
	}
}

// bqString is a view's STRING or TIMESTAMP value as text (a time in
// sink.TimeLayout), not valid for NULL.
func bqString(v bq.Value) sql.NullString {
	switch x := v.(type) {
	case string:
		return sql.NullString{String: x, Valid: true}
	case time.Time:
		return sql.NullString{String: x.UTC().Format(sink.TimeLayout), Valid: true}
	}
	return sql.NullString{}
}
