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

// caughtUp is caughtUpKey's content.
type caughtUp struct {
	// Forms maps each form id to when its catch-up ended.
	Forms map[string]time.Time `json:"forms"`
}

// CaughtUp returns the forms whose files a run has caught up in this
// store (MarkCaughtUp), with when: a run then looks only at recent rows
// for their files, not at every stored row again. Empty for a store no
// run has marked.
func (s *Store) CaughtUp(ctx context.Context) (map[string]time.Time, error) {
	b, err := s.bucket.ReadAll(ctx, s.prefix+caughtUpKey)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return map[string]time.Time{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s from the file store: %w", caughtUpKey, err)
	}
	var c caughtUp
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("reading %s from the file store: %w", caughtUpKey, err)
	}
	if c.Forms == nil {
		c.Forms = map[string]time.Time{}
	}
	return c.Forms, nil
}

// MarkCaughtUp records that the files of every stored row of forms have
// been looked at, at at. Two runs marking at once (shards, of other
// forms) may lose one's marks: its forms are then caught up again,
// which finds nothing to fetch.
func (s *Store) MarkCaughtUp(ctx context.Context, forms []string, at time.Time) error {
	if len(forms) == 0 {
		return nil
	}
	marked, err := s.CaughtUp(ctx)
	if err != nil {
		return err
	}
	next := maps.Clone(marked)
	for _, f := range forms {
		next[f] = at.UTC()
	}
	b, err := json.MarshalIndent(caughtUp{Forms: next}, "", "  ")
	if err != nil {
		return err
	}
	if err := s.bucket.WriteAll(ctx, s.prefix+caughtUpKey, b, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("writing %s to the file store: %w", caughtUpKey, err)
	}
	return nil
}
