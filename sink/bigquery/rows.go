package bigquery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	bq "cloud.google.com/go/bigquery"
	"github.com/formsync/formsync/sink"
)

// ReadRows returns every stored row of a form ordered by created_at, then
// submission_key, rows marked deleted upstream included. It holds them all
// in memory: it is meant for tests, the contract suite and small tools.
func (s *Sink) ReadRows(ctx context.Context, formID string) ([]sink.Row, error) {
	return s.readRows(ctx, formID, render("readRows", s.t), bq.QueryParameter{Name: "form_id", Value: formID})
}

// Find returns the stored rows of a form whose submission key is one of
// m.Keys or, when m.Field is set, whose fields object has a member named
// m.Field holding the JSON string m.Value; rows marked deleted upstream
// included, ordered like ReadRows. An empty Match finds nothing without
// a query.
//
// The value is what a person asked to have erased, and BigQuery's job
// history keeps every query's text and parameters for whoever may list
// the project's jobs: neither the value nor anything derived from it is
// sent. A first query returns, for every row of the form whose field
// holds a string, its key and the SHA-256 of that string; formsync
// compares them with the value's, and a second query reads the rows of
// the keys found. The field's name is a query parameter (the JSON
// subscript operator takes it as a value, so no character of it is
// parsed as JSON path syntax).
func (s *Sink) Find(ctx context.Context, formID string, m sink.Match) ([]sink.Row, error) {
	if m.Empty() {
		return nil, nil
	}
	keys := append([]string{}, m.Keys...)
	if m.Field != "" {
		found, err := s.keysHolding(ctx, formID, m.Field, m.Value)
		if err != nil {
			return nil, err
		}
		keys = append(keys, found...)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return s.readRows(ctx, formID, render("find", s.t),
		bq.QueryParameter{Name: "form_id", Value: formID},
		bq.QueryParameter{Name: "keys", Value: keys},
	)
}

// keysHolding returns the keys of the form's rows whose fields object has
// the member field holding the JSON string value, compared in this
// process: BigQuery returns each candidate's key and the SHA-256 of its
// string, and never sees the value or its digest.
func (s *Sink) keysHolding(ctx context.Context, formID, field, value string) ([]string, error) {
	sum := sha256.Sum256([]byte(value))
	want := hex.EncodeToString(sum[:])
	q := s.query(render("findField", s.t),
		bq.QueryParameter{Name: "form_id", Value: formID},
		bq.QueryParameter{Name: "field", Value: field},
	)
	var keys []string
	err := s.guard(ctx, func(ctx context.Context) error {
		return s.readAll(ctx, "finding rows of form "+formID+" by a field's value", "table "+s.t.Submissions, q.Read, func() { keys = nil }, func(v []bq.Value) error {
			if len(v) != 2 {
				return fmt.Errorf("bigquery: finding rows of form %s: got %d columns, want 2", formID, len(v))
			}
			if vString(v[1]) == want {
				keys = append(keys, vString(v[0]))
			}
			return nil
		})
	})
	return keys, err
}

// readRows runs a query selecting the rowColumns of one form's rows.
func (s *Sink) readRows(ctx context.Context, formID, sql string, params ...bq.QueryParameter) ([]sink.Row, error) {
	return guardValue(s, ctx, func(ctx context.Context) ([]sink.Row, error) { return s.readRowsOnce(ctx, formID, sql, params...) })
}

func (s *Sink) readRowsOnce(ctx context.Context, formID, sql string, params ...bq.QueryParameter) ([]sink.Row, error) {
	var out []sink.Row
	q := s.query(sql, params...)
	err := s.readAll(ctx, "reading rows of form "+formID, "table "+s.t.Submissions, q.Read, func() { out = nil }, func(v []bq.Value) error {
		if len(v) != 8 {
			return fmt.Errorf("bigquery: reading rows of form %s: got %d columns, want 8", formID, len(v))
		}
		r := sink.Row{
			FormID:        formID,
			SubmissionKey: vString(v[1]),
			CreatedAt:     vTime(v[2]),
			DeletedAt:     vTime(v[7]),
		}
		if id, ok := v[0].(int64); ok {
			r.SubmissionID = &id
		}
		r.IsSpam, _ = v[3].(bool)
		var err error
		if r.Fields, err = canonicalJSON(vString(v[4])); err != nil {
			return fmt.Errorf("bigquery: reading rows of form %s: submission %s: fields: %w", formID, r.SubmissionKey, err)
		}
		if r.Files, err = canonicalJSON(vString(v[5])); err != nil {
			return fmt.Errorf("bigquery: reading rows of form %s: submission %s: files: %w", formID, r.SubmissionKey, err)
		}
		r.Raw = vString(v[6])
		r.ContentKey = sink.ContentKey(r.CreatedAt, r.Fields, r.Files)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
