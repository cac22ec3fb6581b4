package worker

import (
	"context"
	"fmt"
	"iter"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/pager"
)

// decode makes the pager's item of submission i of page p (rowOf).
func (r *formRun) decode(p *formsapi.Page, i int) (pager.Item[sink.Row], error) {
	row, err := r.rowOf(p.Submissions[i])
	if err != nil {
		return pager.Item[sink.Row]{}, fmt.Errorf("form %s page %d submission %d: %w", r.old.FormID, p.CurrentPage, i+1, err)
	}
	return pager.Item[sink.Row]{Key: row.SubmissionKey, CreatedAt: row.CreatedAt, HasID: row.SubmissionID != nil, Value: row}, nil
}

// take stages what a walk or scan yields, in its order. walked, when set,
// is told of every page the walk read and checked; its error stops the
// walk.
func (r *formRun) take(events iter.Seq2[pager.Event[sink.Row], error], walked func(page int) error) error {
	for ev, err := range events {
		if err != nil {
			return err
		}
		switch ev.Kind {
		case pager.Submission:
			err = r.stage(ev.Item.Value)
		case pager.Copies:
			// A page is one snapshot of the form: a key twice on it is two
			// submissions (copies.go).
			r.copies = r.copies.Merge(ev.Copies)
		case pager.Reread:
			r.report.Rescans++
		case pager.Walked:
			if walked != nil {
				err = walked(ev.Page)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// scan reads what is new in the form (everything when full or when the
// form was never read), then, when the totals say the read missed some,
// everything once more (pager.Scan), and stages it.
func (r *formRun) scan(ctx context.Context, full bool) error {
	sc := &pager.Scan[sink.Row]{
		Form: r.old.FormID, Fetch: r.fetch, Decode: r.decode,
		Stored: r.old.Order, Watermark: r.old.Watermark, LastTotal: r.old.LastTotal, Lookback: r.lookback,
		Full: full, Reconcile: r.mode == readReconcile,
	}
	err := r.take(sc.Events(ctx), nil)
	r.facts = sc.Facts()
	return err
}
