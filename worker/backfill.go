package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/pager"
)

// Window bounds a backfill by created_at, both ends inclusive; a zero end is
// open.
type Window struct {
	Since, Until time.Time
}

func (w Window) contains(t time.Time) bool {
	return (w.Since.IsZero() || !t.Before(w.Since)) && (w.Until.IsZero() || !t.After(w.Until))
}

// recordedIn reports whether bf is the progress of a backfill of w. The
// sinks keep progress to the microsecond, while a window may be finer (the
// command's --until reaches to the last nanosecond of its day or second),
// so the bounds are compared as stored.
func (w Window) recordedIn(bf *state.Backfill) bool {
	asStored := func(t time.Time) time.Time { return t.Truncate(time.Microsecond) }
	return asStored(bf.Since).Equal(asStored(w.Since)) && asStored(bf.Until).Equal(asStored(w.Until))
}

// bounds are the walk over the window: newer than Until is skipped, older
// than Since ends it.
func (w Window) bounds() pager.Bounds {
	return pager.Bounds{
		Want: func(at time.Time, _ string) bool { return w.contains(at) },
		Past: func(at time.Time, _ string) bool { return !w.Since.IsZero() && at.Before(w.Since) },
	}
}

// CountWindow counts the submissions of win on the first and last pages a
// dry run of its backfill located (rep), plus the full pages in between:
// the dry run's estimate counts whole pages, so that a window inside one
// page would be a page of submissions. It makes at most two requests,
// through the engine's Source; ok is false when a page cannot be read.
func (e *Engine) CountWindow(ctx context.Context, rep *BackfillReport, win Window) (n int, ok bool) {
	count := func(page int) (int, int, bool) {
		p, _, err := e.src.Page(ctx, rep.FormID, page, e.cfg.PageSize)
		if err != nil {
			return 0, 0, false
		}
		n := 0
		for _, s := range p.Submissions {
			if win.contains(s.CreatedAt) {
				n++
			}
		}
		return n, p.PerPage, true
	}
	// An oldest-first form's window can run from a higher page to a lower.
	lo, hi := min(rep.FirstPage, rep.LastPage), max(rep.FirstPage, rep.LastPage)
	first, perPage, ok := count(lo)
	if !ok || lo == hi {
		return first, ok
	}
	last, _, ok := count(hi)
	if !ok {
		return 0, false
	}
	return first + last + (hi-lo-1)*perPage, true
}

// DefaultCheckpointRows is BackfillOptions.CheckpointRows when zero, but
// for rows keyed by id when Config.PartRows is set below it: then a
// backfill checkpoints every PartRows rows, as a sync commits its parts.
// (A sink that asks for larger parts, BigQuery, asks them of a large
// sync's read; a backfill's checkpoints stay this size, as short as a
// transaction that must win against the syncs' commits had better be.)
//
// Rows keyed by content (the older response form) are keyed by hashes that
// land all over the table, so a checkpoint rewrites pages the one before
// wrote. Into a sink that takes them in key order (Config.SortContentKeys:
// SQLite) a checkpoint of such rows waits, past DefaultCheckpointRows, until
// CheckpointInterval has gone by since the checkpoint before, or it holds
// MaxCheckpointRows: a form read within the interval loads in one commit, as
// a sync loads it, and a checkpoint holds at most that interval's reading
// (or DefaultCheckpointRows rows, if they took longer), which is what an
// interruption before its commit makes a backfill read again.
const DefaultCheckpointRows = 50_000

// CheckpointInterval and MaxCheckpointRows bound a backfill's checkpoint of
// rows keyed by content into a sink that sorts them (see
// DefaultCheckpointRows). MaxCheckpointRows of the older response form
// stage some 725 MB (145 MB measured for 200,000).
const (
	CheckpointInterval = time.Minute
	MaxCheckpointRows  = 1_000_000
)

// BackfillOptions tunes one backfill.
type BackfillOptions struct {
	Window
	// DryRun locates the window's pages and reports what a backfill would
	// read, without reading it or writing anything.
	DryRun bool
	// CheckpointRows is how many staged rows trigger an intermediate commit,
	// which also records how far the backfill got so that an interrupted
	// backfill resumes there. 0 is the default (DefaultCheckpointRows).
	CheckpointRows int
	// Progress, when set, is called after every page.
	Progress func(Progress)
}

// Progress is how far the read of a form got: a backfill's, a sync's or a
// reconcile's.
type Progress struct {
	FormID     string
	Pages      int // pages read so far
	PagesTotal int // pages the read spans (an estimate: the form moves); 0 when not known
	Rows       int // rows staged so far (a backfill), submissions read (a sync, a reconcile)
	Elapsed    time.Duration
	// ETA estimates the time left at the rate so far; 0 when unknown.
	ETA time.Duration
	// Files and FileBytes, in the progress of a run's files phase
	// (Config.Files), count the form's files kept so far and their bytes;
	// such a Progress carries nothing else but FormID and Elapsed.
	Files     int
	FileBytes int64
}

// withTotal is p spanning total pages (0: not known), never fewer than it
// has read, with the ETA at the rate so far.
func (p Progress) withTotal(total int) Progress {
	if total > 0 {
		p.PagesTotal = max(total, p.Pages)
	}
	if p.Pages > 0 && p.PagesTotal > p.Pages {
		p.ETA = time.Duration(float64(p.Elapsed) / float64(p.Pages) * float64(p.PagesTotal-p.Pages))
	}
	return p
}

// BackfillReport says what a backfill did or, for a dry run, would do.
type BackfillReport struct {
	FormID   string
	Order    state.Order
	Inserted int64
	Updated  int64
	Staged   int
	Pages    int // pages read, including those read to locate the window
	Requests int
	// Rescans counts pages read again because the form moved while read.
	Rescans int
	// FirstPage and LastPage are the window's pages as located, in the
	// order they are read; both 0 when the window holds no submission.
	// RowsEstimate is how many submissions they hold, about.
	FirstPage, LastPage int
	RowsEstimate        int
	// RequestsEstimate is how many requests a backfill of the window
	// makes when the form does not move meanwhile: those that located it,
	// which it makes again, and one per page of the window not read then.
	RequestsEstimate int
	Checkpoints      int
	// Conflicts counts checkpoints refused because a sync committed the
	// form meanwhile, merged and committed again.
	Conflicts int
	// ResumedFrom is the cursor an interrupted backfill resumed at.
	ResumedFrom time.Time
	Duration    time.Duration
}

// PagesToRead is how many pages the window spans.
func (r *BackfillReport) PagesToRead() int {
	if r.FirstPage == 0 {
		return 0
	}
	return max(r.FirstPage, r.LastPage) - min(r.FirstPage, r.LastPage) + 1
}

// Backfill re-reads a form, or the window of it, through the same page
// walker and exactly-once commit as Sync: rows are upserted, so nothing is
// duplicated. It never moves the watermark backwards: a backfill of a
// bounded window leaves it alone, and a complete backfill of the whole form
// only moves it forward. Every CheckpointRows rows it commits what it has
// with its progress, reading on while the commit is written; when a
// backfill of the same window was interrupted, it resumes from there.
func (e *Engine) Backfill(ctx context.Context, formID string, opts BackfillOptions) (*BackfillReport, error) {
	if !opts.Since.IsZero() && !opts.Until.IsZero() && opts.Until.Before(opts.Since) {
		return nil, fmt.Errorf("backfill of form %s: until %s is before since %s", formID, opts.Until.Format(time.RFC3339Nano), opts.Since.Format(time.RFC3339Nano))
	}
	st, err := e.formState(ctx, formID)
	if err != nil {
		return nil, err
	}
	b := &backfill{form: e.newRun(st), commits: e.commits, opts: opts}
	b.lastCheckpoint = b.form.start
	b.form.onStaged = b.staged
	rep := &BackfillReport{FormID: formID}
	defer func() {
		rep.Requests = b.form.report.Requests
		rep.Pages = b.form.report.Pages
		rep.Rescans = b.form.report.Rescans
		rep.Duration = e.cfg.Now().Sub(b.form.start)
		b.form.discard()
	}()
	err = b.run(ctx, rep)
	// Checkpoints still being committed when the walk failed are waited
	// for: the backfill resumes after the last that got in.
	if serr := b.settle(rep, 0); err == nil {
		err = serr
	}
	if err != nil {
		return rep, b.form.explain(ctx, err)
	}
	return rep, nil
}

func (e *Engine) formState(ctx context.Context, formID string) (state.Form, error) {
	states, err := e.dst.ReadState(ctx, []string{formID})
	if err != nil {
		return state.Form{}, fmt.Errorf("reading the state of form %s: %w", formID, err)
	}
	if st, ok := states[formID]; ok {
		return st, nil
	}
	return state.New(formID), nil
}

type backfill struct {
	// form is the form's read, as a sync reads it; commits writes the
	// checkpoints.
	form    *formRun
	commits committer
	opts    BackfillOptions
	// cursor is the oldest created_at staged: walks go from newer to
	// older, so an interrupted backfill resumes at it (inclusive,
	// harmlessly).
	cursor time.Time
	// whole is set when the backfill covers the whole form, in one run
	// or resumed over several: then it may move the watermark forward.
	whole bool
	// top and topTotal are the watermark of the newest rows and the
	// lowest total the first run of a whole-form backfill read, carried
	// in its progress (state.Backfill) by the runs that resume it, which
	// read only below its cursor. Zero for a backfill resumed from a
	// progress record that carries none.
	top      state.Watermark
	topTotal int64
	read     int
	// queue are the checkpoints waiting for their commit, or being
	// committed, while the walk reads on; oldest first.
	queue []*pendingCheckpoint
	// lastCheckpoint is when the last checkpoint was queued, or the
	// backfill started.
	lastCheckpoint time.Time
}

func (b *backfill) run(ctx context.Context, rep *BackfillReport) error {
	// A backfill of the whole form rewrites every row it is served under
	// the configured field policy; one of a window would mix two.
	if err := b.form.checkPolicy(b.opts.Since.IsZero() && b.opts.Until.IsZero()); err != nil && !b.opts.DryRun {
		return err
	}
	first, err := b.fetch(ctx, 1)
	if err != nil {
		return err
	}
	if b.form.facts.Order, err = pager.Detect(ctx, b.fetch, first, b.form.old.Order); err != nil {
		return err
	}
	rep.Order = b.form.facts.Order
	win := b.resume(rep)
	from, err := b.plan(ctx, rep, first, win)
	if err != nil {
		return err
	}
	if b.opts.DryRun || rep.FirstPage == 0 && rep.ResumedFrom.IsZero() {
		return nil
	}
	if b.form.spool, err = b.form.newSpool(); err != nil {
		return fmt.Errorf("form %s: %w", b.form.old.FormID, err)
	}
	if rep.FirstPage == 0 {
		// Resumed, and nothing is left below the cursor (the rows there
		// were deleted since): the backfill is complete, and its progress
		// must go, or every later backfill of the window would resume
		// into nothing.
		return b.checkpoint(ctx, rep, true)
	}
	if err := b.walk(ctx, rep, win, from); err != nil {
		return err
	}
	return b.checkpoint(ctx, rep, true)
}

// resume returns the window left to read. The whole form is read to its
// end, even over several runs: its rows are then all under the configured
// field policy. An interrupted backfill of the same window is resumed: it
// got down to its cursor. A whole-form one only under the field policy it
// wrote its rows with: under another, the rows above the cursor would keep
// the old one, so it starts over.
func (b *backfill) resume(rep *BackfillReport) Window {
	win := b.opts.Window
	b.whole = win.Since.IsZero() && win.Until.IsZero()
	bf := b.form.old.Backfill
	if bf == nil || !win.recordedIn(bf) || bf.Cursor.IsZero() || b.whole && bf.FieldPolicy != b.form.policyID() {
		return win
	}
	rep.ResumedFrom = bf.Cursor
	win.Until = bf.Cursor
	if b.whole {
		b.top, b.topTotal = bf.Watermark, bf.Total
	}
	return win
}

// plan locates the window's pages (first is page 1) and fills in the
// report's estimates; it returns where the walk starts.
func (b *backfill) plan(ctx context.Context, rep *BackfillReport, first *formsapi.Page, win Window) (located, error) {
	from, err := b.locate(ctx, first, win.Until, false)
	if err != nil {
		return located{}, err
	}
	end, beyond, err := b.locateEnd(ctx, first, win)
	if err != nil {
		return located{}, err
	}
	rep.FirstPage, rep.LastPage = from.page, end
	if b.forwardWalk() && end < from.page || !b.forwardWalk() && end > from.page {
		rep.LastPage = from.page
	}
	rep.RowsEstimate = rep.PagesToRead() * max(b.form.facts.PerPage, 1)
	// A window on one page that holds none of it is empty, unless the
	// form moved between the readings of that page and of the page
	// before it: a deletion ahead of a newest-first reader then pulled
	// the window off the one onto the other, where neither reading has
	// it. The walk finds it there.
	if first.Total == 0 || b.empty(from.content, win) && rep.FirstPage == rep.LastPage && !from.moved {
		rep.FirstPage, rep.LastPage, rep.RowsEstimate = 0, 0, 0
	}
	rep.RequestsEstimate = b.form.report.Requests
	if rep.FirstPage != 0 {
		rep.RequestsEstimate += rep.PagesToRead()
		if from.content != nil {
			rep.RequestsEstimate-- // the walk starts from it
		}
		if beyond {
			rep.RequestsEstimate++
		}
	}
	return from, nil
}

// locateEnd is the page the walk ends on: the last page of the walk, or
// the one holding the window's oldest. beyond says that the walk reads the
// page after it too: none of the end page lies past the window, so the
// window may go on.
func (b *backfill) locateEnd(ctx context.Context, first *formsapi.Page, win Window) (end int, beyond bool, err error) {
	if win.Since.IsZero() {
		if b.forwardWalk() {
			return max(first.TotalPages, 1), false, nil
		}
		return 1, false, nil
	}
	to, err := b.locate(ctx, first, win.Since, true)
	if err != nil {
		return 0, false, err
	}
	next := to.page - 1
	if b.forwardWalk() {
		next = to.page + 1
	}
	beyond = to.content != nil && next >= 1 && next <= first.TotalPages && !reachesBefore(to.content, win.Since)
	return to.page, beyond, nil
}

// walk reads the window's pages from where plan located its start,
// staging its rows and checkpointing them as they add up.
func (b *backfill) walk(ctx context.Context, rep *BackfillReport, win Window, from located) error {
	w := &pager.Walk[sink.Row]{Form: b.form.old.FormID, Fetch: b.fetch, Decode: b.form.decode, Order: b.form.facts.Order, Bounds: win.bounds(),
		PerPage: b.form.facts.PerPage, Before: from.before}
	return b.form.take(w.From(ctx, from.page, from.content), func(int) error {
		b.read++
		if b.opts.Progress != nil {
			b.opts.Progress(b.progress(rep.PagesToRead()))
		}
		if b.checkpointDue() {
			return b.checkpoint(ctx, rep, false)
		}
		return nil
	})
}

// checkpointDue reports whether the rows staged make a checkpoint (see
// DefaultCheckpointRows).
func (b *backfill) checkpointDue() bool {
	n := b.form.spool.Len()
	switch {
	case b.form.daysDue(b.form.spool):
		return true
	case b.opts.CheckpointRows > 0:
		return n >= b.opts.CheckpointRows
	case !b.form.spool.ByContent() && b.form.partRows > 0:
		return n >= min(b.form.partRows, DefaultCheckpointRows)
	case !b.form.spool.ByContent():
		return n >= DefaultCheckpointRows
	case n < contentCheckpointRows:
		return false
	case !b.form.sortContentKeys:
		return true
	}
	return n >= maxContentCheckpointRows || b.form.now().Sub(b.lastCheckpoint) >= CheckpointInterval
}

// contentCheckpointRows and maxContentCheckpointRows are
// DefaultCheckpointRows and MaxCheckpointRows, smaller in tests.
var (
	contentCheckpointRows    = DefaultCheckpointRows
	maxContentCheckpointRows = MaxCheckpointRows
)

func (b *backfill) forwardWalk() bool { return b.form.facts.Order != state.OrderOldestFirst }

// fetch reads a page of the form, taking in its page size and total: the
// lowest total of the backfill is what it records with the watermark.
func (b *backfill) fetch(ctx context.Context, page int) (*formsapi.Page, error) {
	p, err := b.form.fetch(ctx, page)
	if err != nil {
		return nil, err
	}
	if b.form.facts.Total < 0 || int64(p.Total) < b.form.facts.Total {
		b.form.facts.Total = int64(p.Total)
	}
	if p.PerPage > 0 {
		b.form.facts.PerPage = p.PerPage
	}
	return p, nil
}

// anyStored reports whether a submission on page p has a created_at that,
// as stored (to the microsecond), satisfies f.
func anyStored(p *formsapi.Page, f func(time.Time) bool) bool {
	return slices.ContainsFunc(p.Submissions, func(s formsapi.Submission) bool {
		return f(s.CreatedAt.UTC().Truncate(time.Microsecond))
	})
}

// reachesBefore reports whether a page holds a submission older than t:
// then a walk from newer to older submissions ends on it (pager.Walk).
func reachesBefore(p *formsapi.Page, t time.Time) bool {
	return anyStored(p, func(c time.Time) bool { return c.Before(t) })
}

// empty reports whether a located page holds no submission of the window.
func (b *backfill) empty(p *formsapi.Page, win Window) bool {
	return p != nil && !anyStored(p, win.contains)
}

// staged moves the cursor down to a staged row.
func (b *backfill) staged(row sink.Row) {
	if b.cursor.IsZero() || row.CreatedAt.Before(b.cursor) {
		b.cursor = row.CreatedAt
	}
}

// locate finds, by bisection (about log2(pages) requests), the page where a
// walk from newer to older submissions reaches t. For the start of a walk
// (end false) that is the first page read that holds a submission at or
// older than t; for its end (end true), the page holding the last
// submission at or newer than t. A zero t is the first or last page of the
// walk.
func (b *backfill) locate(ctx context.Context, first *formsapi.Page, t time.Time, end bool) (located, error) {
	n := max(first.TotalPages, 1)
	newestFirst := b.form.facts.Order != state.OrderOldestFirst
	if t.IsZero() || n == 1 || b.form.facts.Order == state.OrderUnknown {
		if newestFirst == !end || n == 1 {
			return located{page: 1, content: first}, nil
		}
		return located{page: n}, nil
	}
	bs := &bisection{fetch: b.fetch, n: n, newestFirst: newestFirst, pages: map[int]*formsapi.Page{1: first}, read: map[int]int{1: 0}}
	firstWhere := func(holds func(oldest, newest time.Time) bool) int { return bs.firstWhere(ctx, holds) }
	var page int
	switch {
	case newestFirst && !end: // the first page reaching t or older
		page = firstWhere(func(oldest, _ time.Time) bool { return !oldest.After(t) })
	case newestFirst && end: // the last page still reaching t or newer
		page = firstWhere(func(_, newest time.Time) bool { return newest.Before(t) }) - 1
	case !end: // oldest first: the last page starting at t or older
		page = firstWhere(func(oldest, _ time.Time) bool { return oldest.After(t) }) - 1
	default: // oldest first: the first page reaching t or newer
		page = firstWhere(func(_, newest time.Time) bool { return !newest.Before(t) })
	}
	if bs.err != nil {
		return located{}, bs.err
	}
	page = min(max(page, 1), n)
	before := page - 1
	if !newestFirst {
		before = page + 1
	}
	at := located{page: page, content: bs.pages[page], before: bs.pages[before]}
	at.moved = at.content != nil && at.before != nil && at.content.Total != at.before.Total
	if at.moved && bs.read[before] > bs.read[page] {
		// The page before was read after this one, and the form moved
		// in between: submissions added ahead of a newest-first reader
		// (deleted ahead of an oldest-first one) moved from the page
		// before, as this one was read, onto this one, as the page
		// before was read; neither reading holds them. The walk reads
		// this page again, after the page before.
		at.content = nil
	}
	return at, nil
}

// bisection is the pages backfill.locate read, by page number, as it
// bisects the n pages of a form.
type bisection struct {
	fetch       func(ctx context.Context, page int) (*formsapi.Page, error)
	n           int
	newestFirst bool
	pages       map[int]*formsapi.Page
	// read is when each page was read: page 1 first, then in the order
	// the bisection read them.
	read map[int]int
	// err is the failed fetch that stopped the bisection.
	err error
}

// ends is page i's oldest and newest created_at, read when it was not;
// ok is false for an empty page or a failed fetch (which stops the
// bisection).
func (bs *bisection) ends(ctx context.Context, i int) (oldest, newest time.Time, ok bool) {
	p, seen := bs.pages[i]
	if !seen && bs.err == nil {
		if p, bs.err = bs.fetch(ctx, i); bs.err == nil {
			bs.pages[i], bs.read[i] = p, len(bs.read)
		}
	}
	if bs.err != nil || len(p.Submissions) == 0 {
		return time.Time{}, time.Time{}, false
	}
	oldest, newest = p.Submissions[len(p.Submissions)-1].CreatedAt, p.Submissions[0].CreatedAt
	if !bs.newestFirst {
		oldest, newest = newest, oldest
	}
	return oldest, newest, true
}

// firstWhere is the first page (1-based; n+1 when none) for which holds
// holds; it is monotonic over the pages in either order.
func (bs *bisection) firstWhere(ctx context.Context, holds func(oldest, newest time.Time) bool) int {
	return 1 + sort.Search(bs.n, func(i int) bool {
		oldest, newest, ok := bs.ends(ctx, i+1)
		return !ok || holds(oldest, newest)
	})
}

// located is a page the bisection of backfill.locate found.
type located struct {
	page int
	// content is the page as the bisection read it, nil when it did not,
	// or when the walk must read it again (see locate).
	content *formsapi.Page
	// before is the page a walk from newer to older submissions reads
	// just before it, as the bisection read it (it reads it for a walk's
	// start, but at page 1), nil when it did not.
	before *formsapi.Page
	// moved reports that the two readings give different totals: the
	// form moved between them.
	moved bool
}

func (b *backfill) progress(total int) Progress {
	p := Progress{FormID: b.form.old.FormID, Pages: b.read, Rows: b.form.report.Staged + b.queuedRows() + b.form.spool.Len(), Elapsed: b.form.now().Sub(b.form.start)}
	return p.withTotal(max(total, b.read))
}

// checkpoint commits the staged rows with the backfill's progress; the final
// one clears the progress and, for a whole-form backfill, moves the
// watermark forward. A sync committing the form meanwhile makes the sink
// refuse it; it is then merged with what the sync wrote and committed again.
func (b *backfill) checkpoint(ctx context.Context, rep *BackfillReport, final bool) error {
	if err := b.form.spool.Finish(); err != nil {
		return fmt.Errorf("form %s: %w", b.form.old.FormID, err)
	}
	// Take in the checkpoints already committed; past maxQueued waiting,
	// wait for the oldest, so that the staged rows on disk stay bounded.
	if err := b.settle(rep, maxQueued); err != nil {
		return err
	}
	now := b.form.now().UTC()
	w := b.writes(rep, now, final)
	p := &pendingCheckpoint{
		spool: b.form.spool, build: w.build, merge: w.merge, syncedAt: now, cursor: b.cursor, final: final,
		base: b.form.old, done: make(chan struct{}),
	}
	var prev *pendingCheckpoint
	if n := len(b.queue); n > 0 {
		prev = b.queue[n-1]
	}
	b.queue = append(b.queue, p)
	b.lastCheckpoint = b.form.now()
	b.form.spool = nil
	// The walk reads on while the checkpoint is committed, after the ones
	// before it.
	go p.run(ctx, b.commits, prev)
	if final {
		return b.settle(rep, 0)
	}
	var err error
	if b.form.spool, err = b.form.newSpool(); err != nil {
		return fmt.Errorf("form %s: %w", b.form.old.FormID, err)
	}
	return nil
}

// writes is what a checkpoint taken now writes: fixed when it is taken,
// while the state it is written over is the one the checkpoint before
// left, known once that one is in (checkpointWrites.build).
func (b *backfill) writes(rep *BackfillReport, now time.Time, final bool) *checkpointWrites {
	next := b.form.next(now)
	w := &checkpointWrites{
		names: next.FieldNames, types: next.FieldTypes.Seen, added: next.FieldTypes.Added, order: b.form.facts.Order,
		wm: b.form.wm.Watermark(), minTotal: b.form.facts.Total,
		copies: b.form.copies, // the walk replaces it, never changes it (Copies.Merge)
		met:    slices.Clone(b.form.met),
		policy: next.FieldPolicy, now: now, final: final, whole: b.whole,
		// Into a form with nothing stored, every row is staged under the
		// configured policy, whatever the window (checkPolicy lets it
		// in): record it with the first rows, or the next sync takes them
		// for rows of the policy the empty state named.
		adopt: b.form.old.Rows == 0 && b.form.old.Deleted == 0,
	}
	if !rep.ResumedFrom.IsZero() {
		// This run read below the cursor only: the top of the form is
		// what the first run read.
		w.wm, w.minTotal = b.top, b.topTotal
	}
	w.progress = &state.Backfill{Since: b.opts.Since, Until: b.opts.Until, Cursor: b.cursor, StartedAt: b.form.start.UTC(), FieldPolicy: b.form.policyID()}
	if b.whole {
		w.progress.Watermark, w.progress.Total = w.wm, w.minTotal
	}
	w.moveWatermark = final && b.whole && (rep.ResumedFrom.IsZero() || !w.wm.IsZero())
	return w
}

// checkpointWrites is what one checkpoint of a backfill writes.
type checkpointWrites struct {
	names    []string
	types    fieldtype.Set
	added    map[string]time.Time
	order    state.Order
	wm       state.Watermark
	minTotal int64
	copies   state.Copies
	met      []string
	progress *state.Backfill
	policy   string
	now      time.Time
	// final is the backfill's last checkpoint, of a whole form when
	// whole; moveWatermark says it moves the watermark forward; adopt
	// that the form had nothing stored, so that its rows take the
	// configured policy.
	final, whole, moveWatermark, adopt bool
}

// build is the state the checkpoint writes over base.
func (w *checkpointWrites) build(st state.Form) state.Form {
	// The base may hold names another process merged in since the
	// backfill read the form's state.
	st = withFields(st, w.names, w.types, w.added)
	st.Forgotten = st.Forgotten.Met(w.met...)
	st.Copies = copiesAfter(st.Copies, w.copies, st.Forgotten)
	if st.Order == state.OrderUnknown {
		st.Order = w.order
	}
	st.Backfill = w.progress
	if w.adopt {
		st.FieldPolicy = w.policy
	}
	if !w.final {
		return st
	}
	st.Backfill = nil
	if w.whole {
		st.FieldPolicy = w.policy
	}
	if w.moveWatermark {
		st.Watermark = st.Watermark.Merge(w.wm)
		if st.Watermark.CreatedAt.Equal(w.wm.CreatedAt) {
			st.LastTotal = w.minTotal
		}
		st.LastSuccessAt, st.LastError = w.now, ""
	}
	return st
}

// merge is the state the checkpoint writes over a state another process
// stored after the one it was built on.
func (w *checkpointWrites) merge(stored, ours state.Form) state.Form {
	if stored.LastReconcileAt.After(ours.LastReconcileAt) {
		// A reconcile committed since the state this checkpoint is
		// built on was read: the copies it counted replace the ones
		// that state named, which may be gone upstream, and only those
		// this backfill's read saw are added (as mergeRuns for a sync).
		ours.Copies = copiesAfter(nil, w.copies, ours.Forgotten)
	}
	out := merged(stored, ours)
	if !w.moveWatermark {
		// A window's rows say nothing of what is loaded beyond it.
		out.Watermark, out.LastTotal = stored.Watermark, stored.LastTotal
		out.LastSuccessAt, out.LastError, out.LastErrorAt = stored.LastSuccessAt, stored.LastError, stored.LastErrorAt
	}
	return out
}

// maxQueued is how many checkpoints a backfill lets wait for their commit
// while it reads on.
const maxQueued = 4

// errEarlierCheckpoint is the error of a checkpoint not committed because
// one before it failed.
var errEarlierCheckpoint = errors.New("an earlier checkpoint was not committed")

// pendingCheckpoint is a backfill checkpoint waiting for its commit or
// being committed.
type pendingCheckpoint struct {
	spool    *sink.Spool
	build    func(base state.Form) state.Form
	merge    func(stored, ours state.Form) state.Form
	syncedAt time.Time
	cursor   time.Time
	final    bool
	// base is the state the first checkpoint is written over; the others
	// are written over the one the checkpoint before them stored.
	base state.Form

	done      chan struct{}
	stored    state.Form // the state committed, at its new revision
	res       sink.Result
	conflicts int
	err       error
}

// run commits p once prev, the checkpoint before it (nil for the first),
// is committed. prev is not kept in p: a chain of them would keep every
// checkpoint taken in, and its spool, alive to the end of the backfill.
func (p *pendingCheckpoint) run(walkCtx context.Context, cm committer, prev *pendingCheckpoint) {
	defer close(p.done)
	// Its rows are read: when the backfill is stopped (a shutdown), the
	// checkpoint still commits, within Config.ShutdownGrace, as a sync
	// commits the forms it read; the backfill then resumes after it.
	ctx, cancel := cm.graceful(walkCtx)
	defer cancel()
	base := p.base
	if prev != nil {
		<-prev.done
		if prev.err != nil {
			p.err = errEarlierCheckpoint
			return
		}
		base = prev.stored
	}
	c := &sink.Commit{SyncedAt: p.syncedAt, Forms: []sink.FormCommit{{State: p.build(base), Rows: p.spool}}}
	p.res, p.conflicts, p.err = cm.commit(ctx, c, p.merge)
	p.stored = c.Forms[0].State
	p.stored.Revision++
}

// queuedRows is how many rows the checkpoints not yet taken in commit.
func (b *backfill) queuedRows() int {
	n := 0
	for _, p := range b.queue {
		n += p.spool.Len()
	}
	return n
}

// settle takes in, oldest first, the checkpoints committed, waiting for
// them while more than keep are queued: keep 0 waits for all. The first
// failure is returned once every checkpoint after it is over too.
func (b *backfill) settle(rep *BackfillReport, keep int) error {
	var failed error
	for len(b.queue) > 0 {
		p := b.queue[0]
		if failed == nil && len(b.queue) <= keep {
			select {
			case <-p.done:
			default:
				return nil
			}
		}
		<-p.done
		b.queue[0] = nil
		b.queue = b.queue[1:]
		p.spool.Remove()
		rep.Conflicts += p.conflicts
		if p.err != nil {
			if failed == nil {
				failed = fmt.Errorf("backfill of form %s: committing %d rows: %w", b.form.old.FormID, p.spool.Len(), p.err)
			}
			continue
		}
		b.form.old = p.stored
		got := p.res[b.form.old.FormID]
		rep.Inserted += got.Inserted
		rep.Updated += got.Updated
		rep.Staged += p.spool.Len()
		b.form.report.Staged += p.spool.Len()
		rep.Checkpoints++
		b.commits.logger.Info("backfill checkpoint", "form", b.form.old.FormID, "rows", p.spool.Len(), "new", got.Inserted, "updated", got.Updated,
			"cursor", p.cursor, "final", p.final)
		b.commits.warnView(b.form.old.FormID, got)
	}
	return failed
}
