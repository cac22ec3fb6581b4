package bigquery

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// ReadState returns the stored state of the given forms (every form when
// formIDs is empty). Forms never synced are absent from the map.
func (s *Sink) ReadState(ctx context.Context, formIDs []string) (map[string]state.Form, error) {
	return guardValue(s, ctx, func(ctx context.Context) (map[string]state.Form, error) { return s.readState(ctx, formIDs, nil, nil) })
}

// storedIDs is what a commit knows of the ids stored for each form: the
// largest submission_id its rows may hold (max_submission_id, an upper
// bound kept by every commit). A form absent from it, never synced or
// stored before the bound was kept, may hold any id.
type storedIDs map[string]int64

// storedTombstones is, per form, what sync_tombstones holds: each
// tombstone and whether it is pending. A commit sends only the tombstones
// that differ from it (tombstoneChanges).
type storedTombstones map[string]map[string]bool

// readState reads the stored states; maxIDs, when not nil, gets each
// form's max_submission_id that is known, and tombs, when not nil, what
// sync_tombstones holds for each form read.
func (s *Sink) readState(ctx context.Context, formIDs []string, maxIDs storedIDs, tombs storedTombstones) (map[string]state.Form, error) {
	var out map[string]state.Form
	ids := formIDs
	if ids == nil {
		ids = []string{}
	}
	q := s.query(render("readState", stateRead{tables: s.t, WithoutCopies: s.stateWithoutCopies}), bq.QueryParameter{Name: "form_ids", Value: ids})
	err := s.readAll(ctx, "reading sync state", "table "+s.t.State, q.Read, func() { out = map[string]state.Form{} }, func(v []bq.Value) error {
		f, err := scanState(v)
		if err != nil {
			return err
		}
		out[f.FormID] = f
		if maxIDs != nil {
			delete(maxIDs, f.FormID)
			if v[18] != nil {
				maxIDs[f.FormID] = vInt(v[18])
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.readTombstones(ctx, out, tombs); err != nil {
		return nil, err
	}
	return out, nil
}

// readTombstones adds to the states read the tombstones sync_tombstones
// holds for them, and records them in tombs when it is not nil. Only the
// forms whose state has tombstones at all (a salt in sync_state.forgotten)
// are looked up: a dataset nothing was forgotten from costs no query. The
// tombstones sync_state.forgotten itself still lists (written before
// sync_tombstones, and not moved yet: see moveTombstones) count too; the
// next commit of the form moves them.
func (s *Sink) readTombstones(ctx context.Context, states map[string]state.Form, tombs storedTombstones) error {
	ids := []string{}
	for id, f := range states {
		if f.Forgotten != nil {
			ids = append(ids, id)
		}
		if tombs != nil {
			tombs[id] = map[string]bool{}
		}
	}
	if len(ids) == 0 || s.withoutTombstones {
		return nil
	}
	slices.Sort(ids)
	var got storedTombstones
	q := s.query(render("readTombstones", s.t), bq.QueryParameter{Name: "form_ids", Value: ids})
	err := s.readAll(ctx, "reading tombstones", "table "+s.t.Tombstones, q.Read, func() { got = storedTombstones{} }, func(v []bq.Value) error {
		if len(v) != 3 {
			return fmt.Errorf("bigquery: reading tombstones: got %d columns, want 3", len(v))
		}
		id := vString(v[0])
		if got[id] == nil {
			got[id] = map[string]bool{}
		}
		pending, _ := v[2].(bool)
		got[id][vString(v[1])] = pending
		return nil
	})
	if err != nil {
		return err
	}
	for id, stored := range got {
		f, ok := states[id]
		if !ok || f.Forgotten == nil {
			continue
		}
		fg := f.Forgotten
		for t, pending := range stored {
			fg.Keys = append(fg.Keys, t)
			if pending {
				fg.Pending = append(fg.Pending, t)
			} else {
				// Met since the state listed it pending.
				fg.Pending = slices.DeleteFunc(fg.Pending, func(p string) bool { return p == t })
			}
		}
		slices.Sort(fg.Keys)
		fg.Keys = slices.Compact(fg.Keys)
		slices.Sort(fg.Pending)
		fg.Pending = slices.Compact(fg.Pending)
		if len(fg.Pending) == 0 {
			fg.Pending = nil
		}
		if tombs != nil {
			tombs[id] = stored
		}
	}
	return nil
}

// tombstoneParam is one element of the @tombstones parameter: a
// tombstone a commit adds, whose pending flag it changes, or (removed)
// that it takes away.
type tombstoneParam struct {
	FormID    string `bigquery:"form_id"`
	Tombstone string `bigquery:"tombstone"`
	Pending   bool   `bigquery:"pending"`
	Removed   bool   `bigquery:"removed"`
}

// tombstoneChanges are the changes that make what sync_tombstones holds
// for form id (stored) the tombstones of f: a forget adds its few, a read
// that meets a pending one flips it, and nothing else travels, however
// many were forgotten before.
func tombstoneChanges(id string, f *state.Forgotten, stored map[string]bool) []tombstoneParam {
	var out []tombstoneParam
	want := map[string]bool{}
	if f != nil {
		for _, t := range f.Keys {
			_, pending := slices.BinarySearch(f.Pending, t)
			want[t] = pending
			if was, ok := stored[t]; !ok || was != pending {
				out = append(out, tombstoneParam{FormID: id, Tombstone: t, Pending: pending})
			}
		}
	}
	for t := range stored {
		if _, ok := want[t]; !ok {
			out = append(out, tombstoneParam{FormID: id, Tombstone: t, Removed: true})
		}
	}
	slices.SortFunc(out, func(a, b tombstoneParam) int { return strings.Compare(a.Tombstone, b.Tombstone) })
	return out
}

// withoutTombstoneKeys is f as sync_state.forgotten stores it: the salt
// and the count, the tombstones themselves being in sync_tombstones.
func withoutTombstoneKeys(f *state.Forgotten) *state.Forgotten {
	if f == nil {
		return nil
	}
	return &state.Forgotten{Salt: f.Salt, Keys: []string{}, Count: f.Count}
}

func scanState(v []bq.Value) (state.Form, error) {
	if len(v) != 20 {
		return state.Form{}, fmt.Errorf("bigquery: reading sync state: got %d columns, want 20", len(v))
	}
	f := state.Form{
		FormID:          vString(v[0]),
		Watermark:       state.Watermark{CreatedAt: vTime(v[1]), ID: vInt(v[2])},
		Order:           state.Order(vString(v[4])),
		LastTotal:       vInt(v[5]),
		Rows:            vInt(v[6]),
		LastSuccessAt:   vTime(v[8]),
		LastErrorAt:     vTime(v[9]),
		LastError:       vString(v[10]),
		Revision:        vInt(v[12]),
		Deleted:         vInt(v[13]),
		LastReconcileAt: vTime(v[14]),
		FieldPolicy:     vString(v[15]),
	}
	wrap := func(what string, err error) error {
		return fmt.Errorf("bigquery: reading sync state of form %s: %s: %w", f.FormID, what, err)
	}
	if err := unmarshalNullable(v[3], &f.Watermark.Boundary); err != nil {
		return f, wrap("watermark boundary", err)
	}
	if err := unmarshalNullable(v[7], &f.FieldNames); err != nil {
		return f, wrap("field names", err)
	}
	if b := vString(v[11]); b != "" && b != "null" {
		f.Backfill = new(state.Backfill)
		if err := json.Unmarshal([]byte(b), f.Backfill); err != nil {
			return f, wrap("backfill", err)
		}
	}
	if b := vString(v[16]); b != "" && b != "null" {
		f.Forgotten = new(state.Forgotten)
		if err := json.Unmarshal([]byte(b), f.Forgotten); err != nil {
			return f, wrap("forgotten", err)
		}
		if f.Forgotten.Keys == nil {
			f.Forgotten.Keys = []string{}
		}
	}
	if err := unmarshalNullable(v[17], &f.Copies); err != nil {
		return f, wrap("copies", err)
	}
	if err := unmarshalNullable(v[19], &f.FieldTypes); err != nil {
		return f, wrap("field types", err)
	}
	return f, nil
}

func unmarshalNullable(v bq.Value, dst any) error {
	s := vString(v)
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), dst)
}

// stateParam is one element of the @states parameter (ARRAY<STRUCT>).
// JSON-typed columns travel as JSON text and are parsed by PARSE_JSON.
//
// No member is ever NULL: how BigQuery types and passes a NULL inside a
// STRUCT of an ARRAY parameter is a corner no test here can check against
// the real service, so absence travels as a typed sentinel the statements
// turn back into NULL: the zero time.Time is 0001-01-01 00:00:00 UTC,
// BigQuery's smallest TIMESTAMP (NULLIF(x, TIMESTAMP '0001-01-01
// 00:00:00+00')), and "" is "no backfill", "no tombstones" or "no copies"
// (NULLIF(backfill, ”), NULLIF(forgotten, ”), NULLIF(copies, ”),
// NULLIF(field_types, ”)).
type stateParam struct {
	FormID        string    `bigquery:"form_id"`
	WmCreatedAt   time.Time `bigquery:"wm_created_at"`
	WmID          int64     `bigquery:"wm_id"`
	Boundary      string    `bigquery:"boundary"`
	SortOrder     string    `bigquery:"sort_order"`
	LastTotal     int64     `bigquery:"last_total"`
	FieldNames    string    `bigquery:"field_names"`
	LastSuccessAt time.Time `bigquery:"last_success_at"`
	LastErrorAt   time.Time `bigquery:"last_error_at"`
	LastError     string    `bigquery:"last_error"`
	Backfill      string    `bigquery:"backfill"`
	// Revision is the revision the committer read: the transaction
	// asserts it is still the stored one, and stores Revision+1.
	Revision        int64     `bigquery:"revision"`
	LastReconcileAt time.Time `bigquery:"last_reconcile_at"`
	FieldPolicy     string    `bigquery:"field_policy"`
	Forgotten       string    `bigquery:"forgotten"`
	Copies          string    `bigquery:"copies"`
	// FieldTypes is the JSON of state.Form.FieldTypes, "" (NULL) when it
	// holds no type.
	FieldTypes string `bigquery:"field_types"`
}

// sentinelTime is the zero time as BigQuery's smallest TIMESTAMP, for
// "none"; times are UTC microseconds otherwise.
func sentinelTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

func newStateParam(f state.Form) (stateParam, error) {
	// nil and empty slices are stored as null and [] so that they read
	// back exactly as written.
	boundary, err := json.Marshal(f.Watermark.Boundary)
	if err != nil {
		return stateParam{}, err
	}
	fields, err := json.Marshal(f.FieldNames)
	if err != nil {
		return stateParam{}, err
	}
	p := stateParam{
		FormID: f.FormID, WmCreatedAt: sentinelTime(f.Watermark.CreatedAt), WmID: f.Watermark.ID,
		Boundary: string(boundary), SortOrder: string(f.Order), LastTotal: f.LastTotal,
		FieldNames: string(fields), LastSuccessAt: sentinelTime(f.LastSuccessAt),
		LastErrorAt: sentinelTime(f.LastErrorAt), LastError: f.LastError, Revision: f.Revision,
		LastReconcileAt: sentinelTime(f.LastReconcileAt), FieldPolicy: f.FieldPolicy,
	}
	if p.Forgotten, err = optionalJSON(withoutTombstoneKeys(f.Forgotten), f.Forgotten != nil); err != nil {
		return stateParam{}, err
	}
	if p.Copies, err = optionalJSON(f.Copies, len(f.Copies) > 0); err != nil {
		return stateParam{}, err
	}
	if p.Backfill, err = optionalJSON(f.Backfill, f.Backfill != nil); err != nil {
		return stateParam{}, err
	}
	if p.FieldTypes, err = optionalJSON(f.FieldTypes, len(f.FieldTypes.Seen) > 0 || len(f.FieldTypes.Pinned) > 0); err != nil {
		return stateParam{}, err
	}
	return p, nil
}

// optionalJSON is v as JSON text when present, "" (the statements' NULL)
// otherwise.
func optionalJSON(v any, present bool) (string, error) {
	if !present {
		return "", nil
	}
	j, err := json.Marshal(v)
	return string(j), err
}

// sameView reports whether the view of a form whose stored state is prev
// is the one next calls for: the same field names, each of the same type.
func sameView(prev, next state.Form) bool {
	if !slices.Equal(prev.FieldNames, next.FieldNames) {
		return false
	}
	for _, f := range next.FieldNames {
		if prev.FieldTypes.Type(f) != next.FieldTypes.Type(f) {
			return false
		}
	}
	return true
}

// canonicalJSON re-encodes JSON read back from BigQuery the way sink.NewRow
// encodes it, so that a row read back equals the row staged.
func canonicalJSON(s string) (string, error) {
	if s == "" {
		return "null", nil
	}
	return sink.CanonicalJSON(s)
}
