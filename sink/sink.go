package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/formsync/formsync/state"
)

// Sink is a formsync destination: it keeps the submissions and every form's
// sync state, and applies a Commit all at once or not at all. This is what
// every sink must do, the whole contract that sinktest checks and the
// commands open; the engine declares the part of it that it uses
// (worker.Sink). What a sink may do beyond it is in optional.go (Optional).
type Sink interface {
	// ReadState returns the stored state of the given forms (every form
	// when formIDs is empty). A form never committed is absent.
	ReadState(ctx context.Context, formIDs []string) (map[string]state.Form, error)
	// Commit applies c atomically. When a form's stored revision is not
	// the revision its State carries (another process committed it since
	// it was read) nothing is written and the error is a *ConflictError.
	Commit(ctx context.Context, c *Commit) (Result, error)
	// Find returns the stored rows of a form that m selects, deleted ones
	// included, ordered by created_at then submission key.
	Find(ctx context.Context, formID string, m Match) ([]Row, error)
	// Remove removes one form from formsync (`formsync remove`): its sync
	// state and, with Rows, its stored rows (see Removal).
	Remove(ctx context.Context, r Removal) (Removed, error)
	// Recount counts the stored rows of the given forms anew into their
	// state's row_count and deleted_count. A sink keeps those counters
	// commit by commit from the stored state: a state row deleted by hand
	// while the rows stayed, or a counter changed by hand, leaves a count
	// the rows do not bear out, which the engine's completeness check
	// would blame on the API. A form without state gets none.
	Recount(ctx context.Context, formIDs []string) error
	// Close releases the sink's resources.
	Close() error
}

// ErrStateConflict is matched (errors.Is) by a *ConflictError.
var ErrStateConflict = errors.New("sync state changed since it was read")

// ConflictError says that a commit was refused because the stored state of
// some of its forms moved on since the committer read it: another process
// (a backfill beside a sync, a second shard) committed those forms first.
// Nothing of the commit was written; re-read the state, merge and retry.
type ConflictError struct {
	// Forms are the form ids whose stored revision differed.
	Forms []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("commit refused: the sync state of form %s changed since it was read (another formsync committed it)", strings.Join(e.Forms, ", "))
}

// Is makes errors.Is(err, ErrStateConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrStateConflict }
