package bigquery

import (
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

	"github.com/formsync/formsync/internal/testkit/bqfake"
	"github.com/formsync/formsync/internal/testkit/sinktest"
	"github.com/formsync/formsync/sink"
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
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	// A reconcile that no longer finds submission 5 marks it deleted.
	st := readState(t, b.sink, "f")["f"]
	if _, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(2 * time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, rows[:4]...), Reconcile: true}}}); err != nil {
		t.Fatal(err)
	}
	type file struct {
		Key      string
		Input    bq.Value
		Position int64
		Name     string
		URL      bq.Value
		Size     bq.Value
		Type     bq.Value
	}
	var got []file
	for _, r := range readFiles(t, b) {
		if r["form_id"] != "f" || fmt.Sprint(r["submission_id"]) != r["submission_key"] {
			t.Errorf("row %v", r)
		}
		got = append(got, file{r["submission_key"].(string), r["input"], r["position"].(int64), r["name"].(string), r["url"], r["size"], r["type"]})
	}
	want := []file{
		{"1", nil, 0, "a.pdf", "https://x/a", int64(1200), "application/pdf"},
		{"1", nil, 1, "b.png", "https://x/b", nil, nil},
		{"2", "docs", 0, "d1", "https://x/d1", nil, nil},
		{"2", "docs", 1, "d2", "https://x/d2", nil, nil},
		{"2", "photo", 0, "p.jpg", "https://x/p", int64(12), nil},
		{"3", "name", 0, "n", "https://x/n", nil, nil},
		{"3", `we"ird: input`, 0, "w", "https://x/w", nil, nil},
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
