package bigquery

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
)

// What a sync costs in BigQuery is the bytes its jobs process. These
// tests read the fake's figure (bqfake's cost model: columns read × rows
// of the partitions scanned, plus the partitions rewritten) for the
// steady state: a sync that brings a form's newest submissions.

// costForm is a form holding stored rows spread evenly over the two
// years before end, in one sink on a fake of its own.
type costForm struct {
	fake  *bqfake.Server
	sink  *Sink
	state state.Form
	next  int64     // the id of the next new submission
	end   time.Time // the newest stored submission's time
}

// costRow is submission id of form, created at at.
func costRow(tb testing.TB, form string, id int64, at time.Time) sink.Row {
	tb.Helper()
	fields := json.RawMessage(fmt.Sprintf(`{"email":"user%d@example.com","message":"a message of some length, number %d","n":%d}`, id, id, id))
	r, err := sink.NewRow(form, &id, at.Truncate(time.Millisecond), false, fields, json.RawMessage(`[]`))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// newCostForm stores n submissions of one form, as its first sync does.
func newCostForm(tb testing.TB, n int) *costForm {
	tb.Helper()
	return newCostFormOver(tb, n, 2*365*24*time.Hour)
}

// newCostFormOver stores n submissions of one form spread evenly over
// span.
func newCostFormOver(tb testing.TB, n int, span time.Duration) *costForm {
	tb.Helper()
	fake := bqfake.Start(tb, bqfake.Options{})
	s, err := Open(tb.Context(), testConfig(fake))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	const form = "costly"
	end := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	rows := make([]sink.Row, n)
	for i := range rows {
		rows[i] = costRow(tb, form, int64(i+1), end.Add(-span+time.Duration(i+1)*(span/time.Duration(n))))
	}
	c := &costForm{fake: fake, sink: s, state: formState(form, rows), next: int64(n + 1), end: end}
	c.commit(tb, rows)
	return c
}

// commit commits rows with the form's state moved past them, and returns
// the bytes the fake reports its jobs processed.
func (c *costForm) commit(tb testing.TB, rows []sink.Row) int64 {
	tb.Helper()
	before := c.fake.Stats().BytesProcessed
	stored, err := c.sink.ReadState(tb.Context(), []string{c.state.FormID})
	if err != nil {
		tb.Fatal(err)
	}
	st := c.state
	st.Revision = stored[st.FormID].Revision
	for _, r := range rows {
		st.Watermark = st.Watermark.Advance(r.CreatedAt, *r.SubmissionID, r.SubmissionKey)
	}
	st.LastTotal += int64(len(rows))
	cm := &sink.Commit{SyncedAt: c.end.Add(time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(tb, rows...)}}}
	if _, err := c.sink.Commit(tb.Context(), cm); err != nil {
		tb.Fatalf("Commit: %v", err)
	}
	c.state = st
	return c.fake.Stats().BytesProcessed - before
}

// syncNew commits the next n new submissions, made in the minutes after
// the newest stored one, and returns the bytes the commit processed.
func (c *costForm) syncNew(tb testing.TB, n int) int64 {
	tb.Helper()
	rows := make([]sink.Row, n)
	for i := range rows {
		rows[i] = costRow(tb, c.state.FormID, c.next, c.end.Add(time.Duration(c.next)*time.Second))
		c.next++
	}
	return c.commit(tb, rows)
}

// TestSyncCostFollowsTheBatch: a sync of 50 new submissions costs about
// the same whether the form holds 2,000 rows or five times as many: its
// statements read the partitions of the batch, not the table.
func TestSyncCostFollowsTheBatch(t *testing.T) {
	t.Parallel()
	small, large := newCostForm(t, 2000), newCostForm(t, 10000)
	a, b := small.syncNew(t, 50), large.syncNew(t, 50)
	t.Logf("50 new rows: %d bytes with 2,000 stored, %d with 10,000 (×%.2f)", a, b, float64(b)/float64(a))
	if float64(b) > 1.5*float64(a) {
		t.Errorf("50 new rows cost %d bytes with 10,000 stored rows, %d with 2,000: ×%.1f, want under ×1.5", b, a, float64(b)/float64(a))
	}
}

// BenchmarkSyncBytes reports the bytes a sync of 50 new submissions
// processes in a form holding 2,000, then 200,000 stored rows spread
// over two years (see BENCHMARKS.md).
func BenchmarkSyncBytes(b *testing.B) {
	for _, stored := range []int{2000, 200000} {
		b.Run(fmt.Sprintf("stored=%d", stored), func(b *testing.B) {
			c := newCostForm(b, stored)
			var total int64
			b.ResetTimer()
			for b.Loop() {
				total += c.syncNew(b, 50)
			}
			b.ReportMetric(float64(total)/float64(b.N), "bytes-processed/op")
		})
	}
}

// TestOutsideForms: a form's stored rows outside the batch's range are
// looked for only when one of its staged ids may be stored: not above
// its max_submission_id, or that bound unknown. Rows keyed by content
// never need it.
func TestOutsideForms(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	spool := func(form string, ids ...int64) staged {
		var rows []sink.Row
		for _, id := range ids {
			rows = append(rows, costRow(t, form, id, at))
		}
		if len(ids) == 0 {
			r, err := sink.NewRow(form, nil, at, false, json.RawMessage(`{}`), json.RawMessage(`[]`))
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		sp := sinktest.Spool(t, rows...)
		if err := sp.Finish(); err != nil {
			t.Fatal(err)
		}
		return staged{form: form, spool: sp}
	}
	got := outsideForms([]staged{
		spool("new", 11, 12),   // above the bound: new submissions
		spool("again", 10, 12), // 10 may be stored
		spool("unknown", 50),   // no bound known
		spool("content"),       // keyed by content
		spool("new", 13),       // a second spool of a form
	}, storedIDs{"new": 10, "again": 10, "content": 0})
	if want := []string{"again", "unknown"}; !slices.Equal(got, want) {
		t.Errorf("outsideForms = %v, want %v", got, want)
	}
}

// forget removes the stored row of submission id as worker.Forget
// commits it (the created_at range of the rows it found given, unless
// unbounded), and returns the bytes the commit processed.
func (c *costForm) forget(tb testing.TB, id int64, unbounded bool) int64 {
	tb.Helper()
	key := fmt.Sprint(id)
	found, err := c.sink.Find(tb.Context(), c.state.FormID, sink.Match{Keys: []string{key}})
	if err != nil || len(found) != 1 {
		tb.Fatalf("Find: %v, %d rows", err, len(found))
	}
	at := found[0].CreatedAt
	before := c.fake.Stats().BytesProcessed
	stored, err := c.sink.ReadState(tb.Context(), []string{c.state.FormID})
	if err != nil {
		tb.Fatal(err)
	}
	st := stored[c.state.FormID]
	fg, err := state.NewForgotten()
	if err != nil {
		tb.Fatal(err)
	}
	if st.Forgotten != nil {
		fg = st.Forgotten
	}
	st.Forgotten = fg.With(1, key)
	fc := sink.FormCommit{State: st, Forget: []string{key}, ForgetFrom: at, ForgetTo: at}
	if unbounded {
		fc.ForgetFrom, fc.ForgetTo = time.Time{}, time.Time{}
	}
	cm := &sink.Commit{SyncedAt: c.end.Add(2 * time.Hour), Forms: []sink.FormCommit{fc}}
	res, err := c.sink.Commit(tb.Context(), cm)
	if err != nil {
		tb.Fatalf("Commit: %v", err)
	}
	if n := res[c.state.FormID].Forgotten; n != 1 {
		tb.Fatalf("forgot %d rows, want 1", n)
	}
	c.state = st
	return c.fake.Stats().BytesProcessed - before
}

// TestForgetCostFollowsTheRows: forgetting one submission costs about the
// same in a form of 2,000 rows (over 146 days) as in one of five times as
// many (over two years, as many a day): the forget's statements read the
// partitions of the rows it removes (their created_at, which the forget
// read), not every partition of the form.
func TestForgetCostFollowsTheRows(t *testing.T) {
	t.Parallel()
	small, large := newCostFormOver(t, 2000, 146*24*time.Hour), newCostFormOver(t, 10000, 730*24*time.Hour)
	a, b := small.forget(t, 1000, false), large.forget(t, 5000, false)
	t.Logf("forgetting one row: %d bytes with 2,000 stored, %d with 10,000 (×%.2f)", a, b, float64(b)/float64(a))
	ua, ub := small.forget(t, 1001, true), large.forget(t, 5001, true)
	t.Logf("without its created_at range: %d bytes with 2,000 stored, %d with 10,000 (×%.2f)", ua, ub, float64(ub)/float64(ua))
	if float64(b) > 1.5*float64(a) {
		t.Errorf("forgetting one row cost %d bytes with 10,000 stored rows, %d with 2,000: ×%.1f, want under ×1.5", b, a, float64(b)/float64(a))
	}
}
