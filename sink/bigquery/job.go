package bigquery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"
)

// waitJob polls a job until it is done and returns its final error status
// (status.Err(): Job.Wait returns nil for a failed job). Polling is done
// here rather than with Job.Wait so that the interval is the sink's and a
// failed query job is not polled through getQueryResults, which the client
// retries while the error looks transient.
//
// A failure to read the status is retried (retry: bounded by MaxRetries);
// when it persists, or the job is still running after JobTimeout, the
// result is a *pollError: the job may still be running, so the caller
// must not start another in its place. A job still running after
// JobTimeout is also asked to stop (jobs.cancel): BigQuery cancels a
// transaction that mutates a table another running one mutates, so a
// commit left running would have every later commit of its forms
// cancelled until it ended. JobTimeout is measured on one clock,
// Config.Now, between polls (a test clock can run a long job in a
// moment); a poll itself is bounded by the transport (Config.Timeout).
// The expiry is reported as a job that took too long, not as the
// caller's context error (which would read as the run itself having been
// stopped).
func (s *Sink) waitJob(ctx context.Context, job *bq.Job) error {
	began := s.cfg.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return &pollError{job: job.ID(), err: ctx.Err()}
		case <-t.C:
		}
		var st *bq.JobStatus
		var last error
		err := s.retry(ctx, func() error {
			st, last = job.Status(ctx)
			return s.scope.classify("", "", last)
		})
		if err != nil {
			if last == nil {
				last = err
			}
			return &pollError{job: job.ID(), err: last}
		}
		if st.Done() {
			return jobError(st)
		}
		if s.cfg.Now().Sub(began) >= s.cfg.JobTimeout {
			return &pollError{job: job.ID(), err: s.cancelLate(ctx, job)}
		}
		t.Reset(s.cfg.PollInterval)
	}
}

// maxJobErrors bounds how many entries of a failed job's errors[] its error
// quotes.
const maxJobErrors = 5

// jobError is a finished job's error, nil when it succeeded, followed by
// the other entries of its status's errors[]: for a load that refused rows
// BigQuery's error only counts them and says to look into errors[], where
// the cause (the field, the row) is. The *bq.Error stays in the chain, so
// the reason still classifies it.
func jobError(st *bq.JobStatus) error {
	err := st.Err()
	var first *bq.Error
	if !errors.As(err, &first) {
		return err
	}
	var more []string
	for i, e := range st.Errors {
		if e == nil || e.Message == "" || e.Message == first.Message {
			continue
		}
		if len(more) == maxJobErrors {
			more = append(more, fmt.Sprintf("(%d more not shown)", len(st.Errors)-i))
			break
		}
		more = append(more, e.Message)
	}
	if len(more) == 0 {
		return err
	}
	return fmt.Errorf("%w; errors[]: %s", err, strings.Join(more, "; "))
}

// pollError says that a job's status could not be read: it may still be
// running (and may yet succeed).
type pollError struct {
	job string
	err error
}

func (e *pollError) Error() string {
	var te *jobTimeoutError
	if errors.As(e.err, &te) {
		return fmt.Sprintf("job %s may still be running: %v", e.job, e.err)
	}
	return fmt.Sprintf("job %s may still be running (its status could not be read): %v", e.job, e.err)
}

func (e *pollError) Unwrap() error { return e.err }

// cancelTimeout bounds the jobs.cancel request of a job that ran past
// JobTimeout.
const cancelTimeout = 30 * time.Second

// cancelLate asks BigQuery to cancel job, which was still running when
// JobTimeout was up, and returns the *jobTimeoutError saying so. The
// request is made while the caller's context lives (a run that was
// stopped leaves its job be: it may yet commit, and the next run sees
// whatever it stored). BigQuery cancels asynchronously: the job may still
// finish, or even commit, before it stops.
func (s *Sink) cancelLate(caller context.Context, job *bq.Job) error {
	ctx, cancel := context.WithTimeout(caller, cancelTimeout)
	defer cancel()
	return &jobTimeoutError{timeout: s.cfg.JobTimeout, cancelErr: job.Cancel(ctx)}
}

// jobTimeoutError says that a job was still running when Config.JobTimeout
// was up, and whether asking BigQuery to cancel it failed.
type jobTimeoutError struct {
	timeout   time.Duration
	cancelErr error
}

func (e *jobTimeoutError) Error() string {
	if e.cancelErr != nil {
		return fmt.Sprintf("it did not finish within %v, and asking BigQuery to cancel it failed (%v)", e.timeout, e.cancelErr)
	}
	return fmt.Sprintf("it did not finish within %v; formsync asked BigQuery to cancel it", e.timeout)
}

func (s *Sink) jobResource(id string) string {
	return "job " + s.cfg.Project + ":" + s.cfg.Location + "." + id
}

// query builds a query with its parameters, in the sink's location.
func (s *Sink) query(sql string, params ...bq.QueryParameter) *bq.Query {
	q := s.client.Query(sql)
	q.Location = s.cfg.Location
	q.Parameters = params
	return q
}

// readAll runs a read-only query and hands every row to fn. Reads are
// idempotent, so a transient failure re-runs the whole query.
func (s *Sink) readAll(ctx context.Context, op, resource string, read func(context.Context) (*bq.RowIterator, error), reset func(), fn func([]bq.Value) error) error {
	return s.retry(ctx, func() error {
		reset()
		it, err := read(ctx)
		if err != nil {
			return s.scope.classify(op, resource, err)
		}
		for {
			var row []bq.Value
			err := it.Next(&row)
			if errors.Is(err, iterator.Done) {
				return nil
			}
			if err != nil {
				return s.scope.classify(op, resource, err)
			}
			if err := fn(row); err != nil {
				return err
			}
		}
	})
}

// runDDL runs one statement that is not part of a transaction (views),
// under job ids of its own: like every job the sink starts, a 409 on a
// retried insert (the client retries a query job's insert on 5xx by
// itself) is its own job, and the sink attaches to it.
func (s *Sink) runDDL(ctx context.Context, op, resource, sql string) error {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fmt.Errorf("bigquery: %s: job id: %w", op, err)
	}
	_, err := s.runStatement(ctx, "formsync_ddl_"+hex.EncodeToString(nonce[:]), op, sql, nil)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, resource)
	}
	return nil
}

// Value helpers for rows read as []bq.Value.

func vString(v bq.Value) string {
	s, _ := v.(string)
	return s
}

func vInt(v bq.Value) int64 {
	i, _ := v.(int64)
	return i
}

func vTime(v bq.Value) time.Time {
	t, _ := v.(time.Time)
	return t.UTC()
}
