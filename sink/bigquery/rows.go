package bigquery

import (
	"context"
	"crypto/rand"
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
// included, ordered like ReadRows. The value never leaves the process:
// the query compares salted SHA-256 digests. The name and the digest are
// query parameters (the JSON subscript operator takes the name as a value, so no
// character of it is parsed as JSON path syntax). An empty Match finds
// nothing without a query.
func (s *Sink) Find(ctx context.Context, formID string, m sink.Match) ([]sink.Row, error) {
	if m.Empty() {
		return nil, nil
	}
	keys := m.Keys
	if keys == nil {
		keys = []string{}
	}
	// The value is what a person asked to have erased: BigQuery's job
	// history keeps a query's parameters, so it is not one of them. The
	// query compares a digest of each stored value under a random salt
	// of this call with the value's.
	var salt [16]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, fmt.Errorf("bigquery: find: salt: %w", err)
	}
	saltHex := hex.EncodeToString(salt[:])
	digest := sha256.Sum256([]byte(saltHex + m.Value))
	return s.readRows(ctx, formID, render("find", s.t),
		bq.QueryParameter{Name: "form_id", Value: formID},
		bq.QueryParameter{Name: "keys", Value: keys},
		bq.QueryParameter{Name: "field", Value: m.Field},
		bq.QueryParameter{Name: "salt", Value: saltHex},
		bq.QueryParameter{Name: "value_sha256", Value: hex.EncodeToString(digest[:])},
	)
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
