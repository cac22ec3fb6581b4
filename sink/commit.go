package sink

import (
	"fmt"
	"time"

	"github.com/formsync/formsync/state"
)

// Commit is what a sink applies atomically: every form's staged rows,
// upserted on (form_id, submission_key), and every form's new state.
//
// A form may be listed more than once: the rows, forgotten keys and
// reconcile of every entry count, and the last entry's State is stored.
// Every entry of one form carries the same State.Revision, the one the
// commit is checked against (Validate).
type Commit struct {
	// SyncedAt is stored as synced_at on every row the commit inserts or
	// changes; the sink's clock when zero.
	SyncedAt time.Time
	Forms    []FormCommit
}

// SyncTime is the synced_at a sink stores for c: SyncedAt, or now() when
// it is zero, in UTC and to the microsecond, as every sink stores times.
func (c *Commit) SyncTime(now func() time.Time) time.Time {
	at := c.SyncedAt
	if at.IsZero() {
		at = now()
	}
	return at.UTC().Truncate(time.Microsecond)
}

// Validate checks what every sink requires of a commit before it writes
// anything: valid states, and one revision for every entry of a form
// (which the sinks would otherwise check against different entries).
func (c *Commit) Validate() error {
	revision := make(map[string]int64, len(c.Forms))
	for _, fc := range c.Forms {
		if err := fc.State.Validate(); err != nil {
			return err
		}
		id := fc.State.FormID
		if rev, seen := revision[id]; seen && rev != fc.State.Revision {
			return fmt.Errorf("form %s is listed with revisions %d and %d: every entry of a form carries the revision it was read at", id, rev, fc.State.Revision)
		}
		revision[id] = fc.State.Revision
	}
	return nil
}

// FormCommit is one form's part of a Commit.
type FormCommit struct {
	// State is written as the form's sync_state row. Rows in it is ignored:
	// the sink keeps that count itself.
	State state.Form
	// Rows holds the staged rows; nil for a state-only update (a form that
	// failed records its error without touching its watermark). A staged
	// row whose submission key or content key has a tombstone in
	// State.Forgotten is skipped: a forgotten submission is never stored
	// again, even by a commit staged before it was forgotten. A stored row
	// that is staged again is served upstream: its deleted_at is cleared.
	Rows *Spool
	// Reconcile makes the commit a reconcile: Rows holds every submission
	// the API serves, and each stored row of the form whose key none of
	// them has (after re-keying) and that is not marked yet gets
	// deleted_at = Commit.SyncedAt. Rows are never deleted by it.
	Reconcile bool
	// Forget lists submission keys whose stored rows are removed, before
	// Rows is applied; the tombstones that keep them out belong in
	// State.Forgotten.
	Forget []string
	// ForgetFrom and ForgetTo, when neither is zero, bound the created_at
	// of every stored row Forget names (the forget has read them; a
	// commit of the form in between moves the revision): a sink may look
	// for them there only. Zero: anywhere.
	ForgetFrom, ForgetTo time.Time
}

// Counts says what a commit did to one form's rows, and whether it could
// make the form's view. As JSON it is what the sinks store in
// sync_state.last_commit (BigQuery's adds the commit's id); View is not
// stored.
type Counts struct {
	// Inserted counts rows that were not stored before.
	Inserted int64 `json:"inserted"`
	// Updated counts stored rows whose is_spam, fields or files changed, or
	// that were re-keyed from a content key to an id.
	Updated int64 `json:"updated"`
	// Restored counts rows marked deleted upstream that were served again
	// (deleted_at cleared), whether or not their content changed too.
	Restored int64 `json:"restored"`
	// Deleted counts rows a reconcile marked deleted upstream.
	Deleted int64 `json:"deleted"`
	// Forgotten counts rows removed by Forget.
	Forgotten int64 `json:"forgotten"`
	// View, when not nil, says why the commit could not make the form's
	// view (something of the user's holds its name). The commit stored
	// the form's rows and state all the same: the view only shows them,
	// and each later commit tries again. The caller tells the user.
	View error `json:"-"`
}

// Add returns the sum of c and o: the counts of two commits of one form.
// View is left out: it is one commit's own.
func (c Counts) Add(o Counts) Counts {
	return Counts{
		Inserted: c.Inserted + o.Inserted, Updated: c.Updated + o.Updated,
		Deleted: c.Deleted + o.Deleted, Restored: c.Restored + o.Restored, Forgotten: c.Forgotten + o.Forgotten,
	}
}

// Result maps each committed form id to its counts.
type Result map[string]Counts
