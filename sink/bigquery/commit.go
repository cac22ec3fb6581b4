package bigquery

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// Commit applies c: every form's stored rows listed in Forget are
// removed, its staged rows (less those with a tombstone) are upserted into
// submissions on (form_id, submission_key), the stored rows of a reconciling
// form that were not staged are marked deleted upstream, and every form's
// state is written to sync_state with revision = State.Revision + 1,
// together or not at all. When a form's stored revision is not
// State.Revision (another process committed it since it was read), nothing
// is written and the error is a *sink.ConflictError.
//
// The rows of all forms go to BigQuery in one load job, into a staging
// table of this commit's own, then one multi-statement transaction checks
// the revisions, forgets, merges and reconciles the rows and writes the
// states. A commit with no rows runs no load job and no submissions MERGE;
// unless it forgets or reconciles, only the state transaction. Per-form
// views are (re)created, before the transaction, only for forms whose field
// names changed or whose view is not the one the stored names call for
// (Sink.viewInPlace).
//
// A form whose view could not be made is committed without it, and its
// counts' View says why.
func (s *Sink) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	views := map[string]error{}
	res, err := guardValue(s, ctx, func(ctx context.Context) (sink.Result, error) { return s.commit(ctx, c, views) })
	if err != nil {
		return nil, err
	}
	for id, verr := range views {
		counts := res[id]
		counts.View = verr
		res[id] = counts
	}
	return res, nil
}

// commit is Commit, with the forms whose view could not be made put in
// views. It plans the commit (planCommit), checks the stored revisions,
// makes the views, builds the script's arguments (newCommitArgs), loads
// the staged rows and runs the script.
func (s *Sink) commit(ctx context.Context, c *sink.Commit, views map[string]error) (sink.Result, error) {
	if c == nil || len(c.Forms) == 0 {
		return sink.Result{}, nil
	}
	p, prev, err := s.planChecked(ctx, c)
	if err != nil {
		return nil, err
	}
	syncedAt := c.SyncTime(s.cfg.Now)
	vs := &madeViews{s: s, made: map[string]string{}}
	defer vs.settle()
	if err := s.makeViews(ctx, p.order, prev, p.states, vs.made, views); err != nil {
		return nil, err
	}
	base, err := commitID(s.cfg, syncedAt, c.Forms)
	if err != nil {
		return nil, err
	}
	args, err := newCommitArgs(p, base, syncedAt)
	if err != nil {
		return nil, err
	}
	scr := script{tables: s.t, Rows: p.nRows > 0, Deletions: p.deletions(), TombstonesChanged: len(args.Tombs) > 0}
	if !scr.Rows && !scr.Deletions {
		if _, err := s.transact(ctx, base+"_state", "writing sync state", render("writeState", scr), args.params(scr), p.order, p.states); err != nil {
			return s.appliedAnyway(ctx, base, p.order, err, &vs.committed)
		}
		vs.committed = true
		return noCounts(p.order), nil
	}
	if scr.Rows {
		staging := s.cfg.StagingTable + "_" + base
		defer s.dropStaging(ctx, staging)
		if err := s.load(ctx, base, staging, p.spools); err != nil {
			return nil, err
		}
		scr.Staging = ref(s.cfg.Project, s.cfg.StagingDataset, staging)
	}
	job, err := s.transact(ctx, base+"_txn", "merging staged rows and sync state", render("commit", scr), args.params(scr), p.order, p.states)
	if err != nil {
		res, err := s.appliedAnyway(ctx, base, p.order, err, &vs.committed)
		if vs.committed {
			s.toScrub(p.forget)
		}
		return res, err
	}
	vs.committed = true
	s.toScrub(p.forget)
	return s.commitCounts(ctx, job, base, p.order)
}

// planChecked plans c and reads the stored states of its forms (with
// their largest ids and tombstones, into the plan), checked against the
// revisions the commit carries. Checked here to spare a load job when the
// answer is known already; the transaction checks again, and only that
// check is authoritative.
func (s *Sink) planChecked(ctx context.Context, c *sink.Commit) (*commitPlan, map[string]state.Form, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, fmt.Errorf("bigquery: commit: %w", err)
	}
	p, err := planCommit(c)
	if err != nil {
		return nil, nil, err
	}
	p.maxIDs, p.tombs = storedIDs{}, storedTombstones{}
	prev, err := s.readState(ctx, p.order, p.maxIDs, p.tombs)
	if err != nil {
		return nil, nil, err
	}
	if forms := conflicts(prev, p.order, p.states); len(forms) > 0 {
		return nil, nil, &sink.ConflictError{Forms: forms}
	}
	return p, prev, nil
}

// madeViews are the views a commit made. Views are DDL, outside the
// transaction: one created for a commit that then fails (a conflict with
// another process's commit) may hold other field names than the state
// that ends up stored, so it is known to be in place only once the
// commit succeeds (committed).
type madeViews struct {
	s         *Sink
	made      map[string]string // form id: the view's description
	committed bool
}

// settle records what the commit's end says of the views it made.
func (v *madeViews) settle() {
	for id, desc := range v.made {
		if v.committed {
			v.s.knowView(id, desc)
		} else {
			v.s.forgetView(id)
		}
	}
}

// noCounts is the result of a commit that wrote states only.
func noCounts(order []string) sink.Result {
	res := make(sink.Result, len(order))
	for _, id := range order {
		res[id] = sink.Counts{}
	}
	return res
}

// newCommitArgs are the arguments of the script of the commit p, named
// base.
func newCommitArgs(p *commitPlan, base string, syncedAt time.Time) (commitArgs, error) {
	a := commitArgs{SyncedAt: syncedAt, CommitID: base, States: make([]stateParam, 0, len(p.order)), FormIDs: p.order}
	for _, id := range p.order {
		param, err := newStateParam(p.states[id])
		if err != nil {
			return a, fmt.Errorf("bigquery: encoding state of form %s: %w", id, err)
		}
		a.States = append(a.States, param)
	}
	// The tombstones travel as what changed since the stored revision
	// (the one the transaction checks): the few a forget adds, the
	// pending ones a read met. The others stay in sync_tombstones.
	for _, id := range p.order {
		a.Tombs = append(a.Tombs, tombstoneChanges(id, p.states[id].Forgotten, p.tombs[id])...)
	}
	// The forget looks for its rows only in the partitions of the
	// created_at range they were found in (the revision check keeps them
	// there); a commit that forgets nothing names no partition.
	a.Forget, a.ForgetFrom, a.ForgetTo, a.ReconcileForms = p.forget, p.forgetFrom, p.forgetTo, p.reconcile
	// A reconcile looks for unserved rows over all of time: a stored row
	// outside the range its read covered is unserved too. A commit that
	// only forgets names no partition for it.
	a.ReconcileFrom, a.ReconcileTo = bqMaxTime, bqMinTime
	if len(p.reconcile) > 0 {
		a.ReconcileFrom, a.ReconcileTo = bqMinTime, bqMaxTime
	}
	if p.nRows > 0 {
		a.rowRange(p.order, p.spools, p.maxIDs)
	}
	return a, nil
}

// rowRange sets the created_at ranges the commit's plan compares staged
// rows with.
//
// The plan compares staged rows with the stored rows of the batch's
// created_at range (partition pruning), widened to whole milliseconds (a
// row loaded from the older response form keeps its microseconds, the
// newer form prints milliseconds, so a content-keyed twin may be up to 1
// ms later). A stored row of a staged key outside that range has moved
// its created_at to another millisecond: a later version by definition,
// found by a scan of the forms' key columns only (clustering on form_id
// prunes it to the commit's forms).
//
// That scan is needed only for the forms whose staged ids may be stored:
// a form's max_submission_id bounds its stored ids (the revision check
// makes the one read here the one the transaction sees), so a form whose
// staged ids all exceed it, or whose rows are all keyed by content
// (created_at is in the key), has none outside the range. When no form
// needs it, the outside bounds select no partition at all.
func (a *commitArgs) rowRange(order []string, spools []staged, maxIDs storedIDs) {
	from, to := createdRange(spools)
	a.CreatedFrom, a.CreatedTo = from.Truncate(time.Millisecond), to.Truncate(time.Millisecond).Add(time.Millisecond-time.Microsecond)
	a.OutsideForms = outsideForms(spools, maxIDs)
	a.OutsideBefore, a.OutsideAfter = bqMinTime, bqMaxTime
	if len(a.OutsideForms) > 0 {
		a.OutsideBefore, a.OutsideAfter = a.CreatedFrom, a.CreatedTo
	}
	a.BoundForms = boundForms(order, maxIDs, a.OutsideForms)
}

// commitCounts reads the counts of the committed script job: from its
// last SELECT, else (that read failed) from the states' last_commit.
func (s *Sink) commitCounts(ctx context.Context, job *bq.Job, base string, order []string) (sink.Result, error) {
	var res sink.Result
	err := s.readAll(ctx, "reading commit counts", s.jobResource(job.ID()), job.Read, func() {
		res = noCounts(order)
	}, func(v []bq.Value) error {
		if len(v) != 6 {
			return fmt.Errorf("bigquery: commit counts: got %d columns, want 6", len(v))
		}
		id := vString(v[0])
		if _, ok := res[id]; !ok {
			return fmt.Errorf("bigquery: commit counts: rows of form %q, which is not in the commit", id)
		}
		res[id] = sink.Counts{Inserted: vInt(v[1]), Updated: vInt(v[2]), Restored: vInt(v[3]), Deleted: vInt(v[4]), Forgotten: vInt(v[5])}
		return nil
	})
	if err == nil {
		return res, nil
	}
	// The transaction is committed: the rows and states are in, and the
	// states carry the counts.
	got, lerr := s.lastCommits(ctx, base, order)
	if lerr != nil {
		return nil, fmt.Errorf("bigquery: commit applied but its counts could not be read: %w", errors.Join(err, lerr))
	}
	return allCounts(base, order, got, err)
}

// commitPlan is what a commit writes, gathered from its entries: a form
// listed twice keeps its last state, and its rows, the keys it forgets and
// its reconcile all count.
type commitPlan struct {
	order     []string // form ids, in the order of their first entry
	states    map[string]state.Form
	spools    []staged
	nRows     int
	forget    []forgetParam
	reconcile []string
	// forgetFrom..forgetTo holds the created_at of every stored row
	// forget names: BigQuery's whole range when an entry did not say
	// where its rows are, an empty range (from after to) when nothing is
	// forgotten.
	forgetFrom, forgetTo time.Time
	// maxIDs and tombs are the forms' stored largest ids and tombstones,
	// read with their states (planChecked).
	maxIDs storedIDs
	tombs  storedTombstones
}

// deletions reports whether the commit forgets or reconciles rows.
func (p *commitPlan) deletions() bool { return len(p.forget) > 0 || len(p.reconcile) > 0 }

func planCommit(c *sink.Commit) (*commitPlan, error) {
	p := &commitPlan{order: []string{}, states: map[string]state.Form{}, forget: []forgetParam{}, reconcile: []string{},
		forgetFrom: bqMaxTime, forgetTo: bqMinTime}
	forgetting := map[forgetParam]bool{}
	for _, fc := range c.Forms {
		id := fc.State.FormID
		if _, ok := p.states[id]; !ok {
			p.order = append(p.order, id)
		}
		p.states[id] = fc.State
		if fc.Rows != nil && fc.Rows.Len() > 0 {
			if err := fc.Rows.Finish(); err != nil {
				return nil, fmt.Errorf("bigquery: commit: form %s: %w", id, err)
			}
			sp := staged{form: id, spool: fc.Rows}
			if !fc.State.Forgotten.Empty() {
				sp.forgotten = fc.State.Forgotten
			}
			p.spools = append(p.spools, sp)
			p.nRows += fc.Rows.Len()
		}
		if len(fc.Forget) > 0 {
			from, to := bqMinTime, bqMaxTime
			if !fc.ForgetFrom.IsZero() && !fc.ForgetTo.IsZero() {
				from, to = fc.ForgetFrom.UTC().Truncate(time.Microsecond), fc.ForgetTo.UTC().Truncate(time.Microsecond)
			}
			p.forgetFrom, p.forgetTo = minTime(p.forgetFrom, from), maxTime(p.forgetTo, to)
		}
		for _, k := range fc.Forget {
			if f := (forgetParam{FormID: id, SubmissionKey: k}); !forgetting[f] {
				forgetting[f] = true
				p.forget = append(p.forget, f)
			}
		}
		if fc.Reconcile && !slices.Contains(p.reconcile, id) {
			p.reconcile = append(p.reconcile, id)
		}
	}
	return p, nil
}

// makeViews makes the view of every form of a commit whose view is not the
// one its field names and types call for, and records each one it made in made (its
// description) and each one it could not make in failed. A failure other
// than the commit's end does not stop it: the view is derived from the
// rows, and a view that cannot be made (a table of the user's under its
// name) must not hold them up, nor every other form of the commit. Known
// not to be in place, it is made again at the next commit.
func (s *Sink) makeViews(ctx context.Context, order []string, prev, states map[string]state.Form, made map[string]string, failed map[string]error) error {
	for _, id := range order {
		next := states[id]
		ddl, desc := viewDDL(s.cfg.Project, s.cfg.Dataset, id, next.FieldNames, next.FieldTypes)
		if p, ok := prev[id]; ok && sameView(p, next) {
			in, err := s.viewInPlace(ctx, id, desc)
			if err != nil {
				return err
			}
			if in {
				continue
			}
		}
		if err := s.createView(ctx, id, ddl); err != nil {
			if ctx.Err() != nil {
				return err
			}
			s.forgetView(id)
			failed[id] = &viewError{view: s.viewRef(id), err: err}
			continue
		}
		made[id] = desc
	}
	return nil
}

// appliedAnyway is what Commit returns when the transaction of the commit
// named base ended in err: the commit's counts if its transaction is in
// after all, err otherwise.
//
// BigQuery can end a script's job in error after its COMMIT TRANSACTION
// (the counts SELECT that follows it failed), and runJob then reruns the
// script, whose revision check fails on the revisions the first run moved: a
// conflict with itself. Every state a commit writes carries the commit's
// id and counts in last_commit, so the stored states say whether this
// commit is in, and what it did.
func (s *Sink) appliedAnyway(ctx context.Context, base string, order []string, err error, committed *bool) (sink.Result, error) {
	if ctx.Err() != nil {
		return nil, err
	}
	res, lerr := s.lastCommits(ctx, base, order)
	switch {
	case lerr != nil:
		return nil, errors.Join(err, fmt.Errorf("bigquery: whether the commit went in after all could not be read: %w", lerr))
	case len(res) == 0:
		// No state names the commit: a transaction is all or nothing, so
		// it is not in.
		return nil, err
	}
	*committed = true
	return allCounts(base, order, res, err)
}

// allCounts returns res, the counts of the commit named base read from the
// states' last_commit after reading them from its job failed with err, when
// it has every form's.
func allCounts(base string, order []string, res sink.Result, err error) (sink.Result, error) {
	if len(res) < len(order) {
		missing := slices.DeleteFunc(slices.Clone(order), func(id string) bool { _, ok := res[id]; return ok })
		return nil, fmt.Errorf("bigquery: commit %s applied, but its counts of forms %v were replaced by later commits before they could be read: %w", base, missing, err)
	}
	return res, nil
}

// lastCommits reads the last_commit of the forms' stored states, and
// returns the counts of those written by the commit named base. A
// transaction is all or nothing, so one form written by the commit means
// the commit is in (the others, if any, were written again since).
func (s *Sink) lastCommits(ctx context.Context, base string, order []string) (res sink.Result, err error) {
	type lastCommit struct {
		ID string `json:"id"`
		sink.Counts
	}
	q := s.query(render("readCommits", s.t), bq.QueryParameter{Name: "form_ids", Value: order})
	err = s.readAll(ctx, "reading the last commit of each form", "table "+s.t.State, q.Read, func() {
		res = sink.Result{}
	}, func(v []bq.Value) error {
		if len(v) != 2 {
			return fmt.Errorf("bigquery: reading last commits: got %d columns, want 2", len(v))
		}
		id := vString(v[0])
		var lc lastCommit
		if text := vString(v[1]); text != "" && text != "null" {
			if err := json.Unmarshal([]byte(text), &lc); err != nil {
				return fmt.Errorf("bigquery: last commit of form %s: %w", id, err)
			}
		}
		if lc.ID == base {
			res[id] = lc.Counts
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// forgetParam is one element of the @forget parameter: a stored row to
// remove.
type forgetParam struct {
	FormID        string `bigquery:"form_id"`
	SubmissionKey string `bigquery:"submission_key"`
}

// staged is one form's spool and, when it has any, the tombstones its rows
// are checked against as they are uploaded.
type staged struct {
	form      string
	spool     *sink.Spool
	forgotten *state.Forgotten
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// BigQuery's smallest and largest TIMESTAMP: a filter created_at <
// bqMinTime or created_at > bqMaxTime selects no partition.
var (
	bqMinTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	bqMaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// outsideForms lists the forms of a commit whose staged rows may have a
// stored copy outside the commit's created_at range: those with a staged
// id not above the largest id they may hold (any id, when that is not
// known). Rows without an id are keyed by content, created_at included,
// so their stored copies are in the range.
func outsideForms(spools []staged, maxIDs storedIDs) []string {
	out := []string{}
	for _, sp := range spools {
		id, ok := sp.spool.MinID()
		if !ok || slices.Contains(out, sp.form) {
			continue
		}
		if max, known := maxIDs[sp.form]; !known || id <= max {
			out = append(out, sp.form)
		}
	}
	return out
}

// boundForms lists the forms whose largest stored id the commit's scan of
// their rows finds: all of them when some form is scanned outside the
// batch's range (the scan then covers all of time for every form); else
// those whose bound is known, which the batch can only raise. A form
// whose bound is not known (a dataset of a formsync before it) keeps it
// unknown: the largest id in the batch's range is no bound of the rows
// outside it, and taken for one it would let a moved submission be
// stored twice.
func boundForms(order []string, maxIDs storedIDs, outside []string) []string {
	out := []string{}
	for _, id := range order {
		if _, known := maxIDs[id]; known || len(outside) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// conflicts lists the forms whose stored revision (0 when never stored) is
// not the one their new state carries.
func conflicts(stored map[string]state.Form, order []string, states map[string]state.Form) []string {
	var out []string
	for _, id := range order {
		if stored[id].Revision != states[id].Revision {
			out = append(out, id)
		}
	}
	return out
}

// transact runs a commit's transaction script. When BigQuery cancels it
// for a concurrent update of the same tables (another shard or a backfill
// committing at the same time), it waits (exponential backoff, the pause
// drawn from 0 to twice the interval so that the commits BigQuery
// cancelled together do not come back together),
// re-reads the stored revisions and, unless another process committed one
// of the forms meanwhile (a *sink.ConflictError), runs the script again
// under a new job id: the script plans from the tables as they are then.
// A script whose revision assertion fails is reported as a
// *sink.ConflictError naming the forms whose revision moved.
func (s *Sink) transact(ctx context.Context, base, op, sql string, params []bq.QueryParameter, order []string, states map[string]state.Form) (*bq.Job, error) {
	b := s.backOff()
	b.RandomizationFactor = 1
	// A budget in time, not in runs: a long transaction (a backfill's
	// checkpoint) may lose to short ones many times in a row.
	began := s.cfg.Now()
	var job *bq.Job
	err := s.retryWith(ctx, b, func(run int) error {
		if run > 1 {
			stored, err := s.ReadState(ctx, order)
			if err != nil {
				return backoff.Permanent(err)
			}
			if forms := conflicts(stored, order, states); len(forms) > 0 {
				return backoff.Permanent(&sink.ConflictError{Forms: forms})
			}
			s.rerun.Add(1)
		}
		j, err := s.runStatement(ctx, fmt.Sprintf("%s%d", base, run), op, sql, params)
		switch {
		case err == nil:
			job = j
			return nil
		case isStateConflict(err):
			return backoff.Permanent(s.conflictError(ctx, order, states))
		case !errors.Is(err, ErrConcurrentUpdate):
			return backoff.Permanent(err)
		}
		s.aborted.Add(1)
		if spent := s.cfg.Now().Sub(began); spent >= s.cfg.ConcurrentRetryTime {
			return backoff.Permanent(fmt.Errorf("bigquery: %s: cancelled %d times in %v by concurrent transactions: %w", op, run, spent.Round(time.Second), err))
		}
		return err
	})
	if err != nil && err == ctx.Err() { // ended during a pause
		return nil, fmt.Errorf("bigquery: %s: waiting to retry a cancelled transaction: %w", op, err)
	}
	return job, err
}

// conflictError names the forms whose stored revision moved, read after
// the transaction's assertion failed.
func (s *Sink) conflictError(ctx context.Context, order []string, states map[string]state.Form) error {
	stored, err := s.ReadState(ctx, order)
	forms := conflicts(stored, order, states)
	if err != nil || len(forms) == 0 {
		// The assertion saw a moved revision; name every form rather
		// than none.
		forms = order
	}
	return &sink.ConflictError{Forms: forms}
}

// commitID names a commit's jobs and staging table: a digest of its
// content, for whoever reads the job list, and a random part, so that no
// other call (another process, a retry of the same content by the caller)
// can ever hold the same ids. A 409 on one of these ids therefore always
// answers a job this commit created.
func commitID(cfg Config, syncedAt time.Time, forms []sink.FormCommit) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", cfg.Project, cfg.Dataset, cfg.StagingTable)
	binary.Write(h, binary.BigEndian, syncedAt.UnixMicro())
	for _, fc := range forms {
		n, size := 0, int64(0)
		if fc.Rows != nil {
			n, size = fc.Rows.Len(), fc.Rows.Size()
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", fc.State.FormID, n, size)
	}
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("bigquery: commit id: %w", err)
	}
	return "formsync_" + hex.EncodeToString(h.Sum(nil)[:6]) + hex.EncodeToString(nonce[:]), nil
}

func createdRange(spools []staged) (from, to time.Time) {
	for i, sp := range spools {
		a, b := sp.spool.CreatedRange()
		if i == 0 || a.Before(from) {
			from = a
		}
		if i == 0 || b.After(to) {
			to = b
		}
	}
	return from.UTC(), to.UTC()
}

// load runs the one load job of a commit: every spool, concatenated, into
// the commit's own staging table. The table is created first, expiring
// StagingExpiration from now, whoever made the staging dataset and
// whatever its default expiration (none, if Terraform or the console made
// it): a table left behind by a crash disappears on its own. The client
// never retries an upload from a reader, so runJob's retries are the only
// ones.
func (s *Sink) load(ctx context.Context, base, table string, spools []staged) error {
	res := "table " + s.cfg.Project + "." + s.cfg.StagingDataset + "." + table
	tbl := s.client.Dataset(s.cfg.StagingDataset).Table(table)
	meta := &bq.TableMetadata{
		Schema:         stagingSchema(),
		ExpirationTime: s.cfg.Now().Add(s.cfg.StagingExpiration),
		Description:    "formsync: the rows of one commit, deleted after it",
	}
	if err := s.retry(ctx, func() error {
		err := tbl.Create(ctx, meta)
		if isDuplicate(err) { // made by an attempt whose answer was lost
			err = nil
		}
		return s.scope.classify("creating the staging table", res, err)
	}); err != nil {
		return err
	}
	_, err := s.runJob(ctx, base+"_load", "loading staged rows into "+res, func(id string) (*bq.Job, error) {
		return s.startLoad(ctx, id, table, spools)
	})
	return err
}

func (s *Sink) startLoad(ctx context.Context, id, table string, spools []staged) (*bq.Job, error) {
	readers := make([]io.Reader, 0, len(spools))
	for _, sp := range spools {
		rc, err := sp.spool.Open()
		if err != nil {
			return nil, &spoolError{err}
		}
		defer rc.Close()
		var r io.Reader = rc
		if sp.forgotten != nil {
			r = &tombstoneFilter{r: bufio.NewReaderSize(rc, 64<<10), forgotten: sp.forgotten}
		}
		readers = append(readers, r)
	}
	src := bq.NewReaderSource(spoolReader{&sequencer{r: io.MultiReader(readers...)}})
	src.SourceFormat = bq.JSON
	src.Schema = stagingSchema()
	l := s.client.Dataset(s.cfg.StagingDataset).Table(table).LoaderFrom(src)
	// Into the table load made, which it must not replace (its expiration
	// is metadata a truncating load may drop). A load job is atomic: one
	// that failed left nothing, and one that may have run is attached to
	// (runJob), never run again; should a second load ever reach a
	// loaded table, it fails rather than double the rows.
	l.WriteDisposition = bq.WriteEmpty
	l.CreateDisposition = bq.CreateNever
	l.JobID = id
	l.AddJobIDSuffix = false
	l.Location = s.cfg.Location
	l.JobTimeout = s.cfg.JobTimeout // see runStatement
	if s.cfg.UploadChunkSize > 0 {
		l.MediaOptions = []googleapi.MediaOption{googleapi.ChunkSize(s.cfg.UploadChunkSize)}
	}
	return l.Run(ctx)
}

// dropStagingTimeout bounds the deletion of a commit's staging table.
const dropStagingTimeout = 10 * time.Second

// dropStaging deletes a commit's staging table once the commit is over,
// committed or not: nothing reads it after. A failure (or a run already
// stopped) leaves it to its expiration.
func (s *Sink) dropStaging(ctx context.Context, table string) {
	if ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dropStagingTimeout)
	defer cancel()
	_ = s.client.Dataset(s.cfg.StagingDataset).Table(table).Delete(ctx)
}

// spoolError is a failure to read a commit's staged rows from its local
// spools (a file removed or unreadable, a line that is not an object): not
// BigQuery's, and not one that uploading again would get past.
type spoolError struct{ err error }

func (e *spoolError) Error() string { return "reading the staged rows: " + e.err.Error() }

func (e *spoolError) Unwrap() error { return e.err }

// spoolReader marks its reader's failures as *spoolError, so that the
// upload's error says where it came from however the client wraps it.
type spoolReader struct{ r io.Reader }

func (r spoolReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = &spoolError{err}
	}
	return n, err
}

// runStatement runs one query job (a statement or a script) to completion
// under job ids base_N.
func (s *Sink) runStatement(ctx context.Context, base, op, sql string, params []bq.QueryParameter) (*bq.Job, error) {
	return s.runJob(ctx, base, op, func(id string) (*bq.Job, error) {
		q := s.query(sql, params...)
		q.JobID = id
		q.AddJobIDSuffix = false
		// Bounded by BigQuery itself too (jobTimeoutMs): a transaction
		// whose client died (a pod killed mid-commit) does not run on,
		// holding its tables against every later commit.
		q.JobTimeout = s.cfg.JobTimeout
		return q.Run(ctx)
	})
}

// runJob starts a job with start and waits for it, retrying transient
// failures under job ids base_1, base_2, ...
//
//   - While it is unknown whether BigQuery created the job (the insert
//     failed, possibly after the client's own retries), the same id is sent
//     again; a 409 then means the job exists (ids are unique to the commit,
//     see commitID) and the sink attaches to it.
//   - A job that ran and failed transiently is retried under the next id.
//   - A job whose status cannot be read is never replaced: it may still be
//     running, and a second identical transaction must not start beside
//     it. Polling is retried; when it keeps failing, the commit fails.
func (s *Sink) runJob(ctx context.Context, base, op string, start func(id string) (*bq.Job, error)) (*bq.Job, error) {
	attempt := 1
	var done *bq.Job
	err := s.retry(ctx, func() error {
		id := fmt.Sprintf("%s_%d", base, attempt)
		job, err := start(id)
		if err != nil && isDuplicate(err) {
			job, err = s.client.JobFromIDLocation(ctx, id, s.cfg.Location)
		}
		if err != nil {
			return s.scope.classify(op, s.jobResource(id), err)
		}
		if err := s.waitJob(ctx, job); err != nil {
			var pe *pollError
			if errors.As(err, &pe) {
				return backoff.Permanent(s.scope.classify(op, s.jobResource(id), err))
			}
			cerr := s.scope.classify(op, s.jobResource(id), err)
			if Retryable(cerr) {
				attempt++ // the job ran and failed: job ids are never reused
			}
			return cerr
		}
		done = job
		return nil
	})
	return done, err
}

// sequencer numbers the NDJSON lines it reads: every line, an object,
// starts with "{"seq":N," (N from 1), so that the staging table keeps the
// order of the commit's rows, which a load job does not. Versions of one
// submission within a commit are applied in that order, as the SQLite
// sink applies them. It streams: memory does not grow with the spool.
type sequencer struct {
	r       io.Reader
	n       int64
	pending []byte // the prefix still to emit
	mid     bool   // inside a line
	buf     []byte
}

func (q *sequencer) Read(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		if len(q.pending) > 0 {
			c := copy(p[written:], q.pending)
			q.pending = q.pending[c:]
			written += c
			continue
		}
		if len(q.buf) == 0 {
			if written > 0 {
				return written, nil
			}
			if cap(q.buf) == 0 {
				q.buf = make([]byte, 0, 64<<10)
			}
			n, err := q.r.Read(q.buf[:cap(q.buf)])
			q.buf = q.buf[:n]
			if n == 0 {
				return 0, err
			}
		}
		if !q.mid {
			if q.buf[0] != '{' {
				return written, fmt.Errorf("bigquery: staged NDJSON line %d does not start with an object", q.n+1)
			}
			q.n++
			q.pending = strconv.AppendInt(append(q.pending[:0], `{"seq":`...), q.n, 10)
			q.pending = append(q.pending, ',')
			q.buf = q.buf[1:]
			q.mid = true
			continue
		}
		// Copy up to the end of the line (its '\n' included).
		chunk := q.buf
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
			chunk = chunk[:i+1]
		}
		c := copy(p[written:], chunk)
		written += c
		if c == len(chunk) && chunk[len(chunk)-1] == '\n' {
			q.mid = false
		}
		q.buf = q.buf[c:]
	}
	return written, nil
}

// tombstoneFilter passes on the NDJSON lines of a spool whose submission
// key and content key have no tombstone, and drops the others: a forgotten
// submission is never loaded, even by a commit staged before it was
// forgotten. Only spools of forms with tombstones are read through it.
type tombstoneFilter struct {
	r         *bufio.Reader
	forgotten *state.Forgotten
	line      []byte // a line longer than the reader's buffer, assembled
	pending   []byte // the rest of the line being passed on
	n         int
	err       error
}

func (f *tombstoneFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			f.line = append(f.line[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = f.r.ReadSlice('\n')
				f.line = append(f.line, line...)
			}
			line = f.line
		}
		if err != nil {
			f.err = err
		}
		if len(line) == 0 {
			continue
		}
		f.n++
		var keys struct {
			SubmissionKey string `json:"submission_key"`
			ContentKey    string `json:"content_key"`
		}
		if err := json.Unmarshal(line, &keys); err != nil {
			f.err = fmt.Errorf("bigquery: staged NDJSON line %d: %w", f.n, err)
			return 0, f.err
		}
		if f.forgotten.Has(keys.SubmissionKey) || f.forgotten.Has(keys.ContentKey) {
			continue
		}
		f.pending = line
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}
