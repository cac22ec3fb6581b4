package bigquery

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
)

// fileRow is submission n of form with the given files JSON, its id n.
func (b *bundle) fileRow(t *testing.T, form string, n int, files string) sink.Row {
	t.Helper()
	id := int64(n)
	r, err := sink.NewRow(form, &id, b.t0.Add(time.Duration(n)*time.Second).Truncate(time.Millisecond), false, json.RawMessage(`{}`), json.RawMessage(files))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stored is a copy of url of row r stored as digest.
func stored(r sink.Row, url, digest string, at time.Time) sink.FileCopy {
	return sink.FileCopy{
		FormID: r.FormID, SubmissionKey: r.SubmissionKey, URL: url,
		SHA256: digest, ObjectURI: "gs://bucket/" + digest, Size: int64(len(digest)), ContentType: "application/pdf",
		StoredAt: at, RecordedAt: at,
	}
}

// notStored is a copy of url of row r not stored, for reason.
func notStored(r sink.Row, url, reason string, at time.Time) sink.FileCopy {
	return sink.FileCopy{FormID: r.FormID, SubmissionKey: r.SubmissionKey, URL: url, Reason: reason, RecordedAt: at}
}

func fileRows(t *testing.T, s *Sink, forms ...string) []sink.FileRow {
	t.Helper()
	rows, err := s.FileRows(t.Context(), forms, time.Time{})
	if err != nil {
		t.Fatalf("FileRows: %v", err)
	}
	return rows
}

func namedDigests(t *testing.T, s *Sink, digests ...string) map[string]bool {
	t.Helper()
	named, err := s.NamedDigests(t.Context(), digests)
	if err != nil {
		t.Fatalf("NamedDigests: %v", err)
	}
	return named
}

func recordFiles(t *testing.T, s *Sink, copies ...sink.FileCopy) {
	t.Helper()
	if err := s.RecordFiles(t.Context(), copies); err != nil {
		t.Fatalf("RecordFiles: %v", err)
	}
}

// copyRecords reads submission_file_copies whole: every record appended,
// as "form|key|url|sha256|reason".
func copyRecords(t *testing.T, b *bundle) []string {
	t.Helper()
	it, err := b.sink.query("SELECT * FROM " + b.sink.t.Copies).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		row := map[string]bq.Value{}
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join([]string{vString(row["form_id"]), vString(row["submission_key"]), vString(row["url"]), vString(row["sha256"]), vString(row["reason"])}, "|"))
	}
	slices.Sort(out)
	return out
}

// TestFileRowsAndCopies: FileRows returns the stored rows whose files are
// not empty ([], {}, null), deleted ones included, by form, created_at and
// key, each with its copies by URL as they stand (a later record of a key
// replacing the earlier); copies of rows not stored are dropped, and do
// not attach to the row when it comes; NamedDigests names the digests
// copies of stored rows name; RecordFiles is one query and one load job,
// no DML.
func TestFileRowsAndCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	f := []sink.Row{
		b.fileRow(t, "f", 1, `[{"name":"a.pdf","url":"https://x/a"},{"name":"b.pdf","url":"https://x/b"}]`),
		b.fileRow(t, "f", 2, `[]`),
		b.fileRow(t, "f", 3, `{}`),
		b.fileRow(t, "f", 4, `{"cv":{"name":"cv.pdf","url":"https://x/cv"}}`),
		b.fileRow(t, "f", 5, `null`),
		b.fileRow(t, "f", 6, `[{"name":"gone.pdf","url":"https://x/gone"}]`),
	}
	g := []sink.Row{b.fileRow(t, "g", 1, `[{"name":"g.pdf","url":"https://x/g"}]`)}
	b.mustCommit(t, at, formRows{formState("f", f), f}, formRows{formState("g", g), g})
	// A reconcile that no longer finds submission 6 marks it deleted.
	st := readState(t, b.sink, "f")["f"]
	if _, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: at.Add(time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, f[:5]...), Reconcile: true}}}); err != nil {
		t.Fatal(err)
	}

	if got := fileRows(t, b.sink); len(got) != 4 || got[0].Copies != nil {
		t.Fatalf("FileRows before any copy: %+v", got)
	}
	b.fake.ResetStats()
	later := at.Add(2 * time.Hour)
	missing := sink.Row{FormID: "f", SubmissionKey: "99"}
	recordFiles(t, b.sink,
		stored(f[0], "https://x/b", "bbbb", at),
		notStored(f[0], "https://x/a", sink.FileFailed, at),
		stored(f[3], "https://x/cv", "cccc", at),
		notStored(f[5], "https://x/gone", sink.FileExpired, at),
		stored(g[0], "https://x/g", "cccc", at),
		stored(missing, "https://x/99", "9999", at),
	)
	if st := b.fake.Stats(); st.LoadJobs != 1 || st.QueryJobs != 1 || len(st.DML) != 0 || len(st.DDL) != 0 {
		t.Errorf("RecordFiles ran %d load jobs, %d queries, DML %v, DDL %v; want one load, one query, nothing else", st.LoadJobs, st.QueryJobs, st.DML, st.DDL)
	}
	// The failed fetch is tried again and succeeds: its record replaces
	// the first; a zero RecordedAt is the sink's clock.
	again := stored(f[0], "https://x/a", "aaaa", later)
	again.RecordedAt = time.Time{}
	recordFiles(t, b.sink, again)

	// The row the dropped copy named comes now: it has no copy.
	late := b.fileRow(t, "f", 99, `[{"name":"99.pdf","url":"https://x/99"}]`)
	st = readState(t, b.sink, "f")["f"]
	if _, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: at.Add(3 * time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, late)}}}); err != nil {
		t.Fatal(err)
	}

	got := fileRows(t, b.sink)
	for i := range got {
		for j := range got[i].Copies {
			c := &got[i].Copies[j]
			if c.URL == "https://x/a" {
				if c.RecordedAt.IsZero() || !c.RecordedAt.After(at) {
					t.Errorf("copy recorded with a zero RecordedAt reads %v, want the sink's clock", c.RecordedAt)
				}
				c.RecordedAt = later
			}
		}
	}
	want := []sink.FileRow{
		{FormID: "f", SubmissionKey: "1", CreatedAt: f[0].CreatedAt, Files: f[0].Files, Copies: []sink.FileCopy{
			stored(f[0], "https://x/a", "aaaa", later), stored(f[0], "https://x/b", "bbbb", at),
		}},
		{FormID: "f", SubmissionKey: "4", CreatedAt: f[3].CreatedAt, Files: f[3].Files, Copies: []sink.FileCopy{stored(f[3], "https://x/cv", "cccc", at)}},
		{FormID: "f", SubmissionKey: "6", CreatedAt: f[5].CreatedAt, Deleted: true, Files: f[5].Files, Copies: []sink.FileCopy{notStored(f[5], "https://x/gone", sink.FileExpired, at)}},
		{FormID: "f", SubmissionKey: "99", CreatedAt: late.CreatedAt, Files: late.Files},
		{FormID: "g", SubmissionKey: "1", CreatedAt: g[0].CreatedAt, Files: g[0].Files, Copies: []sink.FileCopy{stored(g[0], "https://x/g", "cccc", at)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FileRows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[4:], fileRows(t, b.sink, "g")); diff != "" {
		t.Errorf("FileRows(g) (-want +got):\n%s", diff)
	}
	if got := fileRows(t, b.sink, "nobody"); len(got) != 0 {
		t.Errorf("FileRows of a form without rows: %+v", got)
	}
	if diff := cmp.Diff(map[string]bool{"aaaa": true, "cccc": true}, namedDigests(t, b.sink, "aaaa", "cccc", "9999", "zzzz")); diff != "" {
		t.Errorf("NamedDigests (-want +got):\n%s", diff)
	}
	if got := namedDigests(t, b.sink); len(got) != 0 {
		t.Errorf("NamedDigests of nothing: %v", got)
	}
	if err := b.sink.RecordFiles(t.Context(), []sink.FileCopy{{FormID: "f", SubmissionKey: "1"}}); err == nil {
		t.Error("RecordFiles took a copy without a URL")
	}
}

// TestFilesViewShowsCopies: submission_files gains, after its columns and
// in this order, object_uri, sha256, stored_size, content_type, stored_at
// and not_stored_reason, from the copy of each file as it stands; NULLs
// for a file with no copy recorded (pending).
func TestFilesViewShowsCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	rows := []sink.Row{
		b.fileRow(t, "f", 1, `[{"name":"a.pdf","url":"https://x/a"},{"name":"b.pdf","url":"https://x/b"},{"name":"c.pdf","url":"https://x/c"}]`),
	}
	b.mustCommit(t, at, formRows{formState("f", rows), rows})
	recordFiles(t, b.sink, notStored(rows[0], "https://x/a", sink.FileFailed, at), notStored(rows[0], "https://x/b", sink.FileTooLarge, at))
	recordFiles(t, b.sink, stored(rows[0], "https://x/a", "aaaa", at.Add(time.Minute)))

	it, err := b.sink.query("SELECT * FROM " + ref(b.cfg.Project, b.cfg.Dataset, filesView)).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got [][]bq.Value
	for {
		var row []bq.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, row[5:])
	}
	var cols []string
	for _, f := range it.Schema {
		cols = append(cols, f.Name+" "+string(f.Type))
	}
	if diff := cmp.Diff([]string{
		"form_id STRING", "submission_key STRING", "submission_id INTEGER", "input STRING", "position INTEGER",
		"name STRING", "url STRING", "size INTEGER", "type STRING",
		"object_uri STRING", "sha256 STRING", "stored_size INTEGER", "content_type STRING", "stored_at TIMESTAMP", "not_stored_reason STRING",
	}, cols); diff != "" {
		t.Errorf("%s columns (-want +got):\n%s", filesView, diff)
	}
	slices.SortFunc(got, func(x, y []bq.Value) int { return strings.Compare(vString(x[1]), vString(y[1])) })
	storedAt := at.Add(time.Minute)
	want := [][]bq.Value{
		{"a.pdf", "https://x/a", nil, nil, "gs://bucket/aaaa", "aaaa", int64(4), "application/pdf", storedAt, nil},
		{"b.pdf", "https://x/b", nil, nil, nil, nil, nil, nil, nil, sink.FileTooLarge},
		{"c.pdf", "https://x/c", nil, nil, nil, nil, nil, nil, nil, nil},
	}
	if diff := cmp.Diff(want, got, cmp.Transformer("utc", func(t time.Time) time.Time { return t.UTC() })); diff != "" {
		t.Errorf("%s (-want +got):\n%s", filesView, diff)
	}
}

// forget commits form's state forgetting the rows of keys.
func (b *bundle) forget(t *testing.T, s *Sink, at time.Time, form string, rows ...sink.Row) error {
	t.Helper()
	st := readState(t, s, form)[form]
	fg := st.Forgotten
	if fg == nil {
		var err error
		if fg, err = state.NewForgotten(); err != nil {
			t.Fatal(err)
		}
	}
	fc := sink.FormCommit{State: st}
	for _, r := range rows {
		fc.Forget = append(fc.Forget, r.SubmissionKey)
		fg = fg.With(1, r.SubmissionKey, r.ContentKey)
	}
	fc.State.Forgotten = fg
	_, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: at, Forms: []sink.FormCommit{fc}})
	return err
}

// TestForgetDeletesFileCopies: a commit that forgets rows deletes their
// copies in its transaction; a digest another form's row names is still
// named.
func TestForgetDeletesFileCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	f := []sink.Row{
		b.fileRow(t, "f", 1, `[{"name":"a.pdf","url":"https://x/a"}]`),
		b.fileRow(t, "f", 2, `[{"name":"b.pdf","url":"https://x/b"}]`),
	}
	g := []sink.Row{b.fileRow(t, "g", 1, `[{"name":"b.pdf","url":"https://x/b"}]`)}
	b.mustCommit(t, at, formRows{formState("f", f), f}, formRows{formState("g", g), g})
	recordFiles(t, b.sink, stored(f[0], "https://x/a", "aaaa", at), stored(f[1], "https://x/b", "bbbb", at), stored(g[0], "https://x/b", "bbbb", at))

	if err := b.forget(t, b.sink, at.Add(time.Hour), "f", f...); err != nil {
		t.Fatalf("forget: %v", err)
	}
	if diff := cmp.Diff([]string{"g|1|https://x/b|bbbb|"}, copyRecords(t, b)); diff != "" {
		t.Errorf("records after the forget (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"bbbb": true}, namedDigests(t, b.sink, "aaaa", "bbbb")); diff != "" {
		t.Errorf("NamedDigests (-want +got):\n%s", diff)
	}
	if got := fileRows(t, b.sink, "f"); len(got) != 0 {
		t.Errorf("FileRows of the forgotten rows: %+v", got)
	}
}

// TestRemoveRowsDeletesFileCopies: Remove with Rows deletes the form's
// copies; without Rows they stay with the rows.
func TestRemoveRowsDeletesFileCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	f := []sink.Row{b.fileRow(t, "f", 1, `[{"name":"a.pdf","url":"https://x/a"}]`)}
	g := []sink.Row{b.fileRow(t, "g", 1, `[{"name":"b.pdf","url":"https://x/b"}]`)}
	b.mustCommit(t, at, formRows{formState("f", f), f}, formRows{formState("g", g), g})
	recordFiles(t, b.sink, stored(f[0], "https://x/a", "aaaa", at), stored(g[0], "https://x/b", "bbbb", at))

	rev := readState(t, b.sink, "g")["g"].Revision
	if _, err := b.sink.Remove(t.Context(), sink.Removal{FormID: "g", Revision: rev}); err != nil {
		t.Fatal(err)
	}
	if got := len(copyRecords(t, b)); got != 2 {
		t.Errorf("Remove without rows left %d records, want 2", got)
	}
	rev = readState(t, b.sink, "f")["f"].Revision
	if _, err := b.sink.Remove(t.Context(), sink.Removal{FormID: "f", Revision: rev, Rows: true}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"g|1|https://x/b|bbbb|"}, copyRecords(t, b)); diff != "" {
		t.Errorf("records after removing f with its rows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"bbbb": true}, namedDigests(t, b.sink, "aaaa", "bbbb")); diff != "" {
		t.Errorf("NamedDigests (-want +got):\n%s", diff)
	}
}

// TestRecordFilesMeetsForget: a forget that commits between RecordFiles'
// check of the rows and its load leaves a record of a row that is gone
// (appended here by hand, as that load appends it); no reader sees it
// (FileRows, NamedDigests, submission_files), the row of another key
// keeps its copy, and the Purge after the forget deletes the record.
func TestRecordFilesMeetsForget(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	f := []sink.Row{
		b.fileRow(t, "f", 1, `[{"name":"a.pdf","url":"https://x/a"}]`),
		b.fileRow(t, "f", 2, `[{"name":"b.pdf","url":"https://x/b"}]`),
	}
	b.mustCommit(t, at, formRows{formState("f", f), f})
	recordFiles(t, b.sink, stored(f[1], "https://x/b", "bbbb", at))
	if err := b.forget(t, b.sink, at.Add(time.Hour), "f", f[0]); err != nil {
		t.Fatalf("forget: %v", err)
	}
	if _, err := b.fake.EditByHand(`INSERT INTO "`+b.cfg.Project+`.`+b.cfg.Dataset+`.`+sink.FilesTable+`"
		(form_id, submission_key, url, sha256, object_uri, size, stored_at, recorded_at) VALUES ('f', ?, 'https://x/a', 'aaaa', 'gs://bucket/aaaa', 4, ?, ?)`,
		f[0].SubmissionKey, at.UnixMicro(), at.Add(2*time.Hour).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if got := copyRecords(t, b); len(got) != 2 {
		t.Fatalf("records: %q, want both", got)
	}
	if diff := cmp.Diff([]sink.FileRow{
		{FormID: "f", SubmissionKey: "2", CreatedAt: f[1].CreatedAt, Files: f[1].Files, Copies: []sink.FileCopy{stored(f[1], "https://x/b", "bbbb", at)}},
	}, fileRows(t, b.sink)); diff != "" {
		t.Errorf("FileRows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"bbbb": true}, namedDigests(t, b.sink, "aaaa", "bbbb")); diff != "" {
		t.Errorf("NamedDigests (-want +got):\n%s", diff)
	}
	var urls []string
	for _, r := range readFiles(t, b) {
		urls = append(urls, vString(r["url"])+" "+vString(r["sha256"]))
	}
	if diff := cmp.Diff([]string{"https://x/b bbbb"}, urls); diff != "" {
		t.Errorf("%s (-want +got):\n%s", filesView, diff)
	}
	// The purge after the forget deletes the record.
	if err := b.sink.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"f|2|https://x/b|bbbb|"}, copyRecords(t, b)); diff != "" {
		t.Errorf("records after Purge (-want +got):\n%s", diff)
	}
}

// TestRecordFilesConcurrentWithForget: RecordFiles and a forget of one of
// its rows run at once, from two processes, many times; whatever their
// order, the forgotten row's copy is seen by no reader and the other
// row's is.
func TestRecordFilesConcurrentWithForget(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	other := b.second(t)
	for i := range 4 {
		form := "f" + string(rune('a'+i))
		at := b.t0.Add(time.Duration(i+1) * time.Hour)
		f := []sink.Row{
			b.fileRow(t, form, 1, `[{"name":"a.pdf","url":"https://x/a"}]`),
			b.fileRow(t, form, 2, `[{"name":"b.pdf","url":"https://x/b"}]`),
		}
		b.mustCommit(t, at, formRows{formState(form, f), f})
		gone, kept := form+"-gone", form+"-kept"
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := b.sink.RecordFiles(t.Context(), []sink.FileCopy{stored(f[0], "https://x/a", gone, at), stored(f[1], "https://x/b", kept, at)}); err != nil {
				t.Errorf("RecordFiles: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := b.forget(t, other, at.Add(time.Minute), form, f[0]); err != nil {
				t.Errorf("forget: %v", err)
			}
		}()
		wg.Wait()
		rows := fileRows(t, b.sink, form)
		if len(rows) != 1 || rows[0].SubmissionKey != "2" || len(rows[0].Copies) != 1 || rows[0].Copies[0].SHA256 != kept {
			t.Errorf("%s: FileRows %+v, want row 2 with its copy alone", form, rows)
		}
		if diff := cmp.Diff(map[string]bool{kept: true}, namedDigests(t, b.sink, gone, kept)); diff != "" {
			t.Errorf("%s: NamedDigests (-want +got):\n%s", form, diff)
		}
	}
}

// TestRekeyedRowsCopiesPending: a row stored under its content key (the
// older response form) and then met with its id is re-keyed; its copies
// stay under the old key, read by nobody, and its files read pending
// (the worker records them again, finding each object stored).
func TestRekeyedRowsCopiesPending(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	created := b.t0.Truncate(time.Millisecond)
	files := json.RawMessage(`[{"name":"a.pdf","url":"https://x/a"}]`)
	old, err := sink.NewRow("f", nil, created, false, json.RawMessage(`{}`), files)
	if err != nil {
		t.Fatal(err)
	}
	b.mustCommit(t, at, formRows{formState("f", []sink.Row{old}), []sink.Row{old}})
	recordFiles(t, b.sink, stored(old, "https://x/a", "aaaa", at))
	id := int64(7)
	withID, err := sink.NewRow("f", &id, created, false, json.RawMessage(`{}`), files)
	if err != nil {
		t.Fatal(err)
	}
	b.mustCommit(t, at.Add(time.Hour), formRows{formState("f", []sink.Row{withID}), []sink.Row{withID}})
	if diff := cmp.Diff([]sink.FileRow{{FormID: "f", SubmissionKey: "7", CreatedAt: created, Files: withID.Files}}, fileRows(t, b.sink)); diff != "" {
		t.Errorf("FileRows after the re-key (-want +got):\n%s", diff)
	}
	if got := namedDigests(t, b.sink, "aaaa"); len(got) != 0 {
		t.Errorf("NamedDigests names the old key's copy: %v", got)
	}
}

// TestRecordFilesLoadLostAttaches: the load's upload is answered with a
// 503 after the job was made; the retry with the same id gets 409 and
// attaches: the copies are appended once.
func TestRecordFilesLoadLostAttaches(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	f := []sink.Row{b.fileRow(t, "f", 1, `[{"name":"a.pdf","url":"https://x/a"}]`)}
	b.mustCommit(t, at, formRows{formState("f", f), f})
	b.fake.ResetStats()
	b.fake.FailNext(bqfake.OpUploadLost, 503, "backendError")
	recordFiles(t, b.sink, stored(f[0], "https://x/a", "aaaa", at))
	if got := copyRecords(t, b); len(got) != 1 {
		t.Errorf("records: %q, want one", got)
	}
	if n := b.fake.Stats().LoadJobs; n != 1 {
		t.Errorf("%d load jobs, want 1", n)
	}
}

// TestFileCopiesCost: RecordFiles bills its check alone (the key columns
// of submissions: its load is free), however many records the copies
// table holds; it runs no DML. The figures of each reader are logged.
func TestFileCopiesCost(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	var forms []formRows
	var copies [][]sink.FileCopy
	for _, form := range []string{"f", "g"} {
		var rows []sink.Row
		for n := range 100 {
			rows = append(rows, b.fileRow(t, form, n+1, `[{"name":"a.pdf","url":"https://files.example.com/`+form+`/a.pdf"}]`))
		}
		forms = append(forms, formRows{formState(form, rows), rows})
		var cs []sink.FileCopy
		for _, r := range rows {
			cs = append(cs, stored(r, "https://files.example.com/"+form+"/a.pdf", strings.Repeat("ab", 32), at))
		}
		copies = append(copies, cs)
	}
	b.mustCommit(t, at, forms...)
	billed := func(what string, fn func()) int64 {
		before := b.fake.Stats()
		fn()
		after := b.fake.Stats()
		if len(after.DML) != len(before.DML) {
			t.Errorf("%s ran DML: %v", what, after.DML)
		}
		n := after.BytesProcessed - before.BytesProcessed
		t.Logf("%s: %d bytes processed, %d load jobs", what, n, after.LoadJobs-before.LoadJobs)
		return n
	}
	first := billed("RecordFiles of 100 copies, copies table empty", func() { recordFiles(t, b.sink, copies[0]...) })
	second := billed("RecordFiles of 100 copies, copies table holding 100", func() { recordFiles(t, b.sink, copies[1]...) })
	if first != second || first == 0 {
		t.Errorf("RecordFiles processed %d bytes, then %d with more records stored; want the same, its check's", first, second)
	}
	billed("FileRows of one form", func() { fileRows(t, b.sink, "f") })
	billed("FileRows of every form", func() { fileRows(t, b.sink) })
	billed("NamedDigests", func() { namedDigests(t, b.sink, strings.Repeat("ab", 32)) })
}

// TestReadOnlyWithoutFileCopies: a read-only Sink on a dataset no sync
// of this formsync has written since submission_file_copies came (the
// table is missing) reads every file pending and names no digest, as
// `formsync status` needs right after an upgrade; the next Open makes the
// table.
func TestReadOnlyWithoutFileCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	at := b.t0.Add(time.Hour)
	f := []sink.Row{b.fileRow(t, "f", 1, `[{"name":"a.pdf","url":"https://x/a"}]`)}
	b.mustCommit(t, at, formRows{formState("f", f), f})
	recordFiles(t, b.sink, stored(f[0], "https://x/a", "aaaa", at))
	if err := b.sink.dataset().Table(sink.FilesTable).Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(t.Context(), b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	if diff := cmp.Diff([]sink.FileRow{{FormID: "f", SubmissionKey: "1", CreatedAt: f[0].CreatedAt, Files: f[0].Files}}, fileRows(t, ro)); diff != "" {
		t.Errorf("FileRows without the copies table (-want +got):\n%s", diff)
	}
	if got := namedDigests(t, ro, "aaaa"); len(got) != 0 {
		t.Errorf("NamedDigests without the copies table: %v", got)
	}
	if got := b.fake.Stats().DDL[b.cfg.Dataset+"."+sink.FilesTable]; got != 1 {
		t.Fatalf("copies table made %d times before, want 1", got)
	}
	s := b.second(t)
	if got := b.fake.Stats().DDL[b.cfg.Dataset+"."+sink.FilesTable]; got != 2 {
		t.Errorf("Open of a dataset without the copies table made it %d times in all, want 2", got)
	}
	recordFiles(t, s, stored(f[0], "https://x/a", "aaaa", at))
	if diff := cmp.Diff(map[string]bool{"aaaa": true}, namedDigests(t, s, "aaaa")); diff != "" {
		t.Errorf("NamedDigests after Open made the table (-want +got):\n%s", diff)
	}
}
