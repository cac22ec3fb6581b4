package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/formsync/formsync/testkit/filestest"
	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"
	"google.golang.org/api/option"
)

// openStores opens one store of each kind: a folder, memory, and a GCS
// fake speaking the JSON API on loopback, under a prefix.
func openStores(t *testing.T, now func() time.Time) map[string]*Store {
	t.Helper()
	gcs := filestest.GCS(t, "bucket")
	stores := map[string]*Store{}
	for kind, rawURL := range map[string]string{
		"file": (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String(),
		"mem":  "mem://",
		"gcs":  "gs://bucket/formsync/files",
	} {
		s, err := OpenStore(t.Context(), rawURL, StoreOptions{
			GCS: gcs,
			Now: now,
		})
		if err != nil {
			t.Fatalf("OpenStore(%s): %v", rawURL, err)
		}
		t.Cleanup(func() { s.Close() })
		stores[kind] = s
	}
	return stores
}

// keys lists every key of the store's bucket.
func keys(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	it := s.bucket.List(nil)
	for {
		o, err := it.Next(t.Context())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestStorePut: a file is stored under its digest with its type and
// name, once however often it is put, and nothing else stays behind.
func TestStorePut(t *testing.T) {
	t.Parallel()
	for kind, s := range openStores(t, nil) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			body := bytes.Repeat([]byte("%PDF-1.7 a signed form\n"), 5000)
			sha := digest(body)
			obj, err := s.Put(ctx, bytes.NewReader(body), PutOptions{ContentType: "application/pdf", Name: "signed form.pdf"})
			if err != nil {
				t.Fatal(err)
			}
			wantURI := map[string]string{"file": s.base + "/sha256/" + sha, "mem": "mem://sha256/" + sha, "gcs": "gs://bucket/formsync/files/sha256/" + sha}[kind]
			if diff := cmp.Diff(Object{SHA256: sha, Size: int64(len(body)), URI: wantURI}, obj); diff != "" {
				t.Errorf("Put (-want +got):\n%s", diff)
			}
			if kind == "file" && obj.URI != "file://"+filepath.ToSlash(s.bucketDir(t))+"/sha256/"+sha {
				t.Errorf("URI = %s, not the file's", obj.URI)
			}
			// The same bytes again, under another name: stored once.
			again, err := s.Put(ctx, bytes.NewReader(body), PutOptions{Name: "copy.pdf"})
			if err != nil {
				t.Fatal(err)
			}
			if !again.Existed || again.SHA256 != sha {
				t.Errorf("second Put = %+v, want the existing object", again)
			}
			wantKey := s.prefix + "sha256/" + sha
			if diff := cmp.Diff([]string{wantKey}, keys(t, s)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			attrs, err := s.Attributes(ctx, sha)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(Attributes{Size: int64(len(body)), ContentType: "application/pdf", Name: "signed form.pdf"}, attrs); diff != "" {
				t.Errorf("Attributes (-want +got):\n%s", diff)
			}
			r, err := s.Open(ctx, sha)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("Open gives %d bytes (%v), want the %d put", len(got), err, len(body))
			}

			// Another file, with no type: sniffed; a name that is not UTF-8 kept readable.
			png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 100)...)
			obj2, err := s.Put(ctx, bytes.NewReader(png), PutOptions{ContentType: "not a type", Name: "ph\xffoto.png"})
			if err != nil {
				t.Fatal(err)
			}
			attrs, err = s.Attributes(ctx, obj2.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			if attrs.ContentType != "image/png" || attrs.Name != "ph\uFFFDoto.png" {
				t.Errorf("Attributes = %+v, want image/png sniffed and the name made valid", attrs)
			}

			// Delete: gone, and again no error; the other object stays.
			if err := s.Delete(ctx, sha); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, sha); err != nil {
				t.Errorf("Delete of a deleted object: %v", err)
			}
			if ok, err := s.Exists(ctx, sha); ok || err != nil {
				t.Errorf("Exists after Delete = %v, %v", ok, err)
			}
			if ok, err := s.Exists(ctx, obj2.SHA256); !ok || err != nil {
				t.Errorf("Exists of the other object = %v, %v", ok, err)
			}
		})
	}
}

// failingReader gives some bytes, then fails.
type failingReader struct{ n int }

var errBroken = errors.New("connection reset")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errBroken
	}
	n := min(len(p), r.n)
	clear(p[:n])
	r.n -= n
	return n, nil
}

// TestStorePutFails: a body that breaks off stores nothing, not even a
// temporary object, and says why.
func TestStorePutFails(t *testing.T) {
	t.Parallel()
	for kind, s := range openStores(t, nil) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			_, err := s.Put(t.Context(), &failingReader{n: 3 << 20}, PutOptions{Name: "big.bin"})
			if !errors.Is(err, errBroken) {
				t.Fatalf("Put = %v, want the reader's error", err)
			}
			if got := keys(t, s); len(got) != 0 {
				t.Errorf("objects after a failed Put: %v", got)
			}
		})
	}
}

// TestStoreSweep: Sweep deletes the temporary objects a crash left, once
// they are old enough, and nothing else.
func TestStoreSweep(t *testing.T) {
	t.Parallel()
	var now time.Time
	for kind, s := range openStores(t, func() time.Time { return now }) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			obj, err := s.Put(ctx, bytes.NewReader([]byte("kept")), PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// What a crash between upload and delete leaves.
			leftover := s.prefix + "tmp/0123abcd"
			if err := s.bucket.WriteAll(ctx, leftover, []byte("half"), &blob.WriterOptions{}); err != nil {
				t.Fatal(err)
			}
			strays := []string{leftover}
			if kind == "file" {
				// fileblob's own temporary file of an interrupted write.
				stray := s.prefix + "sha256/" + obj.SHA256 + ".18a2b3c4d5e6f708.tmp"
				if err := s.bucket.WriteAll(ctx, stray, []byte("half"), nil); err != nil {
					t.Fatal(err)
				}
				strays = append(strays, stray)
			}
			a, err := s.bucket.Attributes(ctx, leftover)
			if err != nil {
				t.Fatal(err)
			}
			now = a.ModTime.Add(30 * time.Minute)
			if n, err := s.Sweep(ctx, time.Hour); n != 0 || err != nil {
				t.Errorf("Sweep of young leftovers = %d, %v; want 0", n, err)
			}
			now = a.ModTime.Add(2 * time.Hour)
			if n, err := s.Sweep(ctx, time.Hour); n != len(strays) || err != nil {
				t.Errorf("Sweep = %d, %v; want %d", n, err, len(strays))
			}
			if diff := cmp.Diff([]string{s.prefix + "sha256/" + obj.SHA256}, keys(t, s)); diff != "" {
				t.Errorf("objects after Sweep (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStoreDigests(t *testing.T) {
	t.Parallel()
	s, err := OpenStore(t.Context(), "mem://", StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, sha := range []string{"", "../tmp/x", "ABCDEF" + digest(nil)[6:], digest(nil) + "0", digest(nil)[:63] + "g"} {
		var de *DigestError
		if _, err := s.Exists(t.Context(), sha); !errors.As(err, &de) {
			t.Errorf("Exists(%q) = %v, want a DigestError", sha, err)
		}
		if err := s.Delete(t.Context(), sha); !errors.As(err, &de) {
			t.Errorf("Delete(%q) = %v, want a DigestError", sha, err)
		}
	}
}

func TestOpenStoreURLs(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "s3://bucket", "file://relative/path", "file:relative", "gs://", "gs:///prefix", "mem://x", "gs://b/p?x=1", "%zz"} {
		if s, err := OpenStore(t.Context(), bad, StoreOptions{GCS: []option.ClientOption{option.WithoutAuthentication()}}); err == nil {
			s.Close()
			t.Errorf("OpenStore(%q) opened", bad)
		}
	}
}

// bucketDir is the folder of a file store.
func (s *Store) bucketDir(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(s.base)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.FromSlash(u.Path)
}

// TestCaughtUp: the forms marked caught up are read back, marks add up,
// and a store never marked has none.
func TestCaughtUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memStore(t)
	got, err := s.CaughtUp(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("a new store: %v, %v; want no form", got, err)
	}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if err := s.MarkCaughtUp(ctx, []string{"a", "b"}, at); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkCaughtUp(ctx, []string{"c"}, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err = s.CaughtUp(ctx)
	if err != nil || len(got) != 3 || !got["a"].Equal(at) || !got["c"].Equal(at.Add(time.Hour)) {
		t.Errorf("marks %v, %v", got, err)
	}
}
