package sink

import (
	"time"

	"github.com/formsync/formsync/state"
)

// Commit is what a sink applies atomically: every form's staged rows,
// upserted on (form_id, submission_key), and every form's new state.
type Commit struct {
	// SyncedAt is stored as synced_at on every row the commit inserts or
	// changes.
	SyncedAt time.Time
	Forms    []FormCommit
}

// FormCommit is one form's part of a Commit.
type FormCommit struct {
	// State is written as the form's sync_state row. Rows in it is ignored:
	// the sink keeps that count itself.
	State state.Form
	// Rows holds the staged rows; nil for a state-only update (a form that
	// failed records its error without touching its watermark).
	Rows *Spool
}

// Counts says what a commit did to one form's rows.
type Counts struct {
	// Inserted counts rows that were not stored before.
	Inserted int64
	// Updated counts stored rows whose is_spam, fields or files changed, or
	// that were re-keyed from a content key to an id.
	Updated int64
}

// Result maps each committed form id to its counts.
type Result map[string]Counts
