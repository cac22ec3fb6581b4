package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/formsync/formsync/state"
)

// What a sink may do beyond Sink is declared here, once, and found in one
// place: Optional. A consumer never type-checks a sink for an ability
// itself; it asks Optional, which answers errors.ErrUnsupported for an
// ability the sink has not.

// Tuner is a sink that says how it is best written to (Tuning). Both
// SQLite and BigQuery do; a sink that does not gets the engine's plain
// behaviour.
type Tuner interface {
	Tuning() Tuning
}

// Purger is a sink that keeps copies of the rows a commit removed beside
// its data for a while (SQLite's write-ahead log, BigQuery's staging
// tables) and can erase them sooner. The worker purges after every forget,
// and after a forget that found nothing left to remove in a form with
// tombstones, so that running the same forget again finishes an erasure a
// reader held up.
type Purger interface {
	Purge(ctx context.Context) error
}

// ViewChecker is a sink that can tell, from a form's state alone, why the
// form's view cannot be made (BigQuery's limits on a view's text), so that
// status says so without a commit.
type ViewChecker interface {
	ViewProblem(st state.Form) string
}

// Optional finds the optional abilities of a sink: each method calls the
// sink's own when it has it, and returns an error matching
// errors.ErrUnsupported when it has not.
type Optional struct {
	// Sink is the sink asked: a Sink, or the part of one its consumer
	// declares.
	Sink any
}

// Tuning is how the sink is best written to (Tuner).
func (o Optional) Tuning() (Tuning, error) {
	if t, ok := o.Sink.(Tuner); ok {
		return t.Tuning(), nil
	}
	return Tuning{}, o.unsupported("says no tuning")
}

// Purge erases what the sink still keeps of removed rows (Purger).
func (o Optional) Purge(ctx context.Context) error {
	if p, ok := o.Sink.(Purger); ok {
		return p.Purge(ctx)
	}
	return o.unsupported("keeps no copies of removed rows to purge")
}

// ViewProblem says why the form's view cannot be made, "" when it can
// (ViewChecker).
func (o Optional) ViewProblem(st state.Form) (string, error) {
	if v, ok := o.Sink.(ViewChecker); ok {
		return v.ViewProblem(st), nil
	}
	return "", o.unsupported("cannot tell why a view would not be made")
}

func (o Optional) unsupported(what string) error {
	return fmt.Errorf("sink %T %s: %w", o.Sink, what, errors.ErrUnsupported)
}
