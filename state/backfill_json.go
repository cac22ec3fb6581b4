package state

import (
	"encoding/json"
	"fmt"
	"time"
)

// backfillLayout is how a Backfill's times are stored: RFC 3339, UTC, six
// fractional digits (the same text the sinks use for timestamps).
const backfillLayout = "2006-01-02T15:04:05.000000Z"

type backfillJSON struct {
	Since     *string `json:"since"`
	Until     *string `json:"until"`
	Cursor    *string `json:"cursor"`
	StartedAt *string `json:"started_at"`
	// FieldPolicy is left out when empty, as progress written before it
	// was kept reads.
	FieldPolicy string `json:"field_policy,omitempty"`
	// Watermark and Total are left out when zero, as progress written
	// before they were kept reads.
	Watermark *watermarkJSON `json:"watermark,omitempty"`
	Total     int64          `json:"total,omitempty"`
}

type watermarkJSON struct {
	CreatedAt string   `json:"created_at"`
	ID        int64    `json:"id,omitempty"`
	Boundary  []string `json:"boundary,omitempty"`
}

// MarshalJSON stores a Backfill as every sink keeps it in sync_state: an
// object of four times, null where zero, the field policy's identity when
// there is one, and a whole-form backfill's watermark and total when set.
func (b Backfill) MarshalJSON() ([]byte, error) {
	text := func(t time.Time) *string {
		if t.IsZero() {
			return nil
		}
		s := t.UTC().Format(backfillLayout)
		return &s
	}
	j := backfillJSON{Since: text(b.Since), Until: text(b.Until), Cursor: text(b.Cursor), StartedAt: text(b.StartedAt), FieldPolicy: b.FieldPolicy, Total: b.Total}
	if w := b.Watermark; !w.IsZero() {
		j.Watermark = &watermarkJSON{CreatedAt: *text(w.CreatedAt), ID: w.ID, Boundary: w.Boundary}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (b *Backfill) UnmarshalJSON(data []byte) error {
	var j backfillJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	out := Backfill{FieldPolicy: j.FieldPolicy, Total: j.Total}
	if w := j.Watermark; w != nil {
		t, err := time.Parse(time.RFC3339Nano, w.CreatedAt)
		if err != nil {
			return fmt.Errorf("backfill watermark: %w", err)
		}
		out.Watermark = Watermark{CreatedAt: t.UTC(), ID: w.ID, Boundary: w.Boundary}
	}
	for _, p := range []struct {
		name string
		src  *string
		dst  *time.Time
	}{{"since", j.Since, &out.Since}, {"until", j.Until, &out.Until}, {"cursor", j.Cursor, &out.Cursor}, {"started_at", j.StartedAt, &out.StartedAt}} {
		if p.src == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, *p.src)
		if err != nil {
			return fmt.Errorf("backfill %s: %w", p.name, err)
		}
		*p.dst = t.UTC()
	}
	*b = out
	return nil
}
