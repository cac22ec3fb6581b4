package files

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/option"
)

// Object names under a store's prefix: stored files under their digest,
// and the uploads whose digest is not known yet.
const (
	objectDir = "sha256/"
	tmpDir    = "tmp/"
)

// MetadataName is the object metadata key holding the original file name
// (the object's content type is its own attribute).
const MetadataName = "filename"

// gcsChunkSize is the buffer of one GCS upload: a file up to it goes in
// one request; a larger one in resumable chunks of it. The client's
// default (16 MiB per upload in flight) would dwarf the files.
const gcsChunkSize = 1 << 20

// StoreOptions are the settings of OpenStore beyond its URL.
type StoreOptions struct {
	// GCS are the options of the Cloud Storage client for gs:// stores:
	// an endpoint and no authentication for a fake, in tests. None means
	// Application Default Credentials (Workload Identity on GKE).
	GCS []option.ClientOption
	// Now is the clock Sweep measures age by. Defaults to time.Now.
	Now func() time.Time
}

// Store keeps files in a bucket under names made of their SHA-256, so
// that the same bytes are stored once however many times they are put.
// It is safe for concurrent use.
type Store struct {
	bucket *blob.Bucket
	prefix string // ends in "/" unless empty
	base   string // the URI of the prefix, without its trailing "/"
	local  bool   // a file:// store, whose driver strands temporary files beside their objects
	dir    string // a file:// store's folder
	gcs    *storage.Client
	now    func() time.Time
}

// OpenStore opens the store a URL names:
//
//   - file:///path: a folder (made if missing); objects are files under
//     it, their metadata in .attrs files beside them.
//   - gs://bucket/prefix: a Cloud Storage bucket, objects under prefix.
//   - mem://: in memory, for tests and demos.
//
// Close it when done.
func OpenStore(ctx context.Context, rawURL string, opts StoreOptions) (*Store, error) {
	u, err := parseStoreURL(rawURL)
	if err != nil {
		return nil, err
	}
	s := &Store{now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	switch u.Scheme {
	case "file":
		dir := filepath.Clean(filepath.FromSlash(u.Path))
		// Temporary files beside their objects: a rename across mounts (a
		// volume and the system's temporary folder) would fail.
		s.bucket, err = fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, NoTempDir: true})
		s.base, s.local, s.dir = (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String(), true, dir
	case "gs":
		s.prefix = strings.Trim(u.Path, "/")
		if s.prefix != "" {
			s.prefix += "/"
		}
		s.base = "gs://" + u.Host + "/" + s.prefix
		s.base = strings.TrimSuffix(s.base, "/")
		s.gcs, err = storage.NewClient(ctx, opts.GCS...)
		if err != nil {
			return nil, fmt.Errorf("opening the file store %s: %w", rawURL, err)
		}
		s.bucket, err = gcsblob.OpenBucket(ctx, nil, u.Host, &gcsblob.Options{Client: s.gcs})
	case "mem":
		s.bucket, s.base = memblob.OpenBucket(nil), "mem:/"
	}
	if err != nil {
		if s.gcs != nil {
			_ = s.gcs.Close()
		}
		return nil, fmt.Errorf("opening the file store %s: %w", rawURL, err)
	}
	return s, nil
}

// CheckStoreURL reports what is wrong with a store's URL, as OpenStore
// would refuse it, without opening anything.
func CheckStoreURL(rawURL string) error {
	_, err := parseStoreURL(rawURL)
	return err
}

// parseStoreURL parses a store's URL: file:///absolute/path,
// gs://bucket[/prefix] or mem://.
func parseStoreURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("opening the file store: %w", err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("opening the file store %s: a query or fragment is not part of a store's URL", rawURL)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" || u.Path == "" || !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return nil, fmt.Errorf("opening the file store %s: want file:///absolute/path", rawURL)
		}
	case "gs":
		if u.Host == "" {
			return nil, fmt.Errorf("opening the file store %s: want gs://bucket or gs://bucket/prefix", rawURL)
		}
	case "mem":
		if u.Host != "" || strings.Trim(u.Path, "/") != "" {
			return nil, fmt.Errorf("opening the file store %s: want mem://", rawURL)
		}
	default:
		return nil, fmt.Errorf("opening the file store %s: the scheme is not file, gs or mem", rawURL)
	}
	return u, nil
}

// Close closes the bucket and its client.
func (s *Store) Close() error {
	err := s.bucket.Close()
	if s.gcs != nil {
		err = errors.Join(err, s.gcs.Close())
	}
	return err
}

// PutOptions describe the file being put.
type PutOptions struct {
	// ContentType is the file's media type; when empty or not a valid
	// one, the store sniffs it from the first bytes.
	ContentType string
	// Name is the file's original name, kept as metadata (MetadataName).
	Name string
}

// Object is a stored file.
type Object struct {
	// SHA256 is the hex SHA-256 of the bytes, its name in the store.
	SHA256 string
	// Size is the number of bytes.
	Size int64
	// URI is where it is: gs://bucket/prefix/sha256/<hex>,
	// file:///path/sha256/<hex> or mem://sha256/<hex>.
	URI string
	// Existed says the store held these bytes already: this Put added
	// nothing (a retry, a second sync, another submission's same file).
	Existed bool
}

// Put stores the bytes r gives until EOF, streaming them (never held
// whole in memory), and returns the object they are now under.
//
// The digest is known only once the bytes are read, so they go to a
// temporary object (tmp/<random>) first, hashed on the way; then, unless
// sha256/<digest> exists already, it is copied there (a folder renames
// it); then the temporary object is deleted (one the delete fails to
// remove is left to Sweep).
// An error reading r or writing aborts the upload and
// leaves no object. A crash between the upload and the delete can leave
// a tmp/ object, which Sweep removes; it never leaves a partial object
// under a digest (objects appear whole: fileblob renames, GCS and memory
// create on close). Two Puts of the same bytes at once may both copy:
// the object is the same. The name kept as metadata is that of the
// first Put of these bytes (or of the last copy of such a race).
func (s *Store) Put(ctx context.Context, r io.Reader, opts PutOptions) (Object, error) {
	tmp, err := randomName()
	if err != nil {
		return Object{}, err
	}
	tmp = s.prefix + tmpDir + tmp
	sum, n, err := s.upload(ctx, tmp, r, opts)
	if err != nil {
		return Object{}, err
	}
	obj := Object{SHA256: sum, Size: n, URI: s.URI(sum)}
	key := s.key(sum)
	if obj.Existed, err = s.bucket.Exists(ctx, key); err != nil {
		return Object{}, fmt.Errorf("storing a file: looking for %s: %w", key, err)
	}
	if !obj.Existed {
		if err := s.move(ctx, key, tmp); err != nil {
			return Object{}, fmt.Errorf("storing a file: copying it to %s: %w", key, err)
		}
		if s.local {
			return obj, nil // moved: no upload left to delete
		}
	}
	// The file is stored: an upload left behind (the delete failing) is
	// Sweep's, not a reason to fetch it again.
	_ = s.bucket.Delete(ctx, tmp)
	return obj, nil
}

// move puts the upload tmp under key. A folder renames it, its sidecar
// of attributes first (fileblob's <file>.attrs), so that the object
// appears whole and with its attributes, and the bytes are written once;
// a bucket copies it (GCS: a copy within the service), and the caller
// deletes the upload.
func (s *Store) move(ctx context.Context, key, tmp string) error {
	if !s.local {
		return s.bucket.Copy(ctx, key, tmp, nil)
	}
	from, to := filepath.Join(s.dir, filepath.FromSlash(tmp)), filepath.Join(s.dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(to), 0o777); err != nil {
		return err
	}
	if err := os.Rename(from+attrsSuffix, to+attrsSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(from, to)
}

// attrsSuffix ends the name of the file in which fileblob keeps an
// object's attributes, beside it.
const attrsSuffix = ".attrs"

// upload writes r to key, hashing and counting it; on an error the write
// is aborted.
func (s *Store) upload(ctx context.Context, key string, r io.Reader, opts PutOptions) (string, int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wopts := &blob.WriterOptions{ContentType: mediaType(opts.ContentType), BufferSize: gcsChunkSize}
	if opts.Name != "" {
		wopts.Metadata = map[string]string{MetadataName: strings.ToValidUTF8(opts.Name, string(utf8.RuneError))}
	}
	w, err := s.bucket.NewWriter(wctx, key, wopts)
	if err != nil {
		return "", 0, fmt.Errorf("storing a file: %w", err)
	}
	h := sha256.New()
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	// Through Write, not the blob writer's ReadFrom, which takes a fresh
	// 1 MiB buffer for every file.
	n, err := io.CopyBuffer(writerOnly{w}, &hashingReader{r: r, h: h}, *buf)
	if err != nil {
		cancel() // before Close: aborts the write
		_ = w.Close()
		return "", 0, fmt.Errorf("storing a file: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", 0, fmt.Errorf("storing a file: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copyBuffers are the buffers uploads copy through.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// writerOnly hides a writer's ReadFrom from io.CopyBuffer.
type writerOnly struct{ io.Writer }

// hashingReader hashes what it reads. Unlike io.TeeReader it hides r's
// WriteTo, so io.Copy reads through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	return n, err
}

// mediaType is t when it is a valid media type (the blob writer refuses
// others), normalised; empty otherwise, which lets the store sniff it.
func mediaType(t string) string {
	mt, params, err := mime.ParseMediaType(t)
	if err != nil {
		return ""
	}
	return mime.FormatMediaType(mt, params)
}

// randomName is a name no other upload takes.
func randomName() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("naming an upload: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// DigestError is a digest that is not the hex SHA-256 this store names
// objects by.
type DigestError struct{ Digest string }

func (e *DigestError) Error() string {
	return fmt.Sprintf("%q is not a hex SHA-256 digest", e.Digest)
}

// checkDigest refuses anything but 64 lower-case hex digits, so that a
// digest never names an object outside sha256/.
func checkDigest(sha string) error {
	if len(sha) != sha256.Size*2 {
		return &DigestError{sha}
	}
	for _, c := range []byte(sha) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return &DigestError{sha}
		}
	}
	return nil
}

func (s *Store) key(sha string) string { return s.prefix + objectDir + sha }

// URI is the URI of the object with digest sha, as a table stores it.
func (s *Store) URI(sha string) string { return s.base + "/" + objectDir + sha }

// Exists reports whether the object with digest sha is stored.
func (s *Store) Exists(ctx context.Context, sha string) (bool, error) {
	if err := checkDigest(sha); err != nil {
		return false, err
	}
	ok, err := s.bucket.Exists(ctx, s.key(sha))
	if err != nil {
		return false, fmt.Errorf("looking for stored file %s: %w", sha, err)
	}
	return ok, nil
}

// Attributes are what the store keeps about an object besides its bytes.
type Attributes struct {
	Size        int64
	ContentType string
	// Name is the original file name it was first put under.
	Name string
}

// Attributes reads the attributes of the object with digest sha.
func (s *Store) Attributes(ctx context.Context, sha string) (Attributes, error) {
	if err := checkDigest(sha); err != nil {
		return Attributes{}, err
	}
	a, err := s.bucket.Attributes(ctx, s.key(sha))
	if err != nil {
		return Attributes{}, fmt.Errorf("reading stored file %s: %w", sha, err)
	}
	return Attributes{Size: a.Size, ContentType: a.ContentType, Name: a.Metadata[MetadataName]}, nil
}

// Open reads the object with digest sha. Close the reader when done.
func (s *Store) Open(ctx context.Context, sha string) (io.ReadCloser, error) {
	if err := checkDigest(sha); err != nil {
		return nil, err
	}
	r, err := s.bucket.NewReader(ctx, s.key(sha), nil)
	if err != nil {
		return nil, fmt.Errorf("reading stored file %s: %w", sha, err)
	}
	return r, nil
}

// Delete deletes the object with digest sha; one already gone is no
// error, so that a forget can be retried. Whether another submission
// still names the same bytes is the caller's to decide first.
func (s *Store) Delete(ctx context.Context, sha string) error {
	if err := checkDigest(sha); err != nil {
		return err
	}
	if err := s.bucket.Delete(ctx, s.key(sha)); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("deleting stored file %s: %w", sha, err)
	}
	return nil
}

// Sweep deletes what interrupted Puts left behind, last modified more
// than olderThan ago: tmp/ objects, and in a file:// store the driver's
// own temporary files (*.tmp) beside the objects. olderThan must exceed
// the longest Put (an hour is ample), or a Put in progress loses its
// upload and fails. It returns how many it deleted.
func (s *Store) Sweep(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := s.now().Add(-olderThan)
	deleted := 0
	sweep := func(prefix string, stray func(key string) bool) error {
		it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("sweeping the file store: listing %s: %w", prefix, err)
			}
			if o.IsDir || !stray(o.Key) || !o.ModTime.Before(cutoff) {
				continue
			}
			if err := s.bucket.Delete(ctx, o.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return fmt.Errorf("sweeping the file store: deleting %s: %w", o.Key, err)
			}
			deleted++
		}
	}
	err := sweep(s.prefix+tmpDir, func(string) bool { return true })
	if err == nil && s.local {
		err = sweep(s.prefix+objectDir, func(key string) bool { return checkDigest(strings.TrimPrefix(key, s.prefix+objectDir)) != nil })
	}
	return deleted, err
}
