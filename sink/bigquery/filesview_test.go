package bigquery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/sinktest"
)

// readFiles reads submission_files through the fake, one map per row,
// sorted by submission_key, input and position.
func readFiles(t *testing.T, b *bundle) []map[string]bq.Value {
	t.Helper()
	it, err := b.sink.query("SELECT * FROM " + ref(b.cfg.Project, b.cfg.Dataset, filesView)).Read(t.Context())
	if err != nil {
		t.Fatalf("reading %s: %v", filesView, err)
	}
	var out []map[string]bq.Value
	for {
		row := map[string]bq.Value{}
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	key := func(r map[string]bq.Value) string {
		return fmt.Sprintf("%v|%v|%09d", r["submission_key"], r["input"], r["position"])
	}
	slices.SortFunc(out, func(a, b map[string]bq.Value) int { return strings.Compare(key(a), key(b)) })
	return out
}

// TestSubmissionFiles: one row per file, whatever shape files arrived in
// (an array of files, an object of input names each holding one file or an
// array of them), rows deleted upstream left out; the view is made by
// Open, and an Open that finds it in place makes nothing.
func TestSubmissionFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	if diff := cmp.Diff(map[string]string{
		"form_id": "STRING", "submission_key": "STRING", "submission_id": "INTEGER", "input": "STRING", "position": "INTEGER",
		"name": "STRING", "url": "STRING", "size": "INTEGER", "type": "STRING",
		"object_uri": "STRING", "sha256": "STRING", "stored_size": "INTEGER", "content_type": "STRING",
		"stored_at": "TIMESTAMP", "not_stored_reason": "STRING",
	}, viewSchema(t, b, filesView)); diff != "" {
		t.Errorf("%s schema (-want +got):\n%s", filesView, diff)
	}
	row := func(form string, n int, files string) sink.Row {
		id := int64(n)
		r, err := sink.NewRow(form, &id, b.t0.Add(time.Duration(n)*time.Second).Truncate(time.Millisecond), false, json.RawMessage(`{}`), json.RawMessage(files))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rows := []sink.Row{
		row("f", 1, `[{"name":"a.pdf","url":"https://x/a","size":1200,"type":"application/pdf"},{"name":"b.png","url":"https://x/b"}]`),
		row("f", 2, `{"photo":{"name":"p.jpg","url":"https://x/p","size":"12"},"docs":[{"name":"d1","url":"https://x/d1"},{"name":"d2","url":"https://x/d2","size":1.5}],"empty":[],"none":null}`),
		row("f", 3, `{"we\"ird: input":{"name":"w","url":"https://x/w"},"name":{"name":"n","url":"https://x/n","meta":{"url":"nested"}}}`),
		row("f", 4, `[]`),
		row("f", 5, `[{"name":"gone","url":"https://x/gone"}]`),
		// Members that are neither strings nor numbers read NULL.
		row("f", 6, `[{"name":true,"url":false,"type":true,"size":true},{"name":7,"url":"https://x/7","type":{"a":"b"}}]`),
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	// A reconcile that no longer finds submission 5 marks it deleted.
	st := readState(t, b.sink, "f")["f"]
	if _, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(2 * time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, append(rows[:4:4], rows[5])...), Reconcile: true}}}); err != nil {
		t.Fatal(err)
	}
	type file struct {
		Key      string
		Input    bq.Value
		Position int64
		Name     bq.Value
		URL      bq.Value
		Size     bq.Value
		Type     bq.Value
	}
	var got []file
	for _, r := range readFiles(t, b) {
		if r["form_id"] != "f" || fmt.Sprint(r["submission_id"]) != r["submission_key"] {
			t.Errorf("row %v", r)
		}
		got = append(got, file{r["submission_key"].(string), r["input"], r["position"].(int64), r["name"], r["url"], r["size"], r["type"]})
	}
	want := []file{
		{"1", nil, 0, "a.pdf", "https://x/a", int64(1200), "application/pdf"},
		{"1", nil, 1, "b.png", "https://x/b", nil, nil},
		{"2", "docs", 0, "d1", "https://x/d1", nil, nil},
		{"2", "docs", 1, "d2", "https://x/d2", nil, nil},
		{"2", "photo", 0, "p.jpg", "https://x/p", int64(12), nil},
		{"3", "name", 0, "n", "https://x/n", nil, nil},
		{"3", `we"ird: input`, 0, "w", "https://x/w", nil, nil},
		{"6", nil, 0, nil, nil, nil, nil},
		{"6", nil, 1, "7", "https://x/7", nil, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", filesView, diff)
	}

	b.fake.ResetStats()
	b.second(t)
	if ddl := b.fake.Stats().DDL; len(ddl) != 0 {
		t.Errorf("an Open with the view in place did DDL: %v", ddl)
	}
}

// TestTableInTheFilesViewsPlace: a table of the user's under the name of
// submission_files is refused at Open, saying what to do, rather than
// replaced or failed on at every Open.
func TestTableInTheFilesViewsPlace(t *testing.T) {
	t.Parallel()
	_, cfg, _ := olderDataset(t, map[string]bq.Schema{filesView: {{Name: "note", Type: bq.StringFieldType}}})
	s, err := Open(t.Context(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open took a table in the place of submission_files")
	}
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), filesView) || !strings.Contains(err.Error(), "rename or drop it") {
		t.Errorf("Open: %v, want ErrInvalid naming %s and saying what to do", err, filesView)
	}
}

// TestFilesViewAgreesWithZetaSQL runs the submission_files view's query
// with ZetaSQL's reference implementation of GoogleSQL, on a table of the
// submissions TestSubmissionFiles stores (files as the commit parses
// them), and checks the fake's view returns the same rows.
func TestFilesViewAgreesWithZetaSQL(t *testing.T) {
	enginetest.Slow(t, "installs the ZetaSQL analyzer from npm, 354 MB, once")
	t.Parallel()
	evaluate := zetaEvaluator(t)
	b := setup(t, bqfake.Options{})
	files := []string{
		`[{"name":"a.pdf","url":"https://x/a","size":1200,"type":"application/pdf"},{"name":"b.png","url":"https://x/b"},"not a file",{"size":"7"}]`,
		`{"photo":{"name":"p.jpg","url":"https://x/p","size":"12"},"docs":[{"name":"d1","url":"https://x/d1"},{"name":"d2","url":"https://x/d2","size":1.5}],"empty":[],"none":null}`,
		`{"we\"ird: input":{"name":"w","url":"https://x/w"},"name":{"name":"n","url":"https://x/n","meta":{"url":"nested"}},"x\\":[{"name":"bs","size":-3}]}`,
		`[]`,
		`{}`,
		`[{"name":"gone","url":"https://x/gone"}]`,
	}
	var rows []sink.Row
	var table []string
	for i, f := range files {
		id := int64(i + 1)
		r, err := sink.NewRow("f", &id, b.t0.Add(time.Duration(i)*time.Second).Truncate(time.Millisecond), false, json.RawMessage(`{}`), json.RawMessage(f))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
		deleted := "NULL"
		if i == len(files)-1 {
			deleted = "TIMESTAMP '2026-01-02 00:00:00+00'"
		}
		table = append(table, fmt.Sprintf("STRUCT('f' AS form_id, %s AS submission_key, %d AS submission_id, SAFE.PARSE_JSON(%s, wide_number_mode => 'round') AS files, CAST(%s AS TIMESTAMP) AS deleted_at, TIMESTAMP '2026-01-01 00:00:00+00' AS created_at)",
			stringLiteral(r.SubmissionKey), id, stringLiteral(r.Files), deleted))
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	// Copies as RecordFiles writes them, in calls of their own: a newer
	// record replacing an older, two recorded at the same time (the
	// stored one holds), one not stored, one of the row deleted upstream.
	at := b.t0.Add(time.Hour)
	calls := [][]sink.FileCopy{
		{notStored(rows[0], "https://x/a", sink.FileFailed, at), notStored(rows[0], "https://x/b", sink.FileExpired, at),
			stored(rows[1], "https://x/p", "pppp", at), stored(rows[5], "https://x/gone", "gggg", at),
			notStored(rows[1], "https://x/d1", sink.FileFailed, at)},
		{stored(rows[0], "https://x/a", "aaaa", at.Add(time.Minute)), stored(rows[1], "https://x/d1", "dddd", at)},
	}
	var copies []sink.FileCopy
	for _, c := range calls {
		recordFiles(t, b.sink, c...)
		copies = append(copies, c...)
	}
	st := readState(t, b.sink, "f")["f"]
	if _, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(2 * time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, rows[:len(rows)-1]...), Reconcile: true}}}); err != nil {
		t.Fatal(err)
	}

	query := filesViewQuery("(SELECT * FROM UNNEST(["+strings.Join(table, ", ")+"]))", zetaCopies(copies))
	res := evaluate([]string{"(SELECT ARRAY_TO_STRING(ARRAY_AGG(TO_JSON_STRING(STRUCT(form_id, submission_key, submission_id, input, position, name, url, size, type, " +
		"object_uri, sha256, stored_size, content_type, FORMAT_TIMESTAMP('%Y-%m-%dT%H:%M:%E6SZ', stored_at, 'UTC') AS stored_at, not_stored_reason))), '\\n') FROM (" + query + "))"})[0]
	if res.Error != "" || res.Value == nil {
		t.Fatalf("ZetaSQL: %+v", res)
	}
	want := strings.Split(*res.Value, "\n")
	var got []string
	for _, r := range readFiles(t, b) {
		var line bytes.Buffer
		enc := json.NewEncoder(&line)
		enc.SetEscapeHTML(false)
		err := enc.Encode(struct {
			FormID        bq.Value `json:"form_id"`
			SubmissionKey bq.Value `json:"submission_key"`
			SubmissionID  bq.Value `json:"submission_id"`
			Input         bq.Value `json:"input"`
			Position      bq.Value `json:"position"`
			Name          bq.Value `json:"name"`
			URL           bq.Value `json:"url"`
			Size          bq.Value `json:"size"`
			Type          bq.Value `json:"type"`
			ObjectURI     bq.Value `json:"object_uri"`
			SHA256        bq.Value `json:"sha256"`
			StoredSize    bq.Value `json:"stored_size"`
			ContentType   bq.Value `json:"content_type"`
			StoredAt      bq.Value `json:"stored_at"`
			Reason        bq.Value `json:"not_stored_reason"`
		}{r["form_id"], r["submission_key"], r["submission_id"], r["input"], r["position"], r["name"], r["url"], r["size"], r["type"],
			r["object_uri"], r["sha256"], r["stored_size"], r["content_type"], storedAtText(r["stored_at"]), r["not_stored_reason"]})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSuffix(line.String(), "\n"))
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("submission_files, ZetaSQL (-) and the fake (+):\n%s", diff)
	}
	for _, c := range []string{`"sha256":"aaaa"`, `"sha256":"dddd"`, `"not_stored_reason":"expired"`, `"sha256":"pppp"`} {
		if !strings.Contains(strings.Join(want, "\n"), c) {
			t.Errorf("ZetaSQL gave no row with %s", c)
		}
	}
	if len(want) != 9 {
		t.Errorf("ZetaSQL gave %d rows, want 9:\n%s", len(want), strings.Join(want, "\n"))
	}
}

// zetaCopies is submission_file_copies holding the records of copies
// (as RecordFiles loads them), as a ZetaSQL table expression.
func zetaCopies(copies []sink.FileCopy) string {
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return stringLiteral(*p)
	}
	ts := func(s string) string { return "TIMESTAMP '" + s + "'" }
	var elems []string
	for _, c := range copies {
		r := newCopyRecord(c)
		size, storedAt := "NULL", "NULL"
		if r.Size != nil {
			size = fmt.Sprint(*r.Size)
		}
		if r.StoredAt != nil {
			storedAt = ts(*r.StoredAt)
		}
		elems = append(elems, fmt.Sprintf("(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
			stringLiteral(r.FormID), stringLiteral(r.SubmissionKey), stringLiteral(r.URL), str(r.SHA256), str(r.ObjectURI),
			size, str(r.ContentType), storedAt, str(r.Reason), ts(r.RecordedAt)))
	}
	return "(SELECT * FROM UNNEST(ARRAY<STRUCT<form_id STRING, submission_key STRING, url STRING, sha256 STRING, object_uri STRING, size INT64, content_type STRING, stored_at TIMESTAMP, reason STRING, recorded_at TIMESTAMP>>[" + strings.Join(elems, ", ") + "]))"
}

// storedAtText is a stored_at the fake's view returned, as the ZetaSQL
// query formats it.
func storedAtText(v bq.Value) bq.Value {
	if at, ok := v.(time.Time); ok {
		return at.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	return v
}
