package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/worker/files"
)

// Files keeps the files that stored submissions name in a store the user
// owns (Config.Files), before the service deletes them. After a run's
// commit, every file of a stored row (not marked deleted) with no final
// copy recorded in the sink (sink.FileKeeper) is fetched into Store,
// oldest row first, since those expire first, and then recorded: a file
// is stored before the record that names it, so a crash leaves at most an
// object no row names yet, which the next run's fetch finds and reuses
// (objects are named by their SHA-256). A file the service no longer has
// is recorded as expired once and never fetched again; one that failed
// after the fetcher's retries is recorded as failed and tried again by
// the next run.
type Files struct {
	// Store is where the bytes go.
	Store FileStore
	// Fetcher brings a file's bytes from its URL into Store; nil for an
	// engine that only forgets (which deletes objects from Store).
	Fetcher FileFetcher
	// Accounts, when forms are read through several accounts ([Accounts]),
	// holds each account's fetcher (which sends that account's token to
	// the API's origin); a form of an account not in it uses Fetcher.
	Accounts map[string]FileFetcher
	// Workers is how many files are fetched at once; Config.Concurrency
	// when zero. The fetcher may bound it further.
	Workers int
	// Scope names the sink (its database) in the store's record of the
	// forms caught up (FilesWindow): several databases may keep their
	// files in one store, each catching up its own rows.
	Scope string
}

// FileStore is the files store as the engine uses it: *files.Store.
type FileStore interface {
	files.Putter
	// Delete removes the object of a digest (forget); a missing one is
	// no error.
	Delete(ctx context.Context, sha string) error
	// Sweep deletes the uploads a crash left half done, older than the
	// given age, and says how many.
	Sweep(ctx context.Context, olderThan time.Duration) (int, error)
	// CaughtUp and MarkCaughtUp keep, in the store, the forms of a scope
	// whose every stored row's files a run has looked at (FilesWindow).
	CaughtUp(ctx context.Context, scope string) (map[string]time.Time, error)
	MarkCaughtUp(ctx context.Context, scope string, forms []string, at time.Time) error
}

// FilesWindow is how far back, by created_at, a run looks for files to
// fetch in a form it has caught up: the service keeps a file 30 days
// after its upload, so a row older than that names a file it has
// deleted, and reading only the newest rows keeps a run's read of the
// sink as small as the rows it can still act on (in BigQuery, the newest
// partitions of submissions). A form's first files phase in a store
// looks at every stored row, oldest first, and marks the form caught up
// in the store once it has been through them all, for its database
// (Files.Scope).
const FilesWindow = 40 * 24 * time.Hour

// sweepAfter is how old an upload left by a crash must be before a files
// phase deletes it: far longer than any fetch under way.
const sweepAfter = 24 * time.Hour

// FileFetcher fetches a file into a store: *files.Fetcher.
type FileFetcher interface {
	Fetch(ctx context.Context, e files.Entry, dst files.Putter) (files.Result, error)
}

var (
	_ FileStore   = (*files.Store)(nil)
	_ FileFetcher = (*files.Fetcher)(nil)
)

// FileCounts says what a run did with one form's files, or what a form's
// files are (FileStatus).
type FileCounts struct {
	// Stored counts files recorded as stored: by this run (a report), or
	// in all (FileStatus). Bytes are theirs; New counts the objects the
	// store did not hold already (a report only).
	Stored, Bytes, New int64
	// Pending counts files with no final copy: not fetched yet, or
	// failed and to be tried again.
	Pending int64
	// NotStored counts the files recorded as not stored, by reason
	// (sink.FileExpired, sink.FileTooLarge, sink.FileRefused,
	// sink.FileDropped, sink.FileFailed).
	NotStored map[string]int64
}

func (c *FileCounts) notStored(reason string) {
	if c.NotStored == nil {
		c.NotStored = map[string]int64{}
	}
	c.NotStored[reason]++
}

// Gone counts the files the service no longer has (expired).
func (c FileCounts) Gone() int64 { return c.NotStored[sink.FileExpired] }

// Any reports whether c counts anything.
func (c FileCounts) Any() bool { return c.Stored+c.Pending > 0 || len(c.NotStored) > 0 }

// fileTask is one file to fetch.
type fileTask struct {
	row   sink.FileRow
	entry files.Entry
	url   string
}

// filePlan is what a form set's files need: the fetches, oldest row
// first, and the copies to record without fetching (dropped by the
// field policy); counts holds, per form, what is recorded already.
type filePlan struct {
	tasks  []fileTask
	record []sink.FileCopy
	counts map[string]*FileCounts
}

// planFiles reads rows (FileKeeper.FileRows) into a plan. A file whose
// input the field policy drops is recorded as dropped, never fetched. An
// entry without a url has nothing to fetch and is not counted.
func planFiles(rows []sink.FileRow, policy FieldPolicy) (filePlan, error) {
	p := filePlan{counts: map[string]*FileCounts{}}
	for _, row := range rows {
		c := p.counts[row.FormID]
		if c == nil {
			c = &FileCounts{}
			p.counts[row.FormID] = c
		}
		copies := make(map[string]sink.FileCopy, len(row.Copies))
		for _, cp := range row.Copies {
			copies[cp.URL] = cp
		}
		entries, err := files.Entries(json.RawMessage(row.Files))
		if err != nil {
			return p, fmt.Errorf("form %s, submission %s: reading its files: %w", row.FormID, row.SubmissionKey, err)
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if e.URL == nil || *e.URL == "" || seen[*e.URL] {
				continue
			}
			url := *e.URL
			seen[url] = true
			cp, recorded := copies[url]
			switch {
			case recorded && cp.Stored():
				c.Stored++
				c.Bytes += cp.Size
				continue
			case recorded && cp.Final():
				c.notStored(cp.Reason)
				continue
			case row.Deleted:
				continue // deleted upstream: its files are gone with it
			}
			if dropped(policy, e.Input) {
				p.record = append(p.record, sink.FileCopy{FormID: row.FormID, SubmissionKey: row.SubmissionKey, URL: url, Reason: sink.FileDropped})
				c.notStored(sink.FileDropped)
				continue
			}
			c.Pending++
			p.tasks = append(p.tasks, fileTask{row: row, entry: e, url: url})
		}
	}
	// Oldest first, across forms: the service deletes files 30 days after
	// upload.
	slices.SortStableFunc(p.tasks, func(a, b fileTask) int { return a.row.CreatedAt.Compare(b.row.CreatedAt) })
	return p, nil
}

// dropped reports whether the field policy drops the input a file came
// in: its bytes are then never fetched.
func dropped(policy FieldPolicy, input *string) bool {
	if policy == nil || input == nil {
		return false
	}
	_, action := policy.RuleFor(*input)
	return action == "drop"
}

// FileStatus says where the files of the given forms stand (every form
// when none is given): stored, pending, not stored and why, per form. It
// reads the sink only; a form without files is absent.
func FileStatus(ctx context.Context, keeper sink.FileKeeper, policy FieldPolicy, formIDs []string) (map[string]FileCounts, error) {
	rows, err := keeper.FileRows(ctx, formIDs, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("reading the stored rows' files: %w", err)
	}
	p, err := planFiles(rows, policy)
	if err != nil {
		return nil, err
	}
	out := make(map[string]FileCounts, len(p.counts))
	for id, c := range p.counts {
		if c.Any() {
			out[id] = *c
		}
	}
	return out, nil
}

// A files phase records its copies recordEvery at a time, or what it has
// once recordAfter has passed since it last recorded: in BigQuery each
// record is a load job (free, but 1,500 a table a day) and a query.
const (
	recordEvery = 2000
	recordAfter = 15 * time.Second
)

// keepFiles is a run's files phase (Config.Files): it fetches the files
// of the forms' stored rows that have no final copy and records them. It
// returns each form's counts; an error says why the phase stopped early
// (the files it recorded by then stay recorded).
func (e *Engine) keepFiles(ctx context.Context, forms []string, pf *prefetcher) (map[string]FileCounts, error) {
	keeper, err := sink.Optional{Sink: e.dst}.FileKeeper()
	if err != nil {
		return nil, err
	}
	started := e.cfg.Now()
	rows, first, err := e.filesToLookAt(ctx, keeper, forms, started)
	if err != nil {
		return nil, err
	}
	plan, err := planFiles(rows, e.cfg.FieldPolicy)
	if err != nil {
		return nil, err
	}
	e.sweepUploads(ctx)
	counts := fileTally{}
	for _, cp := range plan.record {
		counts.of(cp.FormID).notStored(cp.Reason)
	}
	// Every file to fetch is pending until a final copy of it is made.
	for _, t := range plan.tasks {
		counts.of(t.row.FormID).Pending++
	}
	rec := &recorder{keeper: keeper, now: e.cfg.Now, grace: e.cfg.ShutdownGrace, pending: plan.record}
	results := make(chan fileResult)
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	go e.fetchAll(fetchCtx, plan.tasks, results, pf)
	for r := range results {
		if !e.took(ctx, counts, r, started) {
			continue
		}
		if err := rec.add(ctx, *r.copy); err != nil {
			// Recording failed: stop fetching (the objects fetched stay,
			// named by no copy yet, and are reused next time).
			stopFetching()
			for range results {
			}
			counts.unrecorded(rec.pending)
			return counts.freeze(), err
		}
	}
	if err := rec.flush(ctx); err != nil {
		counts.unrecorded(rec.pending)
		return counts.freeze(), err
	}
	if ctx.Err() == nil && len(first) > 0 {
		// Every stored row of these forms has been looked at: from now on
		// their recent rows are enough.
		if err := e.cfg.Files.Store.MarkCaughtUp(ctx, e.cfg.Files.Scope, first, started); err != nil {
			e.cfg.Logger.Warn("could not mark the forms' files caught up; the next sync looks at all their rows again", "error", err.Error())
		}
	}
	return counts.freeze(), nil
}

// sweepUploads deletes the uploads a crash left in the files store.
func (e *Engine) sweepUploads(ctx context.Context) {
	if n, err := e.cfg.Files.Store.Sweep(ctx, sweepAfter); err != nil {
		e.cfg.Logger.Warn("could not delete the uploads a crash left in the files store; the next sync tries again", "error", err.Error())
	} else if n > 0 {
		e.cfg.Logger.Info("deleted uploads a crash left in the files store", "uploads", n)
	}
}

// fileTally is a files phase's counts, by form.
type fileTally map[string]*FileCounts

func (t fileTally) of(form string) *FileCounts {
	c := t[form]
	if c == nil {
		c = &FileCounts{}
		t[form] = c
	}
	return c
}

// unrecorded counts copies that could not be recorded as pending again:
// the next run fetches them (finding their objects stored).
func (t fileTally) unrecorded(copies []sink.FileCopy) {
	for _, cp := range copies {
		c := t.of(cp.FormID)
		if cp.Final() {
			c.Pending++ // a failed file counts as pending already
		}
		if cp.Stored() {
			c.Stored--
			c.Bytes -= cp.Size
			continue
		}
		if c.NotStored[cp.Reason]--; c.NotStored[cp.Reason] == 0 {
			delete(c.NotStored, cp.Reason)
		}
	}
}

func (t fileTally) freeze() map[string]FileCounts {
	out := make(map[string]FileCounts, len(t))
	for k, v := range t {
		out[k] = *v
	}
	return out
}

// took counts a fetch's outcome, logs a file not kept and tells the
// progress; false when there is nothing to record (the file stays
// pending: the store failed or the run is ending, not the file's fault).
func (e *Engine) took(ctx context.Context, counts fileTally, r fileResult, started time.Time) bool {
	form, key := r.task.row.FormID, r.task.row.SubmissionKey
	c := counts.of(form)
	switch {
	case r.copy == nil:
		if r.err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("a file could not be kept; the next sync tries again", "form", form, "submission_key", key, "error", r.err.Error())
		}
		return false
	case r.copy.Stored():
		c.Pending--
		c.Stored++
		c.Bytes += r.copy.Size
		if r.isNew {
			c.New++
		}
		if e.cfg.Progress != nil {
			e.cfg.Progress(Progress{FormID: form, Files: int(c.Stored), FileBytes: c.Bytes, Elapsed: e.cfg.Now().Sub(started)})
		}
	default:
		if r.copy.Final() {
			c.Pending--
		}
		c.notStored(r.copy.Reason)
		e.cfg.Logger.Info("a file is not kept", "form", form, "submission_key", key, "reason", r.copy.Reason, "error", r.err.Error())
	}
	return true
}

// filesToLookAt reads the rows whose files a files phase looks at: every
// stored row of the forms not caught up in the store yet (first), the
// rows of the last FilesWindow of the others.
func (e *Engine) filesToLookAt(ctx context.Context, keeper sink.FileKeeper, forms []string, now time.Time) (rows []sink.FileRow, first []string, err error) {
	caught, err := e.cfg.Files.Store.CaughtUp(ctx, e.cfg.Files.Scope)
	if err != nil {
		// Looking at every row again costs a larger read, nothing more.
		e.cfg.Logger.Warn("could not read which forms' files are caught up; looking at all their rows", "error", err.Error())
		caught = nil
	}
	var recent []string
	for _, f := range forms {
		if _, ok := caught[f]; ok {
			recent = append(recent, f)
		} else {
			first = append(first, f)
		}
	}
	// An empty list of forms reads every form: each read only when it
	// has forms.
	for _, part := range []struct {
		forms []string
		since time.Time
	}{{first, time.Time{}}, {recent, now.Add(-FilesWindow)}} {
		if len(part.forms) == 0 {
			continue
		}
		got, err := keeper.FileRows(ctx, part.forms, part.since)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the stored rows' files: %w", err)
		}
		rows = append(rows, got...)
	}
	return rows, first, nil
}

// fileResult is one fetch's outcome: the copy to record, or nil when the
// file stays pending (err says why).
type fileResult struct {
	task  fileTask
	copy  *sink.FileCopy
	isNew bool
	err   error
}

// fetchAll fetches tasks, Files.Workers at once, in their order, and
// sends each outcome to out, which it closes at the end. A file the
// prefetcher fetched (or is fetching) is taken from it.
func (e *Engine) fetchAll(ctx context.Context, tasks []fileTask, out chan<- fileResult, pf *prefetcher) {
	defer close(out)
	fk := e.cfg.Files
	workers := cmp.Or(fk.Workers, e.cfg.Concurrency)
	next := make(chan fileTask)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for t := range next {
				if r, ok := pf.take(ctx, t); ok {
					out <- r // fetched while the form was read
					continue
				}
				out <- e.fetchOne(ctx, t)
			}
		})
	}
	for _, t := range tasks {
		if ctx.Err() != nil {
			break
		}
		next <- t
	}
	close(next)
	wg.Wait()
}

// fetchOne fetches one file into the store and says what to record.
func (e *Engine) fetchOne(ctx context.Context, t fileTask) fileResult {
	fk := e.cfg.Files
	fetcher := fk.Fetcher
	if f, ok := fk.Accounts[e.account(t.row.FormID)]; ok {
		fetcher = f
	}
	res, err := fetcher.Fetch(ctx, t.entry, fk.Store)
	cp := sink.FileCopy{FormID: t.row.FormID, SubmissionKey: t.row.SubmissionKey, URL: t.url}
	if err == nil {
		cp.SHA256, cp.ObjectURI, cp.Size, cp.ContentType = res.SHA256, res.URI, res.Size, res.ContentType
		cp.StoredAt = e.cfg.Now().UTC().Truncate(time.Microsecond)
		if res.SizeMismatch {
			e.cfg.Logger.Warn("a file's bytes are not the size its submission declares; stored as received",
				"form", t.row.FormID, "submission_key", t.row.SubmissionKey, "declared", derefSize(t.entry.Size), "received", res.Size)
		}
		return fileResult{task: t, copy: &cp, isNew: !res.Existed}
	}
	reason := files.Reason(err)
	if reason == "" {
		return fileResult{task: t, err: err}
	}
	cp.Reason = reason
	return fileResult{task: t, copy: &cp, err: err}
}

func derefSize(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// recorder writes copies to the sink, recordEvery at a time. At the end
// of a run cut short it still records what was fetched, within the grace.
type recorder struct {
	keeper  sink.FileKeeper
	now     func() time.Time
	grace   time.Duration
	pending []sink.FileCopy
	last    time.Time // when it last recorded (or started)
}

func (r *recorder) add(ctx context.Context, cp sink.FileCopy) error {
	r.pending = append(r.pending, cp)
	if r.last.IsZero() {
		r.last = r.now()
	}
	if len(r.pending) < recordEvery && r.now().Sub(r.last) < recordAfter {
		return nil
	}
	return r.flush(ctx)
}

func (r *recorder) flush(ctx context.Context) error {
	if len(r.pending) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		// The run is ending: what was fetched is still recorded, within
		// the grace a commit gets.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.grace)
		defer cancel()
	}
	at := r.now().UTC().Truncate(time.Microsecond)
	for i := range r.pending {
		r.pending[i].RecordedAt = at
	}
	if err := r.keeper.RecordFiles(ctx, r.pending); err != nil {
		return fmt.Errorf("recording %d file copies: %w", len(r.pending), err)
	}
	r.pending, r.last = r.pending[:0], r.now()
	return nil
}

// filesPhase runs keepFiles for a run's forms and puts what it did in rep.
func (e *Engine) filesPhase(ctx context.Context, rep *Report, forms []string, pf *prefetcher) {
	counts, err := e.keepFiles(ctx, forms, pf)
	for i := range rep.Forms {
		rep.Forms[i].Files = counts[rep.Forms[i].FormID]
	}
	if err != nil {
		rep.FilesErr = fmt.Errorf("keeping files: %w", err)
		e.cfg.Logger.Error("files were not all kept; the next sync tries again", "error", rep.FilesErr.Error())
	}
}
