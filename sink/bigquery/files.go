package bigquery

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/sink"
)

var _ sink.FileKeeper = (*Sink)(nil)

// submission_file_copies is append-only: RecordFiles appends its copies
// with one load job (free, and no DML quota or 10 MB minimum per call),
// and a record replaces an earlier one of its key (form_id,
// submission_key, url) by being newer: every reader (FileRows,
// NamedDigests, the submission_files view) takes the newest record of
// each key by recorded_at (latestCopies), and only those of rows stored in
// submissions (a join on the row's key). A MERGE per call would bill
// three tables' 10 MB minimum each time, count against the two running
// MERGEs a table takes, and conflict with every commit that forgets.
//
// A copy belongs to its row: a commit that forgets rows deletes their
// copies in its transaction, and Remove with Rows deletes the form's. A
// record appended for a row that was forgotten between RecordFiles'
// check and its load is read by nobody (its row is gone), and the Purge
// that follows the forget deletes it. A row re-keyed
// from its content key to its id leaves its copies under the old key,
// read by nobody either: the worker finds the new key's files pending and
// records them again, finding each object stored already (the store is
// content-addressed).

// fileCopiesDescription is submission_file_copies' description.
const fileCopiesDescription = "formsync: where each file of a stored submission stands in the files store, one record per recording; the newest record of a (form_id, submission_key, url) is the one that holds"

// fileCopiesSchema is submission_file_copies' (sink.FilesTable).
func fileCopiesSchema() bq.Schema {
	return bq.Schema{
		{Name: "form_id", Type: bq.StringFieldType, Required: true},
		{Name: "submission_key", Type: bq.StringFieldType, Required: true},
		{Name: "url", Type: bq.StringFieldType, Required: true, Description: "the file's URL as the submission's files give it"},
		{Name: "sha256", Type: bq.StringFieldType, Description: "hex SHA-256 of the bytes stored; NULL when not stored"},
		{Name: "object_uri", Type: bq.StringFieldType, Description: "the object in the files store (gs:// or file://); NULL when not stored"},
		{Name: "size", Type: bq.IntegerFieldType, Description: "bytes stored; NULL when not stored"},
		{Name: "content_type", Type: bq.StringFieldType, Description: "as the form service sent it"},
		{Name: "stored_at", Type: bq.TimestampFieldType, Description: "when the object was stored, or found stored already"},
		{Name: "reason", Type: bq.StringFieldType, Description: "why the file is not stored (expired, too_large, refused, dropped, failed); NULL when it is"},
		{Name: "recorded_at", Type: bq.TimestampFieldType, Required: true, Description: "when this record was written; the newest of a key holds"},
	}
}

// latestCopies is a subquery of the newest record of each copy key of
// the table copies, among those where says: the copies as they stand. Two
// records of one key recorded at the same microsecond (RecordFiles keeps
// one of a key per call) are ordered by their values, so every reader
// takes the same one.
func latestCopies(copies, where string) string {
	return `(
  SELECT form_id, submission_key, url, sha256, object_uri, size, content_type, stored_at, reason, recorded_at
  FROM ` + copies + `
  WHERE ` + where + `
  QUALIFY ROW_NUMBER() OVER (PARTITION BY form_id, submission_key, url ORDER BY recorded_at DESC, sha256 DESC, reason DESC) = 1
)`
}

// copiesRead is what FileRows reads from: WithoutCopies for a dataset
// whose submission_file_copies a sync of this formsync has not made yet,
// read by a read-only Sink (OpenReadOnly): every file reads pending.
type copiesRead struct {
	tables
	WithoutCopies bool
}

// copyRecord is one line of RecordFiles' load: NULL (nil) for what the
// copy does not have.
type copyRecord struct {
	FormID        string  `json:"form_id"`
	SubmissionKey string  `json:"submission_key"`
	URL           string  `json:"url"`
	SHA256        *string `json:"sha256"`
	ObjectURI     *string `json:"object_uri"`
	Size          *int64  `json:"size"`
	ContentType   *string `json:"content_type"`
	StoredAt      *string `json:"stored_at"`
	Reason        *string `json:"reason"`
	RecordedAt    string  `json:"recorded_at"`
}

const loadTime = "2006-01-02T15:04:05.000000Z"

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newCopyRecord(c sink.FileCopy) copyRecord {
	r := copyRecord{
		FormID: c.FormID, SubmissionKey: c.SubmissionKey, URL: c.URL,
		SHA256: nullString(c.SHA256), ObjectURI: nullString(c.ObjectURI),
		ContentType: nullString(c.ContentType), Reason: nullString(c.Reason),
		RecordedAt: c.RecordedAt.UTC().Format(loadTime),
	}
	if c.SHA256 != "" { // an empty file stored is 0, a file not stored NULL

		size := c.Size
		r.Size = &size
	}
	if !c.StoredAt.IsZero() {
		at := c.StoredAt.UTC().Truncate(time.Microsecond).Format(loadTime)
		r.StoredAt = &at
	}
	return r
}

// RecordFiles appends copies to submission_file_copies with one load job,
// the newest record of a key replacing the others (see latestCopies). It
// first reads which of the copies' rows are stored (one query, over the
// key columns of their forms' rows), and drops the copies of the others:
// no copy outlives its row, and a copy recorded for a row not yet stored
// does not attach to it when it comes. Of several copies of one key, the
// last is kept. A RecordedAt left zero is the sink's clock.
func (s *Sink) RecordFiles(ctx context.Context, copies []sink.FileCopy) error {
	if len(copies) == 0 {
		return nil
	}
	now := s.cfg.Now().UTC().Truncate(time.Microsecond)
	type key struct{ form, sub, url string }
	at := map[key]int{}
	var kept []sink.FileCopy
	for _, c := range copies {
		if c.FormID == "" || c.SubmissionKey == "" || c.URL == "" {
			return fmt.Errorf("bigquery: recording file copies: a copy without form id, submission key or URL (%q, %q, %q)", c.FormID, c.SubmissionKey, c.URL)
		}
		if c.RecordedAt.IsZero() {
			c.RecordedAt = now
		}
		c.RecordedAt = c.RecordedAt.UTC().Truncate(time.Microsecond)
		k := key{c.FormID, c.SubmissionKey, c.URL}
		if i, ok := at[k]; ok {
			kept[i] = c
			continue
		}
		at[k] = len(kept)
		kept = append(kept, c)
	}
	return s.guard(ctx, func(ctx context.Context) error {
		stored, err := s.storedRows(ctx, kept)
		if err != nil {
			return err
		}
		var body bytes.Buffer
		enc := json.NewEncoder(&body)
		enc.SetEscapeHTML(false)
		n := 0
		for _, c := range kept {
			if !stored[forgetParam{c.FormID, c.SubmissionKey}] {
				continue
			}
			if err := enc.Encode(newCopyRecord(c)); err != nil {
				return fmt.Errorf("bigquery: recording file copies: %w", err)
			}
			n++
		}
		if n == 0 {
			return nil
		}
		base, err := filesJobID(s.cfg, body.Bytes())
		if err != nil {
			return err
		}
		res := "table " + s.cfg.Project + "." + s.cfg.Dataset + "." + sink.FilesTable
		_, err = s.runJob(ctx, base+"_load", fmt.Sprintf("loading %d file copies into %s", n, res), func(id string) (*bq.Job, error) {
			src := bq.NewReaderSource(bytes.NewReader(body.Bytes()))
			src.SourceFormat = bq.JSON
			src.Schema = fileCopiesSchema()
			l := s.dataset().Table(sink.FilesTable).LoaderFrom(src)
			l.WriteDisposition = bq.WriteAppend
			l.CreateDisposition = bq.CreateNever
			// runJob sends the same id again while it is unknown whether
			// the job was made, and attaches to it on a 409: a load is
			// appended once, whatever answers are lost.
			l.JobID = id
			l.AddJobIDSuffix = false
			l.Location = s.cfg.Location
			l.JobTimeout = s.cfg.JobTimeout
			return l.Run(ctx)
		})
		return err
	})
}

// filesJobID names one RecordFiles' jobs: a digest of what it loads and a
// random part (as commitID), so that a 409 on one of its ids always
// answers a job it made.
func filesJobID(cfg Config, body []byte) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", cfg.Project, cfg.Dataset)
	h.Write(body)
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("bigquery: recording file copies: job id: %w", err)
	}
	return "formsync_files_" + hex.EncodeToString(h.Sum(nil)[:6]) + hex.EncodeToString(nonce[:]), nil
}

// storedRows reads which rows of copies are stored in submissions.
func (s *Sink) storedRows(ctx context.Context, copies []sink.FileCopy) (map[forgetParam]bool, error) {
	var rows []forgetParam
	var forms []string
	for _, c := range copies {
		r := forgetParam{c.FormID, c.SubmissionKey}
		if !slices.Contains(rows, r) {
			rows = append(rows, r)
		}
		if !slices.Contains(forms, c.FormID) {
			forms = append(forms, c.FormID)
		}
	}
	stored := map[forgetParam]bool{}
	q := s.query(render("storedRows", s.t), bq.QueryParameter{Name: "form_ids", Value: forms}, bq.QueryParameter{Name: "rows", Value: rows})
	err := s.readAll(ctx, "reading which rows of the file copies are stored", "table "+s.t.Submissions, q.Read, func() { clear(stored) }, func(v []bq.Value) error {
		if len(v) != 2 {
			return fmt.Errorf("bigquery: reading stored rows: got %d columns, want 2", len(v))
		}
		stored[forgetParam{vString(v[0]), vString(v[1])}] = true
		return nil
	})
	return stored, err
}

// FileRows returns the stored rows of the given forms (every form when
// formIDs is empty) whose files are not empty, deleted ones included,
// each with its copies as they stand: one query, over the files and key
// columns of the forms' rows and the forms' copies.
func (s *Sink) FileRows(ctx context.Context, formIDs []string, since time.Time) ([]sink.FileRow, error) {
	return guardValue(s, ctx, func(ctx context.Context) ([]sink.FileRow, error) {
		var out []sink.FileRow
		if since.IsZero() {
			since = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		q := s.query(render("fileRows", copiesRead{s.t, s.withoutFileCopies}),
			bq.QueryParameter{Name: "form_ids", Value: slices.Clone(formIDs)}, bq.QueryParameter{Name: "since", Value: since.UTC()})
		err := s.readAll(ctx, "reading the rows with files", "table "+s.t.Submissions, q.Read, func() { out = nil }, func(v []bq.Value) error {
			if len(v) != 13 {
				return fmt.Errorf("bigquery: reading the rows with files: got %d columns, want 13", len(v))
			}
			form, key := vString(v[0]), vString(v[1])
			if n := len(out); n == 0 || out[n-1].FormID != form || out[n-1].SubmissionKey != key {
				files, err := canonicalJSON(vString(v[4]))
				if err != nil {
					return fmt.Errorf("bigquery: reading the rows with files: form %s, submission %s: files: %w", form, key, err)
				}
				deleted, _ := v[3].(bool)
				out = append(out, sink.FileRow{FormID: form, SubmissionKey: key, CreatedAt: vTime(v[2]), Deleted: deleted, Files: files})
			}
			if v[5] == nil { // no copy recorded
				return nil
			}
			r := &out[len(out)-1]
			r.Copies = append(r.Copies, sink.FileCopy{
				FormID: form, SubmissionKey: key, URL: vString(v[5]),
				SHA256: vString(v[6]), ObjectURI: vString(v[7]), Size: vInt(v[8]), ContentType: vString(v[9]),
				StoredAt: zeroIfNull(v[10]), Reason: vString(v[11]), RecordedAt: vTime(v[12]),
			})
			return nil
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	})
}

func zeroIfNull(v bq.Value) time.Time {
	if v == nil {
		return time.Time{}
	}
	return vTime(v)
}

// NamedDigests returns which of digests a copy of a stored row names, in
// any form, as the copies stand: one query, over the copies and the key
// columns of submissions.
func (s *Sink) NamedDigests(ctx context.Context, digests []string) (map[string]bool, error) {
	named := map[string]bool{}
	var want []string
	for _, d := range digests {
		if d != "" && !slices.Contains(want, d) {
			want = append(want, d)
		}
	}
	if len(want) == 0 || s.withoutFileCopies {
		return named, nil
	}
	err := s.guard(ctx, func(ctx context.Context) error {
		q := s.query(render("namedDigests", s.t), bq.QueryParameter{Name: "digests", Value: want})
		return s.readAll(ctx, "reading which stored objects copies name", "table "+s.t.Copies, q.Read, func() { clear(named) }, func(v []bq.Value) error {
			if len(v) != 1 {
				return fmt.Errorf("bigquery: reading named digests: got %d columns, want 1", len(v))
			}
			named[vString(v[0])] = true
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return named, nil
}
