package filestest

import (
	"io"
	"net/url"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"
)

// GCS starts an in-process fake of Cloud Storage's JSON API on loopback,
// stopped when t ends, with the buckets named, and returns the client
// options that reach it (files.StoreOptions.GCS).
func GCS(t testing.TB, buckets ...string) []option.ClientOption {
	t.Helper()
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	for _, b := range buckets {
		gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	if u, err := url.Parse(gcs.URL()); err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("the GCS fake listens on %s, not on loopback", gcs.URL())
	}
	// The fake serves reads through the JSON API only.
	return []option.ClientOption{option.WithEndpoint(gcs.URL() + "/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads()}
}
