package worker_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// shaped makes n submissions of one form, ids from first, each with the
// fields named.
func shaped(first int64, n int, at time.Time, fields ...string) []apisim.Submission {
	var subs []apisim.Submission
	for i := range n {
		id := first + int64(i)
		m := map[string]any{}
		for _, f := range fields {
			m[f] = fmt.Sprintf("%s-%d", f, id)
		}
		b, _ := json.Marshal(m)
		subs = append(subs, apisim.Submission{ID: id, CreatedAt: at.Add(time.Duration(i) * time.Second), Fields: b})
	}
	return subs
}

// newFieldLines are the log lines that say the form gained a field.
func newFieldLines(logs *bytes.Buffer) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m["msg"].(string), "the form gained a field") {
			out = append(out, m)
		}
	}
	logs.Reset()
	return out
}

// TestNewFieldIsToldOnce: a form that gains a question after its first
// rows is told once, by one log line and one increment of
// formsync_form_new_fields_total, in every sink; its view gains the column;
// a later sync says nothing more. The form's first rows are its shape:
// nothing is told for them.
func TestNewFieldIsToldOnce(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			base := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
			dst := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 0}, dst)
			var logs bytes.Buffer
			h.Config.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			m := metrics.New()
			sync := func() *worker.Report {
				t.Helper()
				rep := h.MustSync(ctx)
				m.ObserveRun(rep, rep.CommitDuration)
				return rep
			}
			first := shaped(1, 5, base, "name", "email")
			h.Sim.SetSubmissions("f", first...)
			sync()
			if lines := newFieldLines(&logs); len(lines) != 0 {
				t.Fatalf("the first rows told of %d new fields: %v", len(lines), lines)
			}
			second := slices.Concat(first, shaped(6, 3, base.Add(time.Hour), "name", "email", "phone"))
			h.Sim.SetSubmissions("f", second...)
			rep := sync()
			fr := enginetest.FormReport(t, rep, "f")
			if len(fr.NewFields) != 1 || fr.NewFields[0].Name != "phone" || fr.NewFields[0].Type != "string" || fr.Fields != 3 {
				t.Errorf("report: new fields %+v, %d fields; want phone (string), 3", fr.NewFields, fr.Fields)
			}
			lines := newFieldLines(&logs)
			if len(lines) != 1 || lines[0]["field"] != "phone" || lines[0]["form"] != "f" || lines[0]["type"] != "string" ||
				lines[0]["policy_rule"] != "" || lines[0]["policy_action"] != "keep" || lines[0]["level"] != "WARN" {
				t.Errorf("log lines %v, want one WARN for phone, no rule, kept", lines)
			}
			want := `
# HELP formsync_form_new_fields_total Fields a form gained after its first rows (a question added to the form), by form; each is also logged once with its name, type and field policy rule.
# TYPE formsync_form_new_fields_total counter
formsync_form_new_fields_total{form="f"} 1
# HELP formsync_form_fields Field names (view columns) the form has after its last successful sync.
# TYPE formsync_form_fields gauge
formsync_form_fields{form="f"} 3
`
			if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "formsync_form_new_fields_total", "formsync_form_fields"); err != nil {
				t.Error(err)
			}
			st, err := dst.ReadState(ctx, []string{"f"})
			if err != nil {
				t.Fatal(err)
			}
			if added, ok := st["f"].FieldTypes.Added["phone"]; !ok || len(st["f"].FieldTypes.Added) != 1 || added.IsZero() {
				t.Errorf("stored added times %v, want phone's alone", st["f"].FieldTypes.Added)
			}
			if !slices.Contains(st["f"].FieldNames, "phone") {
				t.Errorf("field names %v lack phone: the view has no column for it", st["f"].FieldNames)
			}
			h.Sim.SetSubmissions("f", slices.Concat(second, shaped(9, 2, base.Add(2*time.Hour), "name", "phone"))...)
			sync()
			if lines := newFieldLines(&logs); len(lines) != 0 {
				t.Errorf("a later sync told again: %v", lines)
			}
		})
	}
}

// TestNewFieldFallsToTheCatchAll: with explicit keeps before *=hash, a
// field the policy does not name is private from its first value: hashed
// in the row's fields and in raw, and its log line says it fell to the
// catch-all rule.
func TestNewFieldFallsToTheCatchAll(t *testing.T) {
	t.Parallel()
	pol := mustPolicy(t, "name=keep,email=keep,*=hash").WithKey([]byte("a test key of at least 16 bytes"))
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			base := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
			dst := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 4, Variant: apisim.Live, Forms: []string{"f"}, SubmissionsPerForm: 0}, dst)
			var logs bytes.Buffer
			h.Config.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			h.Config.FieldPolicy = pol
			first := shaped(1, 4, base, "name", "email")
			h.Sim.SetSubmissions("f", first...)
			h.MustSync(ctx)
			h.Sim.SetSubmissions("f", slices.Concat(first, shaped(5, 2, base.Add(time.Hour), "name", "email", "phone"))...)
			h.MustSync(ctx)
			lines := newFieldLines(&logs)
			if len(lines) != 1 || lines[0]["field"] != "phone" || lines[0]["policy_rule"] != "*" || lines[0]["policy_action"] != "hash" ||
				!strings.Contains(lines[0]["msg"].(string), "catch-all") {
				t.Errorf("log lines %v, want one for phone, hashed by the catch-all rule *", lines)
			}
			rows, err := dst.ReadRows(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			phones := 0
			for _, r := range rows {
				for _, text := range []string{r.Fields, r.Raw} {
					if strings.Contains(text, "phone-") {
						t.Errorf("row %s holds a clear phone: %s", r.SubmissionKey, text)
					}
					if !strings.Contains(text, "name-") || !strings.Contains(text, "email-") {
						t.Errorf("row %s lost a kept field: %s", r.SubmissionKey, text)
					}
				}
				var m map[string]any
				if json.Unmarshal([]byte(r.Fields), &m) == nil {
					if p, ok := m["phone"].(string); ok {
						phones++
						if len(p) != 64 {
							t.Errorf("row %s: phone %q is not a hash", r.SubmissionKey, p)
						}
					}
				}
			}
			if phones != 2 {
				t.Errorf("%d rows with a hashed phone, want 2", phones)
			}
		})
	}
}

// TestSyncFormsReadsOnlyThoseForms: a triggered sync reads and commits the
// forms it names and leaves the others as they were; a form that is not
// configured is refused before anything is read.
func TestSyncFormsReadsOnlyThoseForms(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a", "b", "c"}, SubmissionsPerForm: 30}, memSink(t))
	h.Config.StartJitter = time.Hour // a trigger does not wait for it
	rep, err := h.Engine().SyncForms(ctx, "a", "c")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Forms {
		if f.Inserted != 30 {
			t.Errorf("form %s: %d inserted, want 30", f.FormID, f.Inserted)
		}
		got = append(got, f.FormID)
	}
	if slices.Sort(got); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("synced %v, want [a c]", got)
	}
	rows, err := h.Sink.ReadRows(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rows); n != 0 {
		t.Errorf("form b has %d rows: it was not asked for", n)
	}
	if _, err := h.Engine().SyncForms(ctx, "a", "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("an unconfigured form: %v", err)
	}
}
