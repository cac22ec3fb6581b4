package bigquery

import (
	"context"
	"errors"
	"fmt"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"
)

// waitJob polls a job until it is done and returns its final error status
// (status.Err(): Job.Wait returns nil for a failed job). Polling is done
// here rather than with Job.Wait so that the interval is the sink's and a
// failed query job is not polled through getQueryResults, which the client
// retries while the error looks transient.
func (s *Sink) waitJob(ctx context.Context, job *bq.Job) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.JobTimeout)
	defer cancel()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for job %s: %w", job.ID(), ctx.Err())
		case <-t.C:
		}
		st, err := job.Status(ctx)
		if err != nil {
			return err
		}
		if st.Done() {
			return st.Err()
		}
		t.Reset(s.cfg.PollInterval)
	}
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

// runDDL runs one statement that is not part of a transaction (views).
func (s *Sink) runDDL(ctx context.Context, op, resource, sql string) error {
	return s.retry(ctx, func() error {
		job, err := s.query(sql).Run(ctx)
		if err != nil {
			return s.scope.classify(op, resource, err)
		}
		return s.scope.classify(op, resource, s.waitJob(ctx, job))
	})
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
