package bigquery

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
	"google.golang.org/api/option"
)

// bundle is one test's fake and sink.
type bundle struct {
	fake *bqfake.Server // nil against real BigQuery
	sink *Sink
	cfg  Config
	t0   time.Time
}

func testConfig(fake *bqfake.Server) Config {
	return Config{
		Project:      "test-project",
		Dataset:      "formsync_test",
		Endpoint:     fake.URL(),
		PollInterval: time.Millisecond,
		RetryInitial: time.Millisecond,
		MaxRetries:   3,
		// The fake runs a script inside the request that starts it: a
		// commit of thousands of rows can take minutes under the race
		// detector on a busy machine, which the outage budget (2m by
		// default) would take for a BigQuery that does not answer. The
		// outage tests set their own budget.
		Timeout: 10 * time.Minute,
	}
}

// setup starts a fake and opens a sink on it.
func setup(t *testing.T, opts bqfake.Options, adjust ...func(*Config)) *bundle {
	t.Helper()
	fake := bqfake.Start(t, opts)
	cfg := testConfig(fake)
	for _, a := range adjust {
		a(&cfg)
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &bundle{fake: fake, sink: s, cfg: cfg, t0: time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)}
}

// second opens another Sink on b's fake, as a second process would.
func (b *bundle) second(t *testing.T) *Sink {
	t.Helper()
	s, err := Open(t.Context(), b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// row builds a submission of form; id < 0 means the older response form
// (no id, microseconds).
func (b *bundle) row(t testing.TB, form string, id int64, n int, spam bool) sink.Row {
	t.Helper()
	at := b.t0.Add(time.Duration(n) * time.Second)
	var idp *int64
	if id >= 0 {
		idp = &id
		at = at.Truncate(time.Millisecond)
	}
	fields := json.RawMessage(fmt.Sprintf(`{"email":"user%d@example.com","message":"hello <%d>","n":%d}`, n, n, n))
	files := json.RawMessage(`[]`)
	r, err := sink.NewRow(form, idp, at, spam, fields, files)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// formState is a plausible state for a form after reading rows.
func formState(form string, rows []sink.Row, fields ...string) state.Form {
	f := state.New(form)
	f.Order = state.OrderNewestFirst
	f.LastTotal = int64(len(rows))
	f.FieldNames = fields
	for _, r := range rows {
		var id int64
		if r.SubmissionID != nil {
			id = *r.SubmissionID
		}
		f.Watermark = f.Watermark.Advance(r.CreatedAt, id, r.SubmissionKey)
	}
	return f
}

type formRows struct {
	state state.Form
	rows  []sink.Row
}

// commit commits forms, each state carrying the revision stored now (as a
// worker that has just read the state would).
func (b *bundle) commit(t *testing.T, at time.Time, forms ...formRows) (sink.Result, error) {
	t.Helper()
	c := &sink.Commit{SyncedAt: at}
	var ids []string
	for _, f := range forms {
		ids = append(ids, f.state.FormID)
	}
	stored := readState(t, b.sink, ids...)
	for _, f := range forms {
		f.state.Revision = stored[f.state.FormID].Revision
		fc := sink.FormCommit{State: f.state}
		if f.rows != nil {
			fc.Rows = sinktest.Spool(t, f.rows...)
		}
		c.Forms = append(c.Forms, fc)
	}
	return b.sink.Commit(t.Context(), c)
}

func (b *bundle) mustCommit(t *testing.T, at time.Time, forms ...formRows) sink.Result {
	t.Helper()
	res, err := b.commit(t, at, forms...)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return res
}

// checkRows asserts the stored rows of form are exactly want (any order).
func checkRows(t *testing.T, s *Sink, form string, want []sink.Row) {
	t.Helper()
	got, err := s.ReadRows(t.Context(), form)
	if err != nil {
		t.Fatalf("ReadRows: %v", err)
	}
	key := func(r sink.Row) string {
		id := "nil"
		if r.SubmissionID != nil {
			id = fmt.Sprint(*r.SubmissionID)
		}
		return fmt.Sprintf("%s|%s|%s|%s|%v|%s|%s", r.FormID, id, r.SubmissionKey, r.CreatedAt.UTC().Format(sink.TimeLayout), r.IsSpam, r.Fields, r.Files)
	}
	var g, w []string
	for _, r := range got {
		g = append(g, key(r))
	}
	for _, r := range want {
		w = append(w, key(r))
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("form %s rows:\n got %d: %q\nwant %d: %q", form, len(g), g, len(w), w)
	}
}

func readState(t *testing.T, s *Sink, ids ...string) map[string]state.Form {
	t.Helper()
	st, err := s.ReadState(t.Context(), ids)
	if err != nil {
		t.Fatalf("ReadState: %v", err)
	}
	return st
}

// clientOptions point a bare client at the fake.
func clientOptions(fake *bqfake.Server) []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(fake.URL() + "/bigquery/v2/"), option.WithoutAuthentication()}
}

// olderDataset starts a fake holding the dataset of testConfig with the
// given tables, as a formsync of another schema left them, and returns
// the fake, the config and the dataset (its client closed at cleanup).
func olderDataset(t *testing.T, tables map[string]bq.Schema) (*bqfake.Server, Config, *bq.Dataset) {
	t.Helper()
	fake := bqfake.Start(t, bqfake.Options{})
	cfg := testConfig(fake)
	client, err := bq.NewClient(t.Context(), cfg.Project, clientOptions(fake)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ds := client.Dataset("formsync_test")
	if err := ds.Create(t.Context(), &bq.DatasetMetadata{Location: "US"}); err != nil {
		t.Fatal(err)
	}
	for name, schema := range tables {
		meta := &bq.TableMetadata{Schema: schema}
		if name == submissionsTable { // as every formsync made it
			meta.TimePartitioning = &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"}
			meta.Clustering = &bq.Clustering{Fields: []string{"form_id"}}
		}
		if err := ds.Table(name).Create(t.Context(), meta); err != nil {
			t.Fatal(err)
		}
	}
	return fake, cfg, ds
}
