package worker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
)

// A sync that stages more than Config.PartRows rows of a form hands
// them over as a part and goes on reading into a new spool; one goroutine
// commits the parts, in the order they were handed over, while the forms
// are still read, so that the sink's writing overlaps the reading instead
// of following it. A part moves no watermark: it commits rows (and the
// field names they carry) under the form's stored watermark, so an
// interrupted run leaves rows that the next run reads again and finds
// unchanged. The form's last rows and its new watermark are committed with
// the other forms at the end of the run, and only when every part of the
// form was committed. When the run is stopped, the parts queued still
// commit, within Config.ShutdownGrace: a form read to its end needs every
// part in for its final commit.
//
// Rows keyed by content (the older response form, without ids) are not
// committed in parts unless the sink needs every transaction bounded
// (Config.PartsByContent: BigQuery, whose job timeout a first sync of the
// older form would outlast in one commit). Such a part is as safe as any:
// it moves no watermark, and a row keyed by content has no later version
// whose order across parts would matter. Into SQLite it is only slower:
// their keys are hashes, so each part's rows land all over the table's key
// order and every part rewrites pages the parts before it wrote. A first sync of a million such rows into SQLite in parts took
// 0.91x the time of a naive client beside it, in one commit 0.70x
// (BENCHMARKS.md section 8.2). Now that one commit inserts them in key
// order (sink.Spool.RowsByKey), parts of 50,000, each in key order, were
// still no faster: 31.5-31.8 s against 30.9-31.0 s (section 8.3).

// DefaultPartRows is the part size Config.TunedFor gives a sync into a
// sink that commits in parts, SQLite (Config.PartRows). A million-row
// first sync, in process, took 11.3-11.8 s in parts of 10,000, 11.4-11.7 s
// in parts of 50,000 and 14.2-16.2 s in one commit (BENCHMARKS.md section
// 8.2); the smaller part starts writing sooner, and also overlaps the
// reading of forms of 10,000 to 50,000 rows.
const DefaultPartRows = 10_000

// part is rows of one form handed over for an early commit.
type part struct {
	r     *formRun
	spool *sink.Spool
	// names are the form's field names as of the part's last row, types
	// their types.
	names []string
	types fieldtype.Set
	added map[string]time.Time
}

// partResult is what the parts of one form did. It belongs to the
// committing goroutine until partCommitter.wait returns.
type partResult struct {
	// state is the form's state as its last committed part left it (at
	// the revision after it); nil before the first.
	state  *state.Form
	counts sink.Counts
	parts  int
	// err is why a part was not committed; the form's later parts are
	// dropped and its watermark does not move this run.
	err error
}

// partCommitter commits the parts handed to it, one at a time.
type partCommitter struct {
	commits committer
	ctx     context.Context

	mu     sync.Mutex
	queue  []part
	closed bool
	wake   chan struct{}
	done   chan struct{}

	// Written by the committing goroutine, read after wait.
	duration  time.Duration
	conflicts int
}

func (e *Engine) startParts(ctx context.Context) *partCommitter {
	p := &partCommitter{commits: e.commits, ctx: ctx, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go p.loop()
	return p
}

// add queues a part; it never blocks, so that a slow sink does not eat into
// the form's reading budget.
func (p *partCommitter) add(pt part) {
	p.mu.Lock()
	p.queue = append(p.queue, pt)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// wait returns once every part added has been committed or dropped. No
// part may be added after it.
func (p *partCommitter) wait() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
}

func (p *partCommitter) loop() {
	defer close(p.done)
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			<-p.wake
			continue
		}
		pt := p.queue[0]
		p.queue[0] = part{}
		p.queue = p.queue[1:]
		p.mu.Unlock()
		p.commit(pt)
	}
}

// commit writes one part, unless an earlier part of its form failed.
func (p *partCommitter) commit(pt part) {
	r := pt.r
	defer pt.spool.Remove()
	res := &r.parts
	if res.err != nil {
		return
	}
	if err := p.ctx.Err(); err != nil {
		res.err = fmt.Errorf("form %s: %d rows read were not committed: %w", r.old.FormID, pt.spool.Len(), context.Cause(p.ctx))
		return
	}
	st := r.old
	if res.state != nil {
		st = *res.state
	}
	st = withFields(st, pt.names, pt.types, pt.added)
	// The part's rows were staged under the configured field policy,
	// which a first read adopts over a state that records another
	// (checkPolicy): the state must say so from the first part on, or a
	// run stopped after it leaves rows the next sync takes for rows of
	// the other policy.
	st.FieldPolicy = r.policyID()
	now := r.now().UTC()
	c := &sink.Commit{SyncedAt: now, Forms: []sink.FormCommit{{State: st, Rows: pt.spool}}}
	got, conflicts, err := p.commits.commit(p.ctx, c, mergePart)
	p.duration += r.now().Sub(now)
	p.conflicts += conflicts
	if err != nil {
		res.err = fmt.Errorf("form %s: committing %d rows read so far: %w", r.old.FormID, pt.spool.Len(), err)
		return
	}
	committed := c.Forms[0].State
	committed.Revision++
	res.state = &committed
	res.counts = res.counts.Add(got[r.old.FormID])
	res.parts++
	p.commits.logger.Debug("committed part of a form while reading on", "form", r.old.FormID, "rows", pt.spool.Len(),
		"new", got[r.old.FormID].Inserted, "updated", got[r.old.FormID].Updated)
}

// mergePart is the state a part writes over a state another process
// stored after it was read: everything as stored, with the part's field
// names and types and the field policy its rows were staged under. A
// part moves nothing else.
func mergePart(stored, ours state.Form) state.Form {
	out := withFields(stored, ours.FieldNames, ours.FieldTypes.Seen, ours.FieldTypes.Added)
	out.FieldPolicy = ours.FieldPolicy
	return out
}

// partDue reports whether the rows staged in spool make a part: PartRows
// of them (rows keyed by content only with PartsByContent), or rows
// spanning PartDays distinct days, whatever their number (daysDue).
func (rd reading) partDue(spool *sink.Spool) bool {
	if rd.daysDue(spool) {
		return true
	}
	return spool.Len() >= rd.partRows && (!spool.ByContent() || rd.partsByContent)
}

// daysDue reports whether spool's rows span Config.PartDays distinct days
// of created_at: a sink whose one job may write only so many daily
// partitions (BigQuery: 4,000) must get them now, or never commit them.
// Each row adds at most one day, so a part never exceeds PartDays.
func (rd reading) daysDue(spool *sink.Spool) bool {
	return rd.partDays > 0 && spool.Days() >= rd.partDays
}

// spillDays makes room in the run's final commit for a sink whose one job
// may write only so many daily partitions (Config.CommitDays): the forms
// read to their end whose rows would take that commit past limit days,
// counted per form (a bound on the days of their union), hand them to the
// part committer first, largest spread first. Their watermarks still move
// in the final commit alone. A reconcile's rows stay (it has no part
// committer): its commit marks what it did not stage.
func spillDays(runs []*formRun, limit int) {
	var spill []*formRun
	total := 0
	for _, r := range runs {
		if r != nil && r.err == nil && r.partsTo != nil && r.spool != nil {
			spill = append(spill, r)
			total += r.spool.Days()
		}
	}
	slices.SortStableFunc(spill, func(a, b *formRun) int { return cmp.Compare(b.spool.Days(), a.spool.Days()) })
	for _, r := range spill {
		if total <= limit {
			return
		}
		days := r.spool.Days()
		err := r.handOff()
		if err == nil {
			err = r.spool.Finish()
		}
		if err != nil {
			r.err = err
		}
		total -= days
	}
}

// handOff passes the rows staged so far to the part committer and stages
// on into a new spool.
func (r *formRun) handOff() error {
	if err := r.spool.Finish(); err != nil {
		return fmt.Errorf("form %s: %w", r.old.FormID, err)
	}
	next, err := r.newSpool()
	if err != nil {
		return fmt.Errorf("form %s: %w", r.old.FormID, err)
	}
	r.report.Staged += r.spool.Len()
	names := r.fieldNames()
	r.partsTo.add(part{r: r, spool: r.spool, names: names, types: r.fieldTypes(names), added: r.fieldsAdded(names, r.now())})
	r.spool = next
	return nil
}

// settleParts adds what the form's parts did to its report, once every
// part has been committed or dropped. A part that was not committed fails
// the form: its watermark must not move past rows that are not stored.
func (r *formRun) settleParts() {
	if r == nil {
		return
	}
	c := r.parts.counts
	r.report.Inserted += c.Inserted
	r.report.Updated += c.Updated
	r.report.Restored += c.Restored
	r.report.Parts += r.parts.parts
	if r.parts.err != nil && r.err == nil {
		r.err = r.parts.err
	}
}
