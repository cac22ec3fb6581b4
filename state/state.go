package state

import (
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/formsync/formsync/state/fieldtype"
)

// Order is the sort order in which the API returns a form's submissions. The
// API spec does not state it, so formsync detects it per form.
type Order string

const (
	OrderUnknown     Order = ""
	OrderNewestFirst Order = "newest_first"
	OrderOldestFirst Order = "oldest_first"
)

// Valid reports whether o is one of the known orders (unknown included).
func (o Order) Valid() bool {
	switch o {
	case OrderUnknown, OrderNewestFirst, OrderOldestFirst:
		return true
	}
	return false
}

// Precision is the granularity at which created_at values are compared: the
// coarser of the two response forms (3 fractional digits).
const Precision = time.Millisecond

// Watermark marks the newest submission of a form already loaded.
// The zero Watermark means nothing has been loaded yet: every submission is new.
type Watermark struct {
	// CreatedAt is the created_at of the newest loaded submission, UTC, in
	// microseconds.
	CreatedAt time.Time
	// ID is the largest id among the loaded submissions at CreatedAt's
	// millisecond; 0 when the form answers in the older response form.
	ID int64
	// Boundary holds the submission keys of every loaded submission whose
	// created_at falls in CreatedAt's millisecond. Sorted, no duplicates.
	Boundary []string
}

// IsZero reports whether nothing has been loaded yet.
func (w Watermark) IsZero() bool { return w.CreatedAt.IsZero() }

// Compare places a submission against the watermark: +1 when the submission
// is newer than the watermark (not loaded yet), 0 when it sits in the
// watermark's millisecond and is already loaded (in the boundary), -1 when it
// is older.
func (w Watermark) Compare(createdAt time.Time, key string) int {
	if w.IsZero() {
		return 1
	}
	a, b := createdAt.Truncate(Precision), w.CreatedAt.Truncate(Precision)
	switch {
	case a.After(b):
		return 1
	case a.Before(b):
		return -1
	}
	if _, found := slices.BinarySearch(w.Boundary, key); found {
		return 0
	}
	return 1
}

// IsNew reports whether the submission (createdAt, key) is not loaded yet.
func (w Watermark) IsNew(createdAt time.Time, key string) bool {
	return w.Compare(createdAt, key) > 0
}

// IsOlder reports whether createdAt lies in a millisecond before the
// watermark's: such a submission, and everything behind it in the sort order,
// is already loaded.
func (w Watermark) IsOlder(createdAt time.Time) bool {
	return !w.IsZero() && createdAt.Truncate(Precision).Before(w.CreatedAt.Truncate(Precision))
}

// Advance returns the watermark after loading the submission
// (createdAt, id, key). The watermark never moves backwards: an older
// submission leaves it unchanged. It copies the boundary to add a key: over
// many submissions, use a WatermarkBuilder.
func (w Watermark) Advance(createdAt time.Time, id int64, key string) Watermark {
	b := NewWatermarkBuilder(w)
	b.Advance(createdAt, id, key)
	return b.Watermark()
}

// A WatermarkBuilder advances a watermark over every submission a run
// stages. Copying the boundary for each key added would be quadratic in
// the submissions of one millisecond (50,000 of them, a bulk import, took
// 22 s); the builder collects a millisecond's new keys in a set and sorts
// them in when the watermark is asked for. Not safe for concurrent use.
type WatermarkBuilder struct {
	w Watermark
	// extra are keys at w's millisecond not yet in w.Boundary.
	extra map[string]struct{}
}

// NewWatermarkBuilder starts from w.
func NewWatermarkBuilder(w Watermark) *WatermarkBuilder {
	return &WatermarkBuilder{w: w}
}

// Advance records the submission (createdAt, id, key): the watermark
// moves to a newer millisecond, gains the key in its own, and never moves
// backwards.
func (b *WatermarkBuilder) Advance(createdAt time.Time, id int64, key string) {
	createdAt = createdAt.UTC().Truncate(time.Microsecond)
	if !b.w.IsZero() {
		a, c := createdAt.Truncate(Precision), b.w.CreatedAt.Truncate(Precision)
		switch {
		case a.Before(c):
			return
		case a.Equal(c):
			b.w.ID = max(b.w.ID, id)
			if createdAt.After(b.w.CreatedAt) {
				b.w.CreatedAt = createdAt
			}
			if _, found := slices.BinarySearch(b.w.Boundary, key); !found {
				if b.extra == nil {
					b.extra = map[string]struct{}{}
				}
				b.extra[key] = struct{}{}
			}
			return
		}
	}
	b.w = Watermark{CreatedAt: createdAt, ID: id, Boundary: []string{key}}
	clear(b.extra)
}

// Watermark returns the watermark after every submission recorded so far.
// The result shares nothing the builder changes later.
func (b *WatermarkBuilder) Watermark() Watermark {
	if len(b.extra) > 0 {
		bd := slices.Grow(slices.Clone(b.w.Boundary), len(b.extra))
		for k := range b.extra {
			bd = append(bd, k)
		}
		slices.Sort(bd)
		b.w.Boundary = slices.Clip(bd)
		clear(b.extra)
	}
	return b.w
}

// Merge returns the newer of two watermarks, joining their boundaries when
// they share a millisecond. Merge(w, zero) is w.
func (w Watermark) Merge(o Watermark) Watermark {
	switch {
	case o.IsZero():
		return w
	case w.IsZero():
		return o
	}
	a, b := o.CreatedAt.Truncate(Precision), w.CreatedAt.Truncate(Precision)
	switch {
	case a.After(b):
		return o
	case a.Before(b):
		return w
	}
	out := Watermark{CreatedAt: w.CreatedAt, ID: max(w.ID, o.ID)}
	if o.CreatedAt.After(out.CreatedAt) {
		out.CreatedAt = o.CreatedAt
	}
	out.Boundary = slices.Concat(w.Boundary, o.Boundary)
	slices.Sort(out.Boundary)
	out.Boundary = slices.Compact(out.Boundary)
	return out
}

// Form is the stored sync state of one form: one row of the sync_state table.
type Form struct {
	FormID    string
	Watermark Watermark
	// Order is the sort order detected the last time the form was read.
	Order Order
	// LastTotal is meta.pagination.total as seen by the last successful run;
	// -1 when unknown. Comparing it with the current total detects short reads.
	LastTotal int64
	// Rows counts the form's stored rows not marked deleted upstream; Deleted
	// the rows a reconcile found no longer served (deleted_at set). The sink
	// keeps both: a commit's values are ignored.
	Rows    int64
	Deleted int64
	// FieldNames is every field name seen in the form's submissions, sorted.
	FieldNames []string
	// FieldTypes is the type of each field's view column: the types its
	// values fit (which only widen) and the types an operator pinned.
	FieldTypes fieldtype.Columns
	// LastSuccessAt and LastErrorAt are when a run last succeeded or failed
	// for the form; LastError is the failure's message, empty after a success.
	LastSuccessAt time.Time
	LastErrorAt   time.Time
	LastError     string
	// Backfill is the progress of an interrupted backfill, nil when none runs.
	Backfill *Backfill
	// LastReconcileAt is when a reconcile of the form last committed; zero
	// when none has.
	LastReconcileAt time.Time
	// FieldPolicy is the identity of the field policy the form's rows were
	// stored under ("" for none), so that a change of policy is noticed
	// rather than mixed into the table.
	FieldPolicy string
	// Forgotten holds the tombstones of submissions forgotten on request;
	// nil when none was.
	Forgotten *Forgotten
	// Copies are the submissions the API serves more than once
	// indistinguishably; nil when there are none.
	Copies Copies
	// Revision counts the commits that wrote this state; 0 before the
	// first. A commit carries the revision it read and the sink refuses it
	// when the stored one moved on (another process committed the form
	// meanwhile): optimistic concurrency, so that no writer undoes another.
	Revision int64
}

// New returns the state of a form never synced.
func New(formID string) Form { return Form{FormID: formID, LastTotal: -1} }

// Backfill records how far an on-demand backfill got, so that an
// interrupted backfill resumes instead of starting over.
type Backfill struct {
	// Since and Until bound the window being re-read (zero: unbounded).
	Since, Until time.Time
	// Cursor is the created_at up to which the window has been re-read, in the
	// direction of the form's sort order; zero before the first checkpoint.
	Cursor time.Time
	// StartedAt is when the backfill began.
	StartedAt time.Time
	// FieldPolicy is the identity of the field policy the rows were written
	// under (Form.FieldPolicy), "" for none: a whole-form backfill resumes
	// only under the same one, since it records it for every row at its end.
	FieldPolicy string
	// Watermark and Total are, for a backfill of the whole form, the
	// watermark of the newest rows its first run read and the lowest total
	// it saw: the runs that resume it read only below Cursor, and at the
	// end move the form's watermark to these. Zero in a record written
	// before they were kept: such a backfill, resumed, leaves the
	// watermark to the next sync.
	Watermark Watermark
	Total     int64
}

// WithoutForgotten returns f with the watermarks it keeps (its own, and an
// interrupted backfill's) scrubbed of forgotten submissions
// (Forgotten.Scrub). A state is written this way whenever it has
// tombstones: a forget removes a submission that a watermark names, and a
// concurrent commit merged with the forget's state may name it again.
func (f Form) WithoutForgotten() Form {
	if f.Forgotten.Empty() {
		return f
	}
	f.Watermark = f.Forgotten.Scrub(f.Watermark)
	if f.Backfill != nil {
		b := *f.Backfill
		b.Watermark = f.Forgotten.Scrub(b.Watermark)
		f.Backfill = &b
	}
	return f
}

// Validate reports a state that cannot have been written by formsync.
func (f Form) Validate() error {
	if f.FormID == "" {
		return fmt.Errorf("state: empty form id")
	}
	if !utf8.ValidString(f.FormID) {
		// The sinks look states up by form id as text (SQLite through
		// JSON, which turns invalid bytes into U+FFFD), so a state stored
		// under such an id would never be found again and every later
		// commit of the form refused as a conflict.
		return fmt.Errorf("state: form id %q is not valid UTF-8", f.FormID)
	}
	if !f.Order.Valid() {
		return fmt.Errorf("state: form %s: unknown order %q", f.FormID, f.Order)
	}
	if !slices.IsSorted(f.Watermark.Boundary) {
		return fmt.Errorf("state: form %s: watermark boundary not sorted", f.FormID)
	}
	if err := f.Forgotten.validate(); err != nil {
		return fmt.Errorf("state: form %s: %w", f.FormID, err)
	}
	for k, n := range f.Copies {
		if k == "" || n <= 0 {
			return fmt.Errorf("state: form %s: copies of %q counted %d", f.FormID, k, n)
		}
	}
	return nil
}

// Copies counts the submissions the API serves more than once
// indistinguishably: in the older response form (no id), the same
// created_at millisecond and content twice on one page, as when a form is
// posted twice at once. It maps their content key to how many more times
// than once a page held it. The table holds one row for them, and the
// completeness check expects that many fewer rows than the API counts.
type Copies map[string]int64

// Count is how many more submissions the API serves than the rows c
// stands for: the sum of its counts.
func (c Copies) Count() int64 {
	var n int64
	for _, k := range c {
		n += k
	}
	return n
}

// Merge returns the copies known to either c or o: for each content key,
// the larger count (each is a count seen on one page, so the counts of two
// reads are not added). It returns nil when there are none, and never c or
// o, so that the result can be changed.
func (c Copies) Merge(o Copies) Copies {
	if len(c)+len(o) == 0 {
		return nil
	}
	out := maps.Clone(c)
	if out == nil {
		out = make(Copies, len(o))
	}
	for k, n := range o {
		out[k] = max(out[k], n)
	}
	return out
}
