package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker/formsapi"
)

// FormReport says what one sync did for one form.
type FormReport struct {
	FormID string
	// Account is the account the form was read through ([Accounts]); ""
	// when the Source reads every form with one token.
	Account  string
	Inserted int64 // rows new to the table
	Updated  int64 // rows changed (a later version) or re-keyed
	// Reconciled is set when the run reconciled the form; Deleted counts
	// the rows it marked deleted upstream, Restored the marked rows that
	// were served again.
	Reconciled        bool
	Deleted, Restored int64
	// ReconcileErr says why a reconcile the sync was due
	// (Config.ReconcileEvery) was not made: the read did not add up. The
	// rows read were committed all the same, without marking deletions.
	ReconcileErr error
	// Forgotten counts submissions served but not stored because they were
	// forgotten on request.
	Forgotten int64
	// Copies counts submissions served on the same page as another with
	// the same created_at millisecond and content and no id (the older
	// response form): stored once, under one content key.
	Copies int64
	Staged int // rows read and handed to the sink
	// Parts counts the commits of rows made while the form was still read
	// (Config.PartRows); its last rows and watermark come after.
	Parts    int
	Pages    int // pages read
	Requests int // HTTP requests, retries included
	Limited  int // requests answered 429
	Rescans  int // pages or passes read again because the form moved while read
	Order    state.Order
	// Total is the API's total for the form as this run saw it (the lowest
	// of its final pass); -1 when the form was not read to the end.
	Total int64
	// Missing is how many submissions the API counts that the sink does not
	// hold after the run (and a full re-read); 0 when complete. It says so
	// only when Checked.
	Missing int64
	// Checked reports that the run compared the rows the sink holds for the
	// form with the API's total (the completeness check): not for a form
	// that failed, nor when the commit failed or a shutdown cut the run
	// short.
	Checked bool
	// Future, TooDeep and NoFields count submissions stored but not
	// trusted: a created_at more than FutureTolerance ahead (it does not
	// move the watermark), fields nested deeper than the sinks can query
	// (stored without them, raw kept), no fields member at all.
	Future, TooDeep, NoFields int
	// Watermark is the form's watermark after the run.
	Watermark state.Watermark
	// Fields is how many field names (view columns) the form has after
	// the run; NewFields those of them this run was the first to see
	// since the form's first rows.
	Fields    int
	NewFields []NewField
	// LastSuccessAt and LastReconcileAt are when the form last synced
	// and was last reconciled before this run, as stored (zero when
	// never): what a failed form's metrics keep showing.
	LastSuccessAt, LastReconcileAt time.Time
	Duration                       time.Duration
	// Files is what the run's files phase did with the form's files
	// (Config.Files); zero without a files store.
	Files FileCounts
	// Err is why the form failed this run; its watermark did not move.
	// An interrupted form (shutdown) has Err wrapping context.Canceled.
	Err error
}

// NewField is a field a form gained: a question added to the form after
// its first rows were stored.
type NewField struct {
	Name string
	// Type is its view column's type as committed.
	Type fieldtype.Type
	// Rule is the field policy's pattern that decides what is stored of
	// it ("" when no rule matches, and it is kept as sent); Action is
	// what that is: "keep" or "hash" (a dropped field is never stored,
	// and so never new).
	Rule, Action string
}

// CatchAll reports whether the field fell to a rule of the field policy
// that matches every name (*), not to one written for it.
func (f NewField) CatchAll() bool { return f.Rule != "" && strings.Trim(f.Rule, "*") == "" }

// Report says what one sync did.
type Report struct {
	Forms    []FormReport
	Duration time.Duration
	// CommitDuration is how long the sink's commits took.
	CommitDuration time.Duration
	// Conflicts counts commits refused because another process committed
	// some of the same forms meanwhile, merged and tried again.
	Conflicts int
	// CommitErr is set when the run's final commit failed: then no form's
	// watermark moved, and of its rows only the parts committed while the
	// forms were read (Config.PartRows) were written.
	CommitErr error
	// Fatal is a failure that ended the run for every form (the API
	// rejected the token): no further request was made.
	Fatal error
	// Rejected holds, by account, the tokens the API rejected when the
	// Source reads forms through several accounts ([Accounts]): each
	// stopped its own account's forms (they failed, watermarks untouched)
	// and no further request was made for them; the other accounts' forms
	// committed.
	Rejected map[string]error
	// FilesErr is why the run's files phase stopped early or did not run
	// (Config.Files): the rows are committed all the same, and the files
	// left pending are fetched by the next run.
	FilesErr error
}

// FileTotals adds up the files phase's counts of every form.
func (r *Report) FileTotals() FileCounts {
	var t FileCounts
	for _, f := range r.Forms {
		t.Stored += f.Files.Stored
		t.Bytes += f.Files.Bytes
		t.New += f.Files.New
		t.Pending += f.Files.Pending
		for reason, n := range f.Files.NotStored {
			if t.NotStored == nil {
				t.NotStored = map[string]int64{}
			}
			t.NotStored[reason] += n
		}
	}
	return t
}

// Failed counts the forms that failed, a failed commit failing them all.
func (r *Report) Failed() int {
	n := 0
	for _, f := range r.Forms {
		if f.Err != nil || r.CommitErr != nil {
			n++
		}
	}
	return n
}

// Err summarises the run's failures; nil when every form succeeded.
func (r *Report) Err() error {
	if r.Fatal != nil {
		return r.Fatal
	}
	if r.CommitErr != nil {
		return r.CommitErr
	}
	var errs []error
	for _, f := range r.Forms {
		if f.Err != nil {
			errs = append(errs, f.Err)
		}
	}
	return errors.Join(errs...)
}

// ErrFormTimeout is matched by the error of a form that did not finish
// within Config.FormTimeout.
var ErrFormTimeout = errors.New("form not read within its time budget")

// IncompleteError says that a form's rows fall short of the API's total
// after a run and a full re-read.
type IncompleteError struct {
	FormID                 string
	Stored, Total, Missing int64
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("form %s is incomplete: the API counts %d submissions, the sink holds %d after a full re-read (%d missing); "+
		"check the form for submissions the API lists but formsync cannot store, and report it", e.FormID, e.Total, e.Stored, e.Missing)
}

// logReport logs a line per form and one for the run, what ("sync" or
// "reconcile") naming it.
func (e *Engine) logReport(what string, rep *Report) {
	done := map[string]string{"sync": "synced", "reconcile": "reconciled"}[what]
	log := e.cfg.Logger
	var inserted, updated int64
	var requests, limited int
	for _, f := range rep.Forms {
		inserted, updated = inserted+f.Inserted, updated+f.Updated
		requests, limited = requests+f.Requests, limited+f.Limited
		logForm(log, rep, f, done)
		logNewFields(log, f)
	}
	attrs := []any{
		slog.Int("forms", len(rep.Forms)), slog.Int("failed", rep.Failed()),
		slog.Int64("new", inserted), slog.Int64("updated", updated),
		slog.Int("requests", requests), slog.Int("rate_limited", limited),
		slog.Float64("duration_seconds", rep.Duration.Seconds()),
	}
	if rep.Conflicts > 0 {
		attrs = append(attrs, slog.Int("commit_conflicts", rep.Conflicts))
	}
	if files := rep.FileTotals(); files.Any() {
		attrs = append(attrs, slog.Int64("files_stored", files.Stored), slog.Int64("file_bytes", files.Bytes),
			slog.Int64("files_pending", files.Pending))
		for _, reason := range slices.Sorted(maps.Keys(files.NotStored)) {
			attrs = append(attrs, slog.Int64("files_"+reason, files.NotStored[reason]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Rejected)) {
		failed := 0
		for _, f := range rep.Forms {
			if f.Account == name && f.Err != nil {
				failed++
			}
		}
		log.Error("the API rejected an account's token: its forms failed, the other accounts' forms went on",
			slog.String("account", name), slog.Int("failed", failed), slog.String("error", rep.Rejected[name].Error()))
	}
	switch {
	case rep.Fatal != nil:
		log.Error(what+" stopped", append(attrs, slog.String("error", rep.Fatal.Error()))...)
	case rep.CommitErr != nil:
		log.Error(what+" failed", append(attrs, slog.String("error", rep.CommitErr.Error()))...)
	case rep.Failed() > 0:
		// Said at WARNING so that a filter on severity sees a run in
		// which forms failed without reading every form's line.
		log.Warn(what+" finished", attrs...)
	default:
		log.Info(what+" finished", attrs...)
	}
}

// logForm logs the line of form f of the run rep, at the level its
// outcome calls for; done says what a form that succeeded was ("synced").
func logForm(log *slog.Logger, rep *Report, f FormReport, done string) {
	attrs := formAttrs(f)
	err := cmp.Or(f.Err, rep.CommitErr)
	switch {
	case rep.Fatal != nil && errors.Is(err, formsapi.ErrUnauthorized):
		// Said once, by logReport, for the whole run.
		log.Debug("form not read: the run stopped", append(attrs, slog.String("error", err.Error()))...)
	case rep.Rejected[f.Account] != nil && errors.Is(err, formsapi.ErrUnauthorized):
		// Said once, by logReport, for the account.
		log.Debug("form not read: its account's token was rejected", append(attrs, slog.String("error", err.Error()))...)
	case err != nil && interrupted(err):
		log.Warn("form interrupted before it was read completely; it will be read again next run", attrs...)
	case err != nil:
		log.Error("form failed", append(attrs, slog.String("error", err.Error()))...)
	case f.Future+f.TooDeep+f.NoFields > 0:
		log.Warn("form "+done+"; some submissions are stored but not trusted (see the counts)", attrs...)
	default:
		log.Info("form "+done, attrs...)
	}
}

// logNewFields says, once per field, that the form gained it: on forms a
// new question is often personal data that the field policy does not
// name yet.
func logNewFields(log *slog.Logger, f FormReport) {
	for _, nf := range f.NewFields {
		attrs := []any{slog.String("form", f.FormID), slog.String("field", nf.Name), slog.String("type", string(nf.Type)),
			slog.String("policy_action", nf.Action), slog.String("policy_rule", nf.Rule)}
		switch {
		case nf.Rule == "":
			log.Warn("the form gained a field; no field policy rule names it, so its values are stored as sent (FORMSYNC_FIELD_POLICY)", attrs...)
		case nf.CatchAll():
			log.Warn("the form gained a field; it fell to the field policy's catch-all rule: classify it (FORMSYNC_FIELD_POLICY)", attrs...)
		default:
			log.Info("the form gained a field; a field policy rule covers it", attrs...)
		}
	}
}

// formAttrs are the attributes of a form's log line: its counts, those
// that are mostly 0 only when they are not.
func formAttrs(f FormReport) []any {
	attrs := []any{slog.String("form", f.FormID)}
	if f.Account != "" {
		attrs = append(attrs, slog.String("account", f.Account))
	}
	attrs = append(attrs,
		slog.Int64("new", f.Inserted), slog.Int64("updated", f.Updated),
		slog.Int("staged", f.Staged), slog.Int("pages", f.Pages),
		slog.Int("requests", f.Requests), slog.Int("rate_limited", f.Limited),
		slog.Int("rescans", f.Rescans), slog.String("order", string(f.Order)),
		slog.Float64("duration_seconds", f.Duration.Seconds()),
	)
	if f.Reconciled {
		attrs = append(attrs, slog.Bool("reconciled", true), slog.Int64("deleted_upstream", f.Deleted))
	}
	for _, n := range []struct {
		key string
		v   int64
	}{{"restored", f.Restored}, {"forgotten_skipped", f.Forgotten}, {"copies", f.Copies}} {
		if n.v > 0 {
			attrs = append(attrs, slog.Int64(n.key, n.v))
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"future_created_at", f.Future}, {"nested_too_deep", f.TooDeep}, {"without_fields", f.NoFields}, {"parts", f.Parts}} {
		if n.v > 0 {
			attrs = append(attrs, slog.Int(n.key, n.v))
		}
	}
	return attrs
}
