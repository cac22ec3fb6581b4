package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// A whole-form backfill while submissions are deleted upstream, in both
// orders, at 20 a page and a deletion every few requests: after it and one
// sync, no live submission is missing.
func TestBackfillUnderDeletionsLosesNothing(t *testing.T) {
	t.Parallel()
	for _, o := range []apisim.Order{apisim.NewestFirst, apisim.OldestFirst} {
		t.Run(o.String(), func(t *testing.T) {
			ctx := t.Context()
			h := enginetest.NewHarness(t, apisim.Options{Seed: 21, Variant: apisim.Newer, Order: o, Forms: []string{"f"}, SubmissionsPerForm: 1000}, memSink(t))
			h.Config.PageSize = 20
			h.Sim.SetMutation(3, 0, 1)
			rep, err := newEngine(t, h, client(t, h, nil)).Backfill(ctx, "f", worker.BackfillOptions{CheckpointRows: 300})
			if err != nil {
				t.Fatal(err)
			}
			deleted := len(h.Sim.Deleted("f"))
			if deleted < 10 {
				t.Fatalf("only %d deletions landed during the backfill", deleted)
			}
			t.Logf("backfill read %d rows in %d requests (%d pages read again) while %d submissions were deleted", rep.Staged, rep.Requests, rep.Rescans, deleted)
			h.Sim.SetMutation(0, 0, 0)
			h.MustSync(ctx)
			h.CheckTable(ctx, "f", enginetest.Expected(t, h.Sim, "f", apisim.Newer), enginetest.DeletedRows(t, h.Sim, "f", apisim.Newer)...)
		})
	}
}

// handSim is a simulator of the newer response form whose forms hold
// only the submissions a test gives them (apisim's SetSubmissions), so
// that tests can serve what generated forms never hold.
func handSim(order apisim.Order) *apisim.Server {
	return apisim.New(apisim.Options{Variant: apisim.Newer, Order: order, SubmissionsPerForm: apisim.NoSubmissions})
}

// orderOf is the order a test serving oldest first asks for.
func orderOf(oldest bool) apisim.Order {
	if oldest {
		return apisim.OldestFirst
	}
	return apisim.NewestFirst
}

// rewriting serves h through a proxy that hands each envelope of a 200 (and
// its pagination) to edit before sending it on: a server, or a proxy in
// front of it, that lies. r is the request as the client sent it.
func rewriting(h http.Handler, edit func(r *http.Request, env, pag map[string]any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var env map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &env) != nil {
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		edit(r, env, env["meta"].(map[string]any)["pagination"].(map[string]any))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(env)
	})
}

// askedPage is the page r asks for.
func askedPage(r *http.Request) int {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	return max(page, 1)
}

// onPage1 serves h every request as if it asked for page 1.
func onPage1(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		q := r2.URL.Query()
		q.Set("page", "1")
		r2.URL.RawQuery = q.Encode()
		h.ServeHTTP(w, r2)
	})
}

// sub is a submission of the newer response form; nil fields are served
// as null.
func sub(id int, at time.Time, fields map[string]any) apisim.Submission {
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	return apisim.Submission{ID: int64(id), CreatedAt: at, Fields: b, Files: json.RawMessage(`[]`)}
}

// fakeEngine serves api on loopback and returns an engine over sink s.
func fakeEngine(t *testing.T, api http.Handler, s worker.Sink, cfg worker.Config) *worker.Engine {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c, err := formsapi.New(formsapi.Config{BaseURL: srv.URL, Token: apisim.DefaultToken, RateLimit: 10000, MaxWait: 200 * time.Millisecond,
		InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg.TmpDir = t.TempDir()
	e, err := worker.New(c, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var base = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// manySubs is n submissions a minute apart, newest (id n) first.
func manySubs(n int) []apisim.Submission {
	subs := make([]apisim.Submission, n)
	for i := range n {
		subs[n-1-i] = sub(i+1, base.Add(time.Duration(i)*time.Minute), map[string]any{"n": strconv.Itoa(i + 1)})
	}
	return subs
}

// A server (or proxy) that ignores page and always answers page 1: the
// form fails for the run and keeps its watermark; nothing is trusted.
func TestPageIgnoringServerFailsTheForm(t *testing.T) {
	t.Parallel()
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("f", manySubs(250)...)
	var ignore atomic.Bool
	ignore.Store(true)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ignore.Load() {
			q := r.URL.Query()
			q.Del("page")
			r.URL.RawQuery = q.Encode()
		}
		api.ServeHTTP(w, r)
	})
	s := memory.New()
	e := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}, PageSize: 10})
	rep, err := e.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ferr := rep.Forms[0].Err; ferr == nil {
		t.Fatalf("a server ignoring page was trusted: %d rows staged", rep.Forms[0].Staged)
	} else {
		t.Logf("refused: %v", ferr)
	}
	if st, _ := s.ReadState(t.Context(), nil); !st["f"].Watermark.IsZero() || st["f"].LastError == "" {
		t.Errorf("state after a page-ignoring server: %+v", st["f"])
	}
	ignore.Store(false)
	rep, _ = e.Sync(t.Context())
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.ReadRows(t.Context(), "f"); len(rows) != 250 {
		t.Errorf("after the server mends: %d rows, want 250", len(rows))
	}
}

// An envelope claiming total_pages 0 for 25 submissions: refused, not a
// form of 10 rows.
func TestTotalPagesZeroFailsTheForm(t *testing.T) {
	t.Parallel()
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("f", manySubs(25)...)
	lying := rewriting(api, func(_ *http.Request, _, pag map[string]any) { pag["total_pages"] = 0 })
	s := memory.New()
	rep, err := fakeEngine(t, lying, s, worker.Config{Forms: []string{"f"}, PageSize: 10}).Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Forms[0].Err == nil {
		rows, _ := s.ReadRows(t.Context(), "f")
		t.Fatalf("total_pages 0 was trusted: %d of 25 rows stored, no error", len(rows))
	}
}

// An oldest-first form whose envelope claims 10^12 pages is read until its
// time budget runs out; the healthy form beside it commits.
func TestEndlessFormDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	const endless = 1_000_000_000_000
	api := handSim(apisim.OldestFirst)
	api.SetSubmissions("healthy", manySubs(30)...)
	// Every page of the endless form serves ten new submissions with
	// created_at rising by page, so nothing looks repeated.
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/endless/") {
			api.ServeHTTP(w, r)
			return
		}
		page := askedPage(r)
		var data []apisim.Submission
		for i := range 10 {
			n := (page-1)*10 + i
			data = append(data, sub(n+1, base.Add(time.Duration(n)*time.Second), map[string]any{"n": n}))
		}
		api.SetSubmissions("endless", data...)
		onPage1(api).ServeHTTP(w, r)
	})
	handler := rewriting(serve, func(r *http.Request, _, pag map[string]any) {
		if strings.Contains(r.URL.Path, "/endless/") {
			pag["current_page"], pag["total"], pag["total_pages"] = askedPage(r), endless*10, endless
		}
	})
	s := memory.New()
	e := fakeEngine(t, handler, s, worker.Config{Forms: []string{"endless", "healthy"}, PageSize: 10, FormTimeout: time.Second})
	rep, err := e.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	end := enginetest.FormReport(t, rep, "endless")
	if !errors.Is(end.Err, worker.ErrFormTimeout) {
		t.Errorf("endless form: %v, want ErrFormTimeout", end.Err)
	}
	if h := enginetest.FormReport(t, rep, "healthy"); h.Err != nil || h.Inserted != 30 {
		t.Errorf("healthy form: %d inserted, %v; want 30 and no error", h.Inserted, h.Err)
	}
	t.Logf("endless form stopped after %d pages: %v", end.Pages, end.Err)
}

// The same id served again with a different created_at and fields: the row
// becomes the later version, every column.
func TestLaterVersionReplacesTheRow(t *testing.T) {
	t.Parallel()
	api := handSim(apisim.NewestFirst)
	v1 := sub(5, base, map[string]any{"v": "1"})
	api.SetSubmissions("f", v1, sub(4, base.Add(-time.Minute), map[string]any{"v": "old"}))
	s := memory.New()
	e := fakeEngine(t, api, s, worker.Config{Forms: []string{"f"}, Lookback: 48 * time.Hour})
	if rep, _ := e.Sync(t.Context()); rep.Err() != nil {
		t.Fatal(rep.Err())
	}
	v2 := sub(5, base.Add(time.Hour), map[string]any{"v": "2"})
	api.SetSubmissions("f", v2, sub(4, base.Add(-time.Minute), map[string]any{"v": "old"}))
	rep, _ := e.Sync(t.Context())
	if rep.Err() != nil {
		t.Fatal(rep.Err())
	}
	rows, _ := s.ReadRows(t.Context(), "f")
	var got sink.Row
	for _, r := range rows {
		if r.SubmissionKey == "5" {
			got = r
		}
	}
	if !got.CreatedAt.Equal(base.Add(time.Hour)) || got.Fields != `{"v":"2"}` {
		t.Errorf("row 5 = created %s fields %s; want the later version (%s, {\"v\":\"2\"})", got.CreatedAt, got.Fields, base.Add(time.Hour))
	}
	if len(rows) != 2 {
		t.Errorf("%d rows, want 2", len(rows))
	}
}

// syncFirst is a sink on which a sync of the same form commits just before
// the first backfill checkpoint: after the backfill read the state, before
// it writes.
type syncFirst struct {
	*memory.Sink
	sync func()
	once sync.Once
}

func (s *syncFirst) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	if len(c.Forms) == 1 && c.Forms[0].State.Backfill != nil {
		s.once.Do(s.sync)
	}
	return s.Sink.Commit(ctx, c)
}

func TestSyncCommittingDuringBackfillIsMerged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := memory.New()
	s := &syncFirst{Sink: mem}
	h := enginetest.NewHarness(t, apisim.Options{Seed: 23, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 300}, mem)
	h.MustSync(ctx)
	subs := h.Sim.Submissions("f")
	var synced state.Watermark
	s.sync = func() {
		h.Sim.Add("f", 7)
		h.MustSync(ctx)
		st, _ := mem.ReadState(ctx, []string{"f"})
		synced = st["f"].Watermark
	}
	cfg := h.Config
	e, err := worker.New(client(t, h, nil), s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.Backfill(ctx, "f", worker.BackfillOptions{Window: worker.Window{Since: subs[0].CreatedAt, Until: subs[200].CreatedAt}, CheckpointRows: 50})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Conflicts == 0 {
		t.Errorf("the sync's commit did not make the backfill merge")
	}
	st, _ := mem.ReadState(ctx, []string{"f"})
	if !st["f"].Watermark.CreatedAt.Equal(synced.CreatedAt) || synced.IsZero() {
		t.Errorf("watermark %v after the backfill, want the sync's %v: a backfill must not undo a sync", st["f"].Watermark.CreatedAt, synced.CreatedAt)
	}
	if st["f"].Backfill != nil {
		t.Errorf("a finished backfill left its progress: %+v", st["f"].Backfill)
	}
	h.CheckTable(ctx, "f", enginetest.Expected(t, h.Sim, "f", apisim.Newer))
}

// A form whose API counts more submissions than it serves: read again in
// full once, then reported incomplete, in the report and in the state.
func TestIncompleteFormIsReported(t *testing.T) {
	t.Parallel()
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("f", manySubs(10)...)
	lying := rewriting(api, func(_ *http.Request, _, pag map[string]any) { pag["total"], pag["total_pages"] = 12, 2 })
	s := memory.New()
	rep, err := fakeEngine(t, lying, s, worker.Config{Forms: []string{"f"}, PageSize: 10}).Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fr := rep.Forms[0]
	var ie *worker.IncompleteError
	if !errors.As(fr.Err, &ie) || fr.Missing != 2 || fr.Rescans == 0 {
		t.Fatalf("form: missing %d, rescans %d, err %v; want 2 missing after a full re-read", fr.Missing, fr.Rescans, fr.Err)
	}
	if rep.Failed() != 1 {
		t.Errorf("an incomplete form does not fail the run")
	}
	st, _ := s.ReadState(t.Context(), nil)
	if !strings.Contains(st["f"].LastError, "incomplete") {
		t.Errorf("state's last error %q does not say the form is incomplete", st["f"].LastError)
	}
	if rows, _ := s.ReadRows(t.Context(), "f"); len(rows) != 10 {
		t.Errorf("%d rows stored, want the 10 served", len(rows))
	}
}

// A wrong token over 10 forms: the run stops at once, with at most as many
// requests as forms read at once.
func TestUnauthorizedStopsTheRun(t *testing.T) {
	t.Parallel()
	var forms []string
	for i := range 10 {
		forms = append(forms, fmt.Sprintf("f%d", i))
	}
	sim := apisim.New(apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: forms, SubmissionsPerForm: 5, Token: "right"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c, err := formsapi.New(formsapi.Config{BaseURL: srv.URL, Token: "wrong", RateLimit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	s := memory.New()
	e, err := worker.New(c, s, worker.Config{Forms: forms, Concurrency: 4, TmpDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rep.Fatal, formsapi.ErrUnauthorized) || !errors.Is(rep.Err(), formsapi.ErrUnauthorized) {
		t.Errorf("report: fatal %v; want the 401", rep.Fatal)
	}
	if n := sim.Stats().Requests; n > 4 {
		t.Errorf("%d requests with a wrong token, want at most 4 (the concurrency)", n)
	}
}

// Submissions formsync cannot trust are stored, counted and kept out of
// the watermark: a created_at in the year 9999, fields nested deeper than
// the sinks query, no fields at all.
func TestUntrustedSubmissionsAreStoredNotTrusted(t *testing.T) {
	t.Parallel()
	deep := any("leaf")
	for range sink.MaxDepth + 5 {
		deep = []any{deep}
	}
	now := time.Now().UTC()
	api := handSim(apisim.NewestFirst)
	noFields := sub(4, now.Add(-3*time.Hour), nil)
	noFields.Fields = nil // served without a fields member
	api.SetSubmissions("f",
		sub(9, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), map[string]any{"x": "future"}),
		sub(6, now.Add(-time.Hour), map[string]any{"deep": deep}),
		sub(5, now.Add(-2*time.Hour), map[string]any{"x": "fine"}),
		noFields,
	)
	s := memory.New()
	rep, err := fakeEngine(t, api, s, worker.Config{Forms: []string{"f"}}).Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fr := rep.Forms[0]
	if fr.Err != nil || fr.Inserted != 4 || fr.Future != 1 || fr.TooDeep != 1 {
		t.Errorf("report: %d inserted, future %d, too deep %d, err %v; want 4, 1, 1, nil", fr.Inserted, fr.Future, fr.TooDeep, fr.Err)
	}
	st, _ := s.ReadState(t.Context(), nil)
	if wm := st["f"].Watermark.CreatedAt; wm.Year() == 9999 || !wm.Equal(now.Add(-time.Hour).Truncate(time.Millisecond)) {
		t.Errorf("watermark %s: a far-future created_at must not move it", wm)
	}
	rows, _ := s.ReadRows(t.Context(), "f")
	for _, r := range rows {
		if r.SubmissionKey == "6" && (r.Fields != "{}" || !strings.Contains(r.Raw, "leaf")) {
			t.Errorf("too-deep row: fields %.40s, raw kept %v", r.Fields, strings.Contains(r.Raw, "leaf"))
		}
	}
}

// bumpFirst is a sink on which another process commits each form (a state
// it read, unchanged but for its error) just before the first sync commit.
type bumpFirst struct {
	*memory.Sink
	once sync.Once
}

func (s *bumpFirst) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	s.once.Do(func() {
		states, _ := s.ReadState(ctx, nil)
		other := &sink.Commit{SyncedAt: c.SyncedAt}
		for _, st := range states {
			st.Backfill = &state.Backfill{Cursor: base, StartedAt: base}
			other.Forms = append(other.Forms, sink.FormCommit{State: st})
		}
		if _, err := s.Sink.Commit(ctx, other); err != nil {
			panic(err)
		}
	})
	return s.Sink.Commit(ctx, c)
}

// A sync whose commit finds the forms committed by another process since
// it read them merges: its rows and watermark go in, the other's backfill
// progress stays.
func TestSyncMergesAConcurrentCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := memory.New()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 24, Variant: apisim.Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 40}, mem)
	h.MustSync(ctx)
	h.Sim.Add("a", 5)
	s := &bumpFirst{Sink: mem}
	e, err := worker.New(client(t, h, nil), s, h.Config)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.Sync(ctx)
	if err != nil || rep.Err() != nil {
		t.Fatal(err, rep.Err())
	}
	if rep.Conflicts != 1 || enginetest.FormReport(t, rep, "a").Inserted != 5 {
		t.Errorf("conflicts %d, inserted %d; want 1 and 5", rep.Conflicts, enginetest.FormReport(t, rep, "a").Inserted)
	}
	st, _ := mem.ReadState(ctx, nil)
	for _, f := range []string{"a", "b"} {
		if st[f].Backfill == nil {
			t.Errorf("form %s: the sync's merge dropped the other process's backfill progress", f)
		}
		h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, apisim.Newer))
	}
	subs := h.Sim.Submissions("a")
	if wm := st["a"].Watermark.CreatedAt; !wm.Equal(subs[len(subs)-1].CreatedAt.Truncate(time.Millisecond)) {
		t.Errorf("watermark of a = %s, want the newest submission's", wm)
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	t.Parallel()
	err := worker.Config{PageSize: 101, Concurrency: -1, FormTimeout: -time.Second, Lookback: -time.Hour, ShutdownGrace: -1}.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *config.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		fields = append(fields, fe.Field)
	}
	if want := "Forms PageSize Concurrency FormTimeout Lookback ShutdownGrace"; strings.Join(fields, " ") != want {
		t.Errorf("fields %v, want %s", fields, want)
	}
	if _, err := worker.New(nil, nil, worker.Config{}); err == nil {
		t.Error("New accepted a configuration without forms")
	}
}

// A form with more field names than a view has columns is logged.
func TestViewColumnCapIsLogged(t *testing.T) {
	t.Parallel()
	fields := map[string]any{}
	for i := range sink.MaxViewFields + 3 {
		fields[fmt.Sprintf("f%d", i)] = "x"
	}
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("wide", sub(1, base, fields))
	var logs strings.Builder
	cfg := worker.Config{Forms: []string{"wide"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	rep, err := fakeEngine(t, api, memory.New(), cfg).Sync(t.Context())
	if err != nil || rep.Err() != nil {
		t.Fatal(err, rep.Err())
	}
	if !strings.Contains(logs.String(), "view_columns=1900") || !strings.Contains(logs.String(), "field_names=1903") {
		t.Errorf("no warning about the view's column cap in:\n%.2000s", logs.String())
	}
}

// A form short of the API's total whose full re-read finds what was missing
// is complete: no error, nothing reported missing.
func TestShortFormMendedByTheReRead(t *testing.T) {
	t.Parallel()
	subs := manySubs(3)
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("f", subs[0], subs[2]) // the middle one is not listed yet
	handler := rewriting(api, func(_ *http.Request, _, pag map[string]any) {
		pag["total"], pag["total_pages"] = 3, 1
		api.SetSubmissions("f", subs...) // listed from the second request on
	})
	s := memory.New()
	rep, err := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}}).Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if fr := rep.Forms[0]; fr.Err != nil || fr.Missing != 0 || fr.Rescans != 1 || fr.Inserted != 3 {
		t.Errorf("report: err %v, missing %d, rescans %d, inserted %d; want nil, 0, 1, 3", fr.Err, fr.Missing, fr.Rescans, fr.Inserted)
	}
	if st, _ := s.ReadState(t.Context(), nil); st["f"].LastError != "" || st["f"].Rows != 3 {
		t.Errorf("state: error %q, rows %d", st["f"].LastError, st["f"].Rows)
	}
}

// A proxy that answers every page with page 1's submissions but the
// pagination of the page asked for passes the client's checks; the walker
// sees the repeated page and fails the form.
func TestRepeatedPageFailsTheForm(t *testing.T) {
	t.Parallel()
	api := handSim(apisim.NewestFirst)
	api.SetSubmissions("f", manySubs(40)...)
	handler := rewriting(onPage1(api), func(r *http.Request, _, pag map[string]any) { pag["current_page"] = askedPage(r) })
	s := memory.New()
	rep, err := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}, PageSize: 10}).Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Forms[0].Err; !errors.Is(err, formsapi.ErrPaging) || !strings.Contains(err.Error(), "page 2 holds exactly the submissions of page 1") {
		t.Fatalf("a repeated page: %v, want ErrPaging naming the repeat", err)
	}
	if st, _ := s.ReadState(t.Context(), nil); !st["f"].Watermark.IsZero() {
		t.Errorf("watermark moved to %v", st["f"].Watermark)
	}
}

// Submissions already read are deleted while a newest-first form is read,
// more of them than a page holds (a spam clean-up): every submission after
// them moves up by as many places, past the page read last, onto pages
// read before. Each read reads those pages again and loses nothing, in as
// few requests as the fall of the total allows. An oldest-first form is
// read backwards, where such deletions only repeat submissions.
func TestDeletionsOfManyReadSubmissionsLoseNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		after  int    // the page served before the deletions
		delete []int  // ids deleted, newest first
		oldest bool   // serve oldest first
		rescan [2]int // the fewest and most pages read again by a sync
	}{
		{"a page and a half of those read", 2, ids(50, 36), false, [2]int{2, 2}},
		{"two and a half pages of those read", 3, ids(50, 26), false, [2]int{3, 3}},
		{"five read and ten not yet", 2, append(ids(50, 46), ids(20, 11)...), false, [2]int{1, 1}},
		{"every one read", 2, ids(50, 31), false, [2]int{2, 2}},
		{"oldest first", 2, ids(1, 15), true, [2]int{0, 0}},
	}
	for _, tc := range tests {
		for _, backfill := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/backfill=%v", tc.name, backfill), func(t *testing.T) {
				subs := manySubs(50) // ids 50 (newest) to 1
				api := handSim(orderOf(tc.oldest))
				api.SetSubmissions("f", subs...)
				var fired atomic.Bool
				handler := rewriting(api, func(r *http.Request, _, _ map[string]any) {
					if askedPage(r) == tc.after && fired.CompareAndSwap(false, true) {
						var left []apisim.Submission
						for _, s := range subs {
							if !slices.Contains(tc.delete, int(s.ID)) {
								left = append(left, s)
							}
						}
						api.SetSubmissions("f", left...)
					}
				})
				s := memory.New()
				e := fakeEngine(t, handler, s, worker.Config{Forms: []string{"f"}, PageSize: 10})
				rescans, staged := readWhole(t, e, "f", backfill)
				if !backfill && (rescans < tc.rescan[0] || rescans > tc.rescan[1]) {
					t.Errorf("%d pages read again, want %d to %d", rescans, tc.rescan[0], tc.rescan[1])
				}
				if !fired.Load() {
					t.Fatal("the deletions never happened")
				}
				rows, err := s.ReadRows(t.Context(), "f")
				if err != nil {
					t.Fatal(err)
				}
				stored := map[int64]bool{}
				for _, r := range rows {
					stored[*r.SubmissionID] = true
				}
				var missing []int64
				for id := int64(1); id <= 50; id++ {
					if !stored[id] && !slices.Contains(tc.delete, int(id)) {
						missing = append(missing, id)
					}
				}
				if len(missing) > 0 {
					t.Errorf("%d live submissions not stored: %v (%d rows stored, %d pages read again)", len(missing), missing, len(rows), rescans)
				}
				// Read backwards, deletions of more than a page ahead repeat
				// submissions from two pages back, staged twice, stored once.
				if !tc.oldest && staged != len(rows) {
					t.Errorf("%d rows staged for %d stored: a page read again staged some twice", staged, len(rows))
				}
			})
		}
	}
}

// readWhole reads form formID of a fresh engine to its end, by a backfill
// of the whole form or a sync, failing the test unless it succeeds, and
// returns the pages it read again and the rows it staged.
func readWhole(t *testing.T, e *worker.Engine, formID string, backfill bool) (rescans, staged int) {
	t.Helper()
	if backfill {
		rep, err := e.Backfill(t.Context(), formID, worker.BackfillOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Rescans, rep.Staged
	}
	rep, err := e.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	fr := enginetest.FormReport(t, rep, formID)
	return fr.Rescans, fr.Staged
}

// ids lists the ids from a to b, both included, in that direction.
func ids(a, b int) []int {
	var out []int
	for id := a; ; {
		out = append(out, id)
		if id == b {
			return out
		}
		if a < b {
			id++
		} else {
			id--
		}
	}
}

// A sync that fails a form records the failure over whatever another
// process committed meanwhile, and nothing else: a reconcile that rewrote
// the form under a new field policy (what the failure asks for) while the
// sync ran keeps the policy it recorded, and the next sync goes through.
func TestFailedFormMergedKeepsAConcurrentReconcile(t *testing.T) {
	t.Parallel()
	pol := mustPolicy(t, "email=drop")
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			base := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 46, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 40}, base)
			h.MustSync(ctx)
			h.Config.FieldPolicy = pol
			reconciler := h.Engine()
			// The reconcile commits after the sync read the state, before
			// it records the form's failure.
			h.Sink = &onCommit{Sink: base, n: 1, hook: func(ctx context.Context, _ *sink.Commit) error {
				rep, err := reconciler.Reconcile(ctx, "contact")
				if err == nil {
					err = rep.Err()
				}
				return err
			}}
			rep := h.Sync(ctx)
			if err := enginetest.FormReport(t, rep, "contact").Err; !errors.Is(err, worker.ErrPolicyChanged) {
				t.Fatalf("sync under a new policy: %v, want ErrPolicyChanged", err)
			}
			if rep.Conflicts == 0 {
				t.Fatal("the sync's commit met no concurrent commit")
			}
			st, err := base.ReadState(ctx, []string{"contact"})
			if err != nil {
				t.Fatal(err)
			}
			if got := st["contact"].FieldPolicy; got != pol.Identity() {
				t.Errorf("state after the merge records field policy %q; the reconcile rewrote every row under %q", got, pol.Identity())
			}
			if st["contact"].LastError == "" {
				t.Error("the sync's failure is not recorded")
			}
			h.Sink = base
			h.MustSync(ctx)
		})
	}
}
