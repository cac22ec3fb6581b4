package bigquery

import (
	"context"
	"fmt"

	bq "cloud.google.com/go/bigquery"
	"github.com/formsync/formsync/sink"
)

// ReadRows returns every stored row of a form ordered by created_at, then
// submission_key. It holds them all in memory: it is meant for tests, the
// contract suite and small tools.
func (s *Sink) ReadRows(ctx context.Context, formID string) ([]sink.Row, error) {
	var out []sink.Row
	q := s.query(render("readRows", s.t), bq.QueryParameter{Name: "form_id", Value: formID})
	err := s.readAll(ctx, "reading rows of form "+formID, "table "+s.t.Submissions, q.Read, func() { out = nil }, func(v []bq.Value) error {
		if len(v) != 7 {
			return fmt.Errorf("bigquery: reading rows of form %s: got %d columns, want 7", formID, len(v))
		}
		r := sink.Row{
			FormID:        formID,
			SubmissionKey: vString(v[1]),
			CreatedAt:     vTime(v[2]),
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
