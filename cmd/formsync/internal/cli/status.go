package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker"
)

// formStatus is one form's line of `formsync status`.
type formStatus struct {
	Form string `json:"form_id"`
	// Account is the form's account in FORMSYNC_FORMS (account:form, with
	// FORMSYNC_API_TOKEN_DIR); "" with a single token.
	Account     string     `json:"account,omitempty"`
	Watermark   *time.Time `json:"watermark,omitempty"`
	WatermarkID int64      `json:"watermark_id,omitempty"`
	Order       string     `json:"order,omitempty"`
	Rows        int64      `json:"rows"`
	// Deleted counts the rows a reconcile found no longer served upstream
	// (kept in the table with deleted_at set); Forgotten the submissions
	// removed on request.
	Deleted   int64 `json:"deleted_upstream"`
	Forgotten int64 `json:"forgotten,omitempty"`
	// Copies counts submissions served a second time with nothing to tell
	// them apart (no id, same created_at and content), stored once.
	Copies          int64      `json:"copies,omitempty"`
	LastReconcileAt *time.Time `json:"last_reconcile_at,omitempty"`
	FieldPolicy     string     `json:"field_policy,omitempty"`
	LastSuccessAt   *time.Time `json:"last_success_at,omitempty"`
	LastErrorAt     *time.Time `json:"last_error_at,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	// LagSeconds is how far the newest loaded submission is behind now
	// (its age), AheadSeconds how far it is ahead of now when the
	// watermark lies in the future (a clock upstream ahead, a hand-edited
	// state): one of the two is set with a watermark. Both come from the
	// times themselves, so that years 1 to 9999 give the true figure.
	LagSeconds   *float64 `json:"lag_seconds,omitempty"`
	AheadSeconds *float64 `json:"ahead_seconds,omitempty"`
	Backfill     bool     `json:"backfill_in_progress,omitempty"`
	// NeverSynced is a form of FORMSYNC_FORMS that has no sync state yet:
	// no run has read it (a form just added, or one whose runs never got
	// to it).
	NeverSynced bool `json:"never_synced,omitempty"`
	// BackfillProgress is where a backfill in progress got to, nil when
	// none is.
	BackfillProgress *backfillProgress `json:"backfill,omitempty"`
	// View is the form's view, Columns its field columns with their
	// types (JSON only: the table has no room for them).
	View    string        `json:"view,omitempty"`
	Columns []view.Column `json:"columns,omitempty"`
	// FieldsAdded are the fields the form gained (after its first rows)
	// since --fields-since, oldest first.
	FieldsAdded []addedField `json:"fields_added,omitempty"`
	// ViewProblem says why the form's view cannot be made, when the sink
	// knows (a BigQuery view beyond BigQuery's limits on its text).
	ViewProblem string `json:"view_problem,omitempty"`
	// Files is where the files the form's stored submissions name stand
	// in the files store (FORMSYNC_FILES_STORE); nil when none names a
	// file, or no store is configured.
	Files *filesStatus `json:"files,omitempty"`
}

// filesStatus is a form's files in the files store.
type filesStatus struct {
	Stored  int64 `json:"stored"`
	Bytes   int64 `json:"bytes"`
	Pending int64 `json:"pending"`
	// Gone counts the files the service had deleted before they could be
	// kept (expired); NotStored every file recorded as not stored, by
	// reason, expired included.
	Gone      int64            `json:"gone"`
	NotStored map[string]int64 `json:"not_stored,omitempty"`
}

// addedField is a field a form gained, and when it was first committed.
type addedField struct {
	Field   string    `json:"field"`
	Type    string    `json:"type"`
	AddedAt time.Time `json:"added_at"`
}

// fieldsAddedSince lists st's fields added at or after since, oldest
// first.
func fieldsAddedSince(st state.Form, since time.Time) []addedField {
	var out []addedField
	for f, at := range st.FieldTypes.Added {
		if !at.Before(since) && slices.Contains(st.FieldNames, f) {
			out = append(out, addedField{Field: f, Type: string(st.FieldTypes.Type(f)), AddedAt: at.UTC()})
		}
	}
	slices.SortFunc(out, func(a, b addedField) int {
		return cmp.Or(a.AddedAt.Compare(b.AddedAt), strings.Compare(a.Field, b.Field))
	})
	return out
}

// parseSince reads --fields-since: a duration back from now (Go's form,
// or whole days as 7d), or a date (2006-01-02) or time (RFC 3339).
func parseSince(s string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 && n <= 365*100 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("--fields-since %q: want a duration back from now (24h, 7d) or a date (2026-11-01) or time (RFC 3339)", s)
}

// backfillProgress is a backfill in progress: its window (nil ends are
// open) and how far down it has committed (nil before its first
// checkpoint). Running the same backfill again resumes there.
type backfillProgress struct {
	Since     *time.Time `json:"since,omitempty"`
	Until     *time.Time `json:"until,omitempty"`
	DownTo    *time.Time `json:"down_to,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func progressOf(b *state.Backfill) *backfillProgress {
	if b == nil {
		return nil
	}
	return &backfillProgress{Since: timeOrNil(b.Since), Until: timeOrNil(b.Until), DownTo: timeOrNil(b.Cursor), StartedAt: timeOrNil(b.StartedAt)}
}

// fmtBackfill is the BACKFILL column: the window and how far down it got.
func fmtBackfill(p *backfillProgress) string {
	if p == nil {
		return "-"
	}
	var window string
	switch {
	case p.Since != nil && p.Until != nil:
		window = fmtTime(p.Since) + ".." + fmtTime(p.Until)
	case p.Since != nil:
		window = "since " + fmtTime(p.Since)
	case p.Until != nil:
		window = "until " + fmtTime(p.Until)
	default:
		window = "whole form"
	}
	if p.DownTo == nil {
		return window + ", no checkpoint yet"
	}
	return window + ", down to " + fmtTime(p.DownTo)
}

func runStatus(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	sinceText := fs.String("fields-since", "7d", "list the fields each form gained since this long ago (24h, 7d) or this date (2026-11-01)")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	now := time.Now().UTC()
	since, err := parseSince(*sinceText, now)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync status: %v\n", err)
		return exitUsage
	}
	if err := e.cfg.Validate(needs("status")); err != nil {
		return configError(e, err)
	}
	dst, err := openReadOnly(ctx, e.cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync status: %v\n", err)
		return exitFailed
	}
	defer dst.Close()
	states, err := dst.ReadState(ctx, nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync status: %v\n", err)
		return exitFailed
	}
	var out []formStatus
	var hidden []string
	for _, st := range states {
		if !shownInStatus(st, e.cfg.Forms) {
			hidden = append(hidden, st.FormID)
			continue
		}
		row := statusOf(st, now)
		row.FieldsAdded = fieldsAddedSince(st, since)
		if problem, err := (sink.Optional{Sink: dst}).ViewProblem(st); err == nil {
			row.ViewProblem = problem
		}
		out = append(out, row)
	}
	slices.Sort(hidden)
	for _, id := range e.cfg.Forms {
		if _, ok := states[id]; !ok && !slices.ContainsFunc(out, func(s formStatus) bool { return s.Form == id }) {
			out = append(out, formStatus{Form: id, NeverSynced: true})
		}
	}
	for i := range out {
		out[i].Account = e.cfg.formAccount[out[i].Form]
	}
	unkept, err := addFileStatus(ctx, e, dst, out)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync status: %v\n", err)
		return exitFailed
	}
	slices.SortFunc(out, func(a, b formStatus) int { return strings.Compare(a.Form, b.Form) })
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if out == nil {
			out = []formStatus{}
		}
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(e.stderr, "formsync status: writing the JSON: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	if len(out) == 0 {
		fmt.Fprintln(e.stdout, "No form has been synced yet.")
		printHidden(e, hidden)
		return exitOK
	}
	printStatusTable(e, out)
	if slices.ContainsFunc(out, func(s formStatus) bool { return s.Watermark != nil }) {
		fmt.Fprintln(e.stdout, "\nLAG is the age of the newest submission loaded (now minus WATERMARK): it grows while a form receives nothing new, right after a good sync too.")
	}
	for _, s := range out {
		if s.ViewProblem != "" {
			fmt.Fprintf(e.stdout, "\nNo view: %s\n", s.ViewProblem)
		}
	}
	printFieldsAdded(e, out, since, *sinceText)
	printFiles(e, out, unkept)
	printHidden(e, hidden)
	return exitOK
}

// addFileStatus puts into out where each form's files stand, when a files
// store is configured. Without one it returns how many stored
// submissions (not deleted upstream) name files, which will expire at the
// service.
func addFileStatus(ctx context.Context, e *env, dst sink.Sink, out []formStatus) (unkept int, err error) {
	keeper, err := sink.Optional{Sink: dst}.FileKeeper()
	if err != nil || len(out) == 0 {
		return 0, nil
	}
	forms := make([]string, len(out))
	for i, s := range out {
		forms[i] = s.Form
	}
	if e.cfg.FilesStore == "" {
		rows, err := keeper.FileRows(ctx, forms, time.Time{})
		if err != nil {
			return 0, fmt.Errorf("reading the stored rows' files: %w", err)
		}
		for _, r := range rows {
			if !r.Deleted {
				unkept++
			}
		}
		return unkept, nil
	}
	counts, err := worker.FileStatus(ctx, keeper, e.cfg.fieldPolicy(), forms)
	if err != nil {
		return 0, err
	}
	for i := range out {
		if c, ok := counts[out[i].Form]; ok {
			out[i].Files = &filesStatus{Stored: c.Stored, Bytes: c.Bytes, Pending: c.Pending, Gone: c.Gone(), NotStored: c.NotStored}
		}
	}
	return 0, nil
}

// printFiles says where the forms' files stand in the files store, or,
// without one, how many stored submissions name files that will expire.
func printFiles(e *env, out []formStatus, unkept int) {
	if unkept > 0 {
		fmt.Fprintf(e.stdout, "\nFiles: %s.\n", filesHint(unkept))
		return
	}
	if !slices.ContainsFunc(out, func(s formStatus) bool { return s.Files != nil }) {
		return
	}
	fmt.Fprintf(e.stdout, "\nFiles in %s:\n", e.cfg.FilesStore)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  FORM\tSTORED\tBYTES\tPENDING\tGONE\tNOT STORED")
	for _, s := range out {
		f := s.Files
		if f == nil {
			continue
		}
		var not []string
		for _, r := range slices.Sorted(maps.Keys(f.NotStored)) {
			if r != sink.FileExpired {
				not = append(not, fmt.Sprintf("%d %s", f.NotStored[r], r))
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%s\n", s.Form, f.Stored, f.Bytes, f.Pending, f.Gone, cmp.Or(strings.Join(not, ", "), "-"))
	}
	tw.Flush()
	fmt.Fprintln(e.stdout, "PENDING files are fetched by the next sync (oldest first); GONE ones the service had deleted (30 days after upload) before a sync could keep them.")
}

// printStatusTable prints the forms' status as a table, with a column for
// the account and one for a backfill in progress only when some form has
// one.
func printStatusTable(e *env, out []formStatus) {
	// A backfill in progress gets a last column, shown only then.
	backfills := slices.ContainsFunc(out, func(s formStatus) bool { return s.BackfillProgress != nil })
	// So does the account, first, when the forms have accounts.
	accounts := slices.ContainsFunc(out, func(s formStatus) bool { return s.Account != "" })
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	head := "FORM\tWATERMARK\tLAG\tROWS\tDELETED UPSTREAM\tLAST RECONCILE\tLAST SUCCESS\tLAST ERROR"
	if backfills {
		head += "\tBACKFILL IN PROGRESS"
	}
	if accounts {
		head = "ACCOUNT\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, s := range out {
		if accounts {
			fmt.Fprintf(tw, "%s\t", cmp.Or(s.Account, "-"))
		}
		success := fmtTime(s.LastSuccessAt)
		if s.NeverSynced {
			success = "not synced yet"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s", s.Form, fmtTime(s.Watermark), fmtLagOf(s), s.Rows, s.Deleted,
			fmtTime(s.LastReconcileAt), success, shorten(s.LastError, 80))
		if backfills {
			fmt.Fprintf(tw, "\t%s", fmtBackfill(s.BackfillProgress))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printFieldsAdded lists the fields the forms gained since since, which
// the flag's text spelt.
func printFieldsAdded(e *env, out []formStatus, since time.Time, text string) {
	if !slices.ContainsFunc(out, func(s formStatus) bool { return len(s.FieldsAdded) > 0 }) {
		return
	}
	fmt.Fprintf(e.stdout, "\nFields added since %s (--fields-since %s): check that FORMSYNC_FIELD_POLICY covers them.\n", since.Format(time.RFC3339), text)
	for _, s := range out {
		for _, f := range s.FieldsAdded {
			fmt.Fprintf(e.stdout, "  %s: %s (%s), %s\n", s.Form, f.Field, f.Type, f.AddedAt.Format(time.RFC3339))
		}
	}
}

// shownInStatus reports whether status lists a stored state: a form of
// FORMSYNC_FORMS, or one whose rows are stored. The state of a form that
// is neither (a mistyped id, since corrected, that only ever failed; a
// form removed without its rows) says nothing about the store, and its
// last error would be read as a current failure. Without FORMSYNC_FORMS
// every state is listed: which forms are configured is not known.
func shownInStatus(st state.Form, configured []string) bool {
	return len(configured) == 0 || slices.Contains(configured, st.FormID) || st.Rows+st.Deleted > 0
}

// printHidden says which states status left out, and how to remove them.
func printHidden(e *env, hidden []string) {
	if len(hidden) == 0 {
		return
	}
	fmt.Fprintf(e.stdout, "\nNot listed: the sync state of %s, not in FORMSYNC_FORMS and holding no rows; 'formsync remove --form ID' removes it.\n",
		strings.Join(hidden, ", "))
}

// openStatusSink opens the sink for reading, creating nothing, so that a
// mistyped path or dataset cannot look like a healthy empty one: a SQLite
// file read-only (no lock is taken, a read-only copy can be read), a
// BigQuery dataset only if formsync has written it.
func openStatusSink(ctx context.Context, cfg Config) (sink.Sink, error) {
	switch cfg.Sink {
	case "sqlite":
		s, err := sqlite.OpenReadOnly(ctx, cfg.SQLitePath)
		if err != nil {
			return nil, fmt.Errorf("opening SQLite database %s: %w", cfg.SQLitePath, err)
		}
		return s, nil
	case "bigquery":
		s, err := bigquery.OpenReadOnly(ctx, cfg.bigQuery())
		if err != nil {
			return nil, fmt.Errorf("opening BigQuery dataset %s.%s: %w", cfg.BQProject, cfg.BQDataset, err)
		}
		return s, nil
	}
	return openSink(ctx, cfg)
}

// noStoreError is why a store cannot be read: no sync ever wrote it (no
// SQLite file at FORMSYNC_SQLITE_PATH, no formsync tables in the BigQuery
// dataset). Its message says where formsync looked.
type noStoreError struct{ error }

// noDatabase is the noStoreError of a missing SQLite file.
func noDatabase(cfg Config) error {
	return noStoreError{fmt.Errorf("no database at FORMSYNC_SQLITE_PATH=%q: check the path (a sync creates the file on its first run)", cfg.SQLitePath)}
}

// openReadOnly opens the store as status reads it (openStatusSink),
// creating and changing nothing; a store no sync wrote is a noStoreError.
func openReadOnly(ctx context.Context, cfg Config) (sink.Sink, error) {
	dst, err := openStatusSink(ctx, cfg)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil, noDatabase(cfg)
	case errors.Is(err, bigquery.ErrNotFound):
		return nil, noStoreError{err}
	}
	return dst, err
}

func statusOf(st state.Form, now time.Time) formStatus {
	s := formStatus{Form: st.FormID, Order: string(st.Order), Rows: st.Rows, LastError: st.LastError, WatermarkID: st.Watermark.ID,
		Backfill: st.Backfill != nil, BackfillProgress: progressOf(st.Backfill)}
	if !st.Watermark.IsZero() {
		w := st.Watermark.CreatedAt
		s.Watermark = &w
		if lag := secondsBetween(w, now); lag >= 0 {
			s.LagSeconds = &lag
		} else {
			ahead := -lag
			s.AheadSeconds = &ahead
		}
	}
	if !st.LastSuccessAt.IsZero() {
		t := st.LastSuccessAt
		s.LastSuccessAt = &t
	}
	if !st.LastErrorAt.IsZero() {
		t := st.LastErrorAt
		s.LastErrorAt = &t
	}
	s.Deleted, s.FieldPolicy = st.Deleted, st.FieldPolicy
	if !st.LastReconcileAt.IsZero() {
		t := st.LastReconcileAt
		s.LastReconcileAt = &t
	}
	if st.Forgotten != nil {
		s.Forgotten = st.Forgotten.Count
	}
	s.Copies = st.Copies.Count()
	s.View, s.Columns = view.Name(st.FormID), view.Columns(st)
	return s
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// secondsBetween is to minus from in seconds, exact to the microsecond
// for any two times of years 1 to 9999, where time.Time.Sub saturates at
// 292 years.
func secondsBetween(from, to time.Time) float64 {
	return float64(to.Unix()-from.Unix()) + float64(to.Nanosecond()-from.Nanosecond())/1e9
}

// fmtLag is the LAG column: the newest submission's age.
func fmtLag(s *float64) string {
	if s == nil {
		return "-"
	}
	return humanSeconds(*s)
}

// fmtLagOf is the LAG column of s: its age, or how far ahead of now a
// watermark in the future is.
func fmtLagOf(s formStatus) string {
	if s.AheadSeconds != nil {
		return humanSeconds(*s.AheadSeconds) + " ahead"
	}
	return fmtLag(s.LagSeconds)
}

func shorten(s string, n int) string {
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
