package sink

// Removal asks a sink to remove one form from formsync (`formsync
// remove`): its sync state and, with Rows, its stored rows, in one
// transaction that first takes the lock every commit takes and checks the
// form's revision, so that it cannot interleave with a commit of the form.
//
// Tombstones are never removed: a form whose state holds some
// (state.Form.Forgotten) keeps a state of tombstones alone, with nothing
// else of its sync state (no watermark, no error, no backfill), so that a
// submission forgotten on request is not stored again if the form is
// configured again later.
type Removal struct {
	FormID string
	// Revision is the revision of the form's state the removal was
	// decided on (0: the form had no state). When the stored revision is
	// another (a commit of the form came in between), nothing is removed
	// and the error is a *ConflictError.
	Revision int64
	// Rows removes the form's stored rows too, those marked deleted
	// upstream included. Without it they stay in the table.
	Rows bool
	// DryRun changes nothing: the Removed says what would be removed.
	DryRun bool
}

// Removed says what a removal did, or for a dry run would do.
type Removed struct {
	// State reports that the form had a sync state, which is gone, or,
	// with Tombstones, reduced to its tombstones.
	State bool
	// Tombstones reports that the state held tombstones, which stay;
	// Forgotten is how many forgotten submissions they stand for
	// (state.Forgotten.Count).
	Tombstones bool
	Forgotten  int64
	// Rows and Deleted count the form's stored rows: not marked deleted
	// upstream, and marked. They are the rows removed when the removal
	// asked for Rows, and the rows that stay otherwise.
	Rows, Deleted int64
	// View, when not nil, says why the form's view, which shows no row
	// once they are removed, could not be dropped after the removal (a
	// sink whose views are not in its transaction). The removal is done
	// all the same.
	View error
}
