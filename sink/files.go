package sink

import (
	"context"
	"time"
)

// FilesTable is the table beside submissions where a FileKeeper keeps
// where each file of a stored submission stands in the user's files store.
const FilesTable = "submission_file_copies"

// Why a file is not in the files store (FileCopy.Reason).
const (
	// FileExpired: the service answered 404 or 410, as it does once it
	// has deleted an upload (30 days after it). Final.
	FileExpired = "expired"
	// FileTooLarge: larger than the fetcher's size cap. Final.
	FileTooLarge = "too_large"
	// FileRefused: the URL's scheme or address is not one formsync
	// fetches from (nothing was sent). Final.
	FileRefused = "refused"
	// FileDropped: a field policy rule drops the file's input, so it is
	// never fetched. Final while that rule stands.
	FileDropped = "dropped"
	// FileFailed: the fetch failed after its retries (the network, 429,
	// 5xx, another status). The next sync tries again.
	FileFailed = "failed"
)

// FileCopy is where one file of a stored submission stands: stored in the
// files store (SHA256, ObjectURI, Size, ContentType and StoredAt set,
// Reason empty), or not, and why (Reason). A file is named by the URL the
// submission's files give it; (FormID, SubmissionKey, URL) is a copy's
// key.
//
// In FilesTable a zero string or time is NULL, and size is NULL when
// SHA256 is empty (nothing stored), so that an empty file stored reads
// size 0 and a file not stored reads NULL.
type FileCopy struct {
	FormID        string
	SubmissionKey string
	URL           string
	// SHA256 is the hex SHA-256 of the bytes stored; ObjectURI the
	// object's gs:// or file:// URI; Size the bytes stored (which may
	// differ from the size the submission's entry declares); ContentType
	// as the service sent it.
	SHA256      string
	ObjectURI   string
	Size        int64
	ContentType string
	// StoredAt is when the object was stored (or found stored already);
	// zero when it is not.
	StoredAt time.Time
	// Reason is why the file is not stored (FileExpired, FileTooLarge,
	// FileRefused, FileDropped, FileFailed); "" when it is.
	Reason string
	// RecordedAt is when this record was written, in UTC to the
	// microsecond; the sink's clock when zero.
	RecordedAt time.Time
}

// Stored reports whether the copy names an object in the files store.
func (c FileCopy) Stored() bool { return c.Reason == "" && c.SHA256 != "" }

// Final reports whether the copy needs no further fetch: stored, or not
// stored for a reason a retry does not change.
func (c FileCopy) Final() bool { return c.Stored() || (c.Reason != "" && c.Reason != FileFailed) }

// FileRow is a stored submission whose files name at least one file, with
// the copies recorded for it.
type FileRow struct {
	FormID        string
	SubmissionKey string
	CreatedAt     time.Time
	// Deleted is true for a row marked deleted upstream.
	Deleted bool
	// Files is the row's files JSON as stored (sink.Row.Files).
	Files string
	// Copies are the row's recorded copies, by URL order.
	Copies []FileCopy
}

// FileKeeper is a sink that keeps where each file of its stored rows
// stands in the user's files store, in FilesTable, and shows it in the
// submission_files view. Every sink formsync ships is one.
//
// A copy belongs to its row: a commit's Forget removes the copies of the
// rows it removes, and Remove with Rows removes the form's copies.
type FileKeeper interface {
	// FileRows returns the stored rows of the given forms (every form when
	// formIDs is empty) created at or after since (every row when since
	// is zero) whose files are not empty ([] or {}), deleted ones
	// included, ordered by form, created_at and submission key, each with
	// its recorded copies. since lets a sink read only the newest
	// partitions of a table partitioned by created_at.
	FileRows(ctx context.Context, formIDs []string, since time.Time) ([]FileRow, error)
	// RecordFiles writes copies, replacing a copy with the same key. A
	// copy whose row is not stored (forgotten or removed meanwhile) is
	// not written: no copy outlives its row.
	RecordFiles(ctx context.Context, copies []FileCopy) error
	// NamedDigests returns which of digests a stored copy names, in any
	// form: an object another submission still names is kept by forget.
	NamedDigests(ctx context.Context, digests []string) (map[string]bool, error)
}

// FileKeeper returns the sink as a FileKeeper.
func (o Optional) FileKeeper() (FileKeeper, error) {
	if k, ok := o.Sink.(FileKeeper); ok {
		return k, nil
	}
	return nil, o.unsupported("keeps no file copies")
}
