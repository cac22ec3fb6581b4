package files

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// caughtUpKey is the object, under the store's prefix, that records the
// forms whose stored rows' files have all been looked at once
// (CaughtUp): beside the objects it speaks of, so that a store emptied
// or replaced is caught up again.
const caughtUpKey = "formsync/caught-up.json"

// caughtUp is caughtUpKey's content: by scope (the database whose rows
// were looked at: several may keep their files in one store), each form
// id and when its catch-up ended.
type caughtUp struct {
	Scopes map[string]map[string]time.Time `json:"scopes"`
}

func (s *Store) readCaughtUp(ctx context.Context) (caughtUp, error) {
	c := caughtUp{Scopes: map[string]map[string]time.Time{}}
	b, err := s.bucket.ReadAll(ctx, s.prefix+caughtUpKey)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("reading %s from the file store: %w", caughtUpKey, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("reading %s from the file store: %w", caughtUpKey, err)
	}
	if c.Scopes == nil {
		c.Scopes = map[string]map[string]time.Time{}
	}
	return c, nil
}

// CaughtUp returns the forms of scope (the database whose rows name the
// files: "sqlite:/path/formsync.db", "bigquery:project.dataset") whose
// files a run has caught up in this store (MarkCaughtUp), with when: a
// run then looks only at their recent rows, not at every stored row
// again. Empty for a scope no run has marked.
func (s *Store) CaughtUp(ctx context.Context, scope string) (map[string]time.Time, error) {
	c, err := s.readCaughtUp(ctx)
	if err != nil {
		return nil, err
	}
	return maps.Clone(c.Scopes[scope]), nil
}

// MarkCaughtUp records that the files of every stored row of forms in
// scope have been looked at, at at. Two runs marking at once (shards,
// of other forms) may lose one's marks: its forms are then caught up
// again, which finds nothing to fetch.
func (s *Store) MarkCaughtUp(ctx context.Context, scope string, forms []string, at time.Time) error {
	if len(forms) == 0 {
		return nil
	}
	c, err := s.readCaughtUp(ctx)
	if err != nil {
		return err
	}
	marks := c.Scopes[scope]
	if marks == nil {
		marks = map[string]time.Time{}
		c.Scopes[scope] = marks
	}
	for _, f := range forms {
		marks[f] = at.UTC()
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := s.bucket.WriteAll(ctx, s.prefix+caughtUpKey, b, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("writing %s to the file store: %w", caughtUpKey, err)
	}
	return nil
}
