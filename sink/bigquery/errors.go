package bigquery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
)

// Error kinds callers branch on with errors.Is. Every error the sink returns
// for a BigQuery failure is an *Error that matches exactly one of them.
var (
	// ErrRetryable: a transient failure (backendError, internalError,
	// rateLimitExceeded, a 5xx, a lost connection). The sink has already
	// retried it a bounded number of times; the next run will try again.
	ErrRetryable = errors.New("bigquery: transient failure")
	// ErrInvalid: BigQuery refused a request or a job (invalid,
	// invalidQuery, a staged row the table's schema does not accept).
	// Retrying the same input fails the same way.
	ErrInvalid = errors.New("bigquery: invalid request")
	// ErrQuotaExceeded: a BigQuery quota (not a rate limit) is used up,
	// e.g. load jobs per table per day.
	ErrQuotaExceeded = errors.New("bigquery: quota exceeded")
	// ErrAccessDenied: the credentials lack a permission.
	ErrAccessDenied = errors.New("bigquery: access denied")
	// ErrNotFound: a dataset, table or job is missing.
	ErrNotFound = errors.New("bigquery: not found")
	// ErrDuplicate: something that must be new already exists (a job id
	// reused outside the sink's own retry).
	ErrDuplicate = errors.New("bigquery: already exists")
	// ErrConcurrentUpdate: BigQuery cancelled a transaction because
	// another transaction was mutating the same table ("Transaction is
	// aborted due to concurrent update against table ..." or "Could not
	// serialize access to table ... due to concurrent update"). Commit retries
	// it itself (Config.ConcurrentRetryTime); it reaches a caller only
	// when that time is spent.
	ErrConcurrentUpdate = errors.New("bigquery: transaction cancelled by a concurrent update")
	// ErrOlderSchema: OpenReadOnly found tables of a formsync older than
	// the one before this, without columns it reads (Open adds them).
	ErrOlderSchema = errors.New("bigquery: tables written by an older formsync")
)

// Error is a classified BigQuery failure. Its message names what failed
// (a table or a job) and says what to do about it.
type Error struct {
	// Op is what the sink was doing, e.g. "loading the staging table".
	Op string
	// Resource names the table, dataset or job concerned.
	Resource string
	// Kind is one of the Err* sentinels above.
	Kind error
	// Reason is BigQuery's error reason ("backendError", "invalid", ...),
	// Code the HTTP status when there was one.
	Reason string
	Code   int
	// Hint says what a user can do.
	Hint string
	Err  error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("bigquery: %s (%s): %v", e.Op, e.Resource, e.Err)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRetryable) and the like work.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Retryable reports whether err is worth trying again.
func Retryable(err error) bool { return errors.Is(err, ErrRetryable) }

// errorScope is what classify needs to write a useful hint.
type errorScope struct {
	Project, Dataset, StagingDataset string
	// Endpoint is Config.Endpoint: a server that is not Google's, which a
	// resource not found may also come from.
	Endpoint string
}

// classify wraps err, from the client or from a job's status, into an
// *Error. Context errors pass through unchanged: the caller gave up.
func (sc errorScope) classify(op, resource string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("bigquery: %s (%s): %w", op, resource, err)
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	// A local file's error is no BigQuery failure (and an OS error
	// passes for a net.Error, which kindOf takes for a transport one).
	var spool *spoolError
	if errors.As(err, &spool) {
		return fmt.Errorf("bigquery: %s (%s): %w", op, resource, err)
	}
	e := &Error{Op: op, Resource: resource, Err: err}
	var gerr *googleapi.Error
	var jerr *bq.Error
	switch {
	case errors.As(err, &gerr):
		e.Code = gerr.Code
		if len(gerr.Errors) > 0 {
			e.Reason = gerr.Errors[0].Reason
		}
	case errors.As(err, &jerr):
		e.Reason = jerr.Reason
	}
	e.Kind = kindOf(e.Reason, e.Code, err)
	if isConcurrentUpdate(e.Reason, err) {
		e.Kind = ErrConcurrentUpdate
	}
	var timeout *jobTimeoutError
	if errors.As(err, &timeout) {
		// Still running, not failed: the next run tries again and its
		// revision check sees whatever the job went on to commit before
		// the cancellation took.
		e.Kind = ErrRetryable
		e.Hint = "BigQuery had not finished the job within FORMSYNC_BQ_JOB_TIMEOUT (queued behind other jobs on the same tables, or short of slots); it may still complete before it stops, else this commit stored nothing (parts committed before it stay) and the next run reads its rows again: raise FORMSYNC_BQ_JOB_TIMEOUT, or lower FORMSYNC_BQ_PART_ROWS so that a large read commits in smaller parts"
		return e
	}
	switch e.Kind {
	case ErrAccessDenied:
		e.Hint = fmt.Sprintf("grant roles/bigquery.dataEditor on dataset %s%s and roles/bigquery.jobUser on project %s to the service account formsync runs as", sc.Dataset, sc.alsoStaging(), sc.Project)
	case ErrNotFound:
		e.Hint = fmt.Sprintf("check FORMSYNC_BQ_PROJECT (%s), FORMSYNC_BQ_DATASET (%s)%s and FORMSYNC_BQ_LOCATION; formsync creates missing tables when it starts", sc.Project, sc.Dataset, sc.endpointNamed())
	case ErrQuotaExceeded:
		e.Hint = "a BigQuery quota is used up (e.g. 1,500 load jobs per table per day): run less often or raise the quota; the next run after the reset catches up"
	case ErrInvalid:
		e.Hint = "BigQuery refused the request; this is a formsync bug or a table changed by hand: report it with this message"
		if e.Reason == "resourcesExceeded" {
			// The commit's MERGE grows with the rows of one commit.
			e.Hint = "BigQuery ran out of resources for the commit, which grows with the rows it carries: lower FORMSYNC_BQ_PART_ROWS, so that a large read commits in smaller parts, or load a large form with `formsync backfill --form ID`, whose checkpoints commit --checkpoint-rows rows at a time (fewer if this recurs), and let the syncs carry on from there"
		}
	case ErrRetryable:
		e.Hint = "a transient BigQuery failure; the next run retries it"
	case ErrDuplicate:
		e.Hint = "a job with this id already exists"
	case ErrConcurrentUpdate:
		e.Hint = "other formsync processes (shards, a backfill) kept committing at the same time; the next run retries"
	}
	return e
}

// viewError is why a commit could not make a form's view; the commit
// stores the form's rows without it, and reports it in the form's
// sink.Counts.View.
type viewError struct {
	view string
	err  error
}

func (e *viewError) Error() string {
	var long *viewTooLongError
	if errors.As(e.err, &long) {
		return fmt.Sprintf("view %s cannot be made: %v", e.view, long)
	}
	return fmt.Sprintf("view %s cannot be made: %s; if a table of yours has that name, rename it, and the next commit makes the view", e.view, withoutHint(e.err))
}

// viewTooLongError is why the view of a form is not made: its text is
// beyond BigQuery's limits (viewTooLong). The form's rows stay in
// submissions, its fields in fields.
type viewTooLongError struct {
	form string
	err  error
}

func (e *viewTooLongError) Error() string {
	return fmt.Sprintf("form %s: %v; its rows are stored all the same, and its fields can be read from submissions.fields (JSON_VALUE(fields['name']))", e.form, e.err)
}

func (e *viewTooLongError) Unwrap() error { return e.err }

func (e *viewError) Unwrap() error { return e.err }

// withoutHint is err's message for a caller that says itself what to do
// about it: the operation and BigQuery's answer, without the hint that
// classify added (which a wrapping error may have copied into its text).
func withoutHint(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return fmt.Sprintf("bigquery: %s (%s): %v", e.Op, e.Resource, e.Err)
	}
	return err.Error()
}

// endpointNamed names the endpoint among the settings to check, when one
// is set.
func (sc errorScope) endpointNamed() string {
	if sc.Endpoint == "" {
		return ""
	}
	return ", FORMSYNC_BQ_ENDPOINT (" + sc.Endpoint + ")"
}

func (sc errorScope) alsoStaging() string {
	if sc.StagingDataset == "" {
		return ""
	}
	return " (and on its staging dataset " + sc.StagingDataset + ")"
}

func kindOf(reason string, code int, err error) error {
	switch reason {
	case "backendError", "internalError", "rateLimitExceeded", "jobRateLimitExceeded", "jobBackendError", "jobInternalError":
		return ErrRetryable
	case "stopped", "timeout":
		// The job was cancelled or ran out of time: the commit did not
		// happen (a transaction rolls back), and running it again is the
		// remedy, not a report of a formsync bug.
		return ErrRetryable
	case "invalid", "invalidQuery", "resourcesExceeded", "responseTooLarge", "tableUnavailable":
		if reason == "tableUnavailable" {
			return ErrRetryable
		}
		return ErrInvalid
	case "quotaExceeded", "billingNotEnabled", "billingTierLimitExceeded":
		return ErrQuotaExceeded
	case "accessDenied", "notAuthorized", "authError":
		return ErrAccessDenied
	case "notFound":
		return ErrNotFound
	case "duplicate":
		return ErrDuplicate
	}
	switch {
	case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		return ErrRetryable
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return ErrAccessDenied
	case code == http.StatusNotFound:
		return ErrNotFound
	case code == http.StatusConflict:
		return ErrDuplicate
	case code >= 400:
		return ErrInvalid
	}
	// No status: a transport failure.
	var uerr *url.Error
	var nerr net.Error
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &uerr) || errors.As(err, &nerr) {
		return ErrRetryable
	}
	return ErrInvalid
}

// isDuplicate reports a 409 duplicate: the job id exists already.
func isDuplicate(err error) bool {
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) {
		return false
	}
	if gerr.Code == http.StatusConflict {
		return true
	}
	for _, e := range gerr.Errors {
		if e.Reason == "duplicate" {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	var gerr *googleapi.Error
	return errors.As(err, &gerr) && gerr.Code == http.StatusNotFound
}

// concurrentUpdateText is the stable part of the error BigQuery ends a
// transaction with when another transaction mutates the same table:
// "Transaction is aborted due to concurrent update against table
// p:d.t. Transaction ID: ..." (reason invalidQuery). BigQuery gives this
// failure no reason of its own: invalidQuery is also what a genuinely
// invalid query gets. So the reason is checked first and the message's
// fixed fragment tells the two apart.
const concurrentUpdateText = "aborted due to concurrent update"

// serializationText is the stable part of the other wording BigQuery
// gives a conflict between mutating DML statements running at once on one
// table ("Could not serialize access to table p:d.t due to concurrent
// update", reason invalidQuery too): the transaction is rolled back just
// the same, and running it again is the remedy.
const serializationText = "could not serialize access to table"

func isConcurrentUpdate(reason string, err error) bool {
	if reason != "invalidQuery" && reason != "invalid" && reason != "" {
		return false
	}
	msg := errMessage(err)
	return strings.Contains(msg, concurrentUpdateText) || strings.Contains(strings.ToLower(msg), serializationText)
}

// stateConflictText opens the message of the commit script's ERROR on
// the stored revisions (sql.go). Such a failure has no reason of its
// own either (invalidQuery); the message is formsync's own text, so it
// identifies the failure without depending on BigQuery's wording.
const stateConflictText = "formsync_state_conflict"

// isStateConflict reports a commit script that failed on its revision
// assertion.
func isStateConflict(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrInvalid {
		return false
	}
	return strings.Contains(errMessage(err), stateConflictText)
}

// errMessage is BigQuery's own message in err: a job's error result or an
// API error's message, not the text the sink wraps around it.
func errMessage(err error) string {
	var jerr *bq.Error
	if errors.As(err, &jerr) {
		return jerr.Message
	}
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		msg := gerr.Message
		for _, it := range gerr.Errors {
			msg += "\n" + it.Message
		}
		return msg
	}
	return ""
}
