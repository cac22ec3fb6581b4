package state

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
)

// Forgotten holds the tombstones of a form's submissions that were
// forgotten on request (an erasure request): no later sync, lookback,
// backfill or reconcile stores them again. A tombstone is a keyed hash
// (HMAC-SHA256 under the form's own random salt) of a submission key, so
// the state names no forgotten submission outright.
type Forgotten struct {
	// Salt is the hex of the random key the tombstones are hashed under.
	Salt string `json:"salt"`
	// Keys are the tombstones, sorted, without duplicates: one for each
	// submission key and each content key of a forgotten submission (a row
	// keyed by content is recognised when it later comes with an id).
	Keys []string `json:"keys"`
	// Count is how many submissions were forgotten: the completeness check
	// expects that many fewer rows than the API serves.
	Count int64 `json:"count"`
	// Pending are the tombstones (also in Keys) of keys forgotten while no
	// stored row had them. Such a key may name no submission the API
	// serves (a typo, one deleted upstream), so it is not in Count until a
	// read meets its submission (Met).
	Pending []string `json:"pending,omitempty"`
}

// NewForgotten returns an empty tombstone set with a fresh random salt.
func NewForgotten() (*Forgotten, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("state: drawing a tombstone salt: %w", err)
	}
	return &Forgotten{Salt: hex.EncodeToString(salt), Keys: []string{}}, nil
}

// Tombstone is the keyed hash of a submission (or content) key.
func (f *Forgotten) Tombstone(key string) string {
	salt, err := hex.DecodeString(f.Salt)
	if err != nil {
		// Validate refuses such a state; hashing under the text keeps
		// Tombstone total.
		salt = []byte(f.Salt)
	}
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Has reports whether key has a tombstone. A nil Forgotten has none.
func (f *Forgotten) Has(key string) bool {
	if f == nil || len(f.Keys) == 0 || key == "" {
		return false
	}
	_, found := slices.BinarySearch(f.Keys, f.Tombstone(key))
	return found
}

// Empty reports whether nothing was forgotten.
func (f *Forgotten) Empty() bool { return f == nil || len(f.Keys) == 0 }

// With returns a copy of f with tombstones for keys added and Count raised
// by submissions.
func (f *Forgotten) With(submissions int64, keys ...string) *Forgotten {
	out := &Forgotten{Salt: f.Salt, Count: f.Count + submissions, Keys: slices.Clone(f.Keys), Pending: slices.Clone(f.Pending)}
	for _, k := range keys {
		if k != "" {
			out.Keys = append(out.Keys, f.Tombstone(k))
		}
	}
	slices.Sort(out.Keys)
	out.Keys = slices.Compact(out.Keys)
	if out.Keys == nil {
		out.Keys = []string{}
	}
	return out
}

// WithUnstored returns a copy of f with tombstones for keys, which no
// stored row has, added as pending: not counted until a read meets them.
func (f *Forgotten) WithUnstored(keys ...string) *Forgotten {
	out := f.With(0, keys...)
	for _, k := range keys {
		if k != "" && !f.Has(k) {
			out.Pending = append(out.Pending, f.Tombstone(k))
		}
	}
	slices.Sort(out.Pending)
	out.Pending = slices.Compact(out.Pending)
	return out
}

// IsPending reports whether key's tombstone is pending: forgotten while not
// stored, and not met by a read since.
func (f *Forgotten) IsPending(key string) bool {
	if f == nil || len(f.Pending) == 0 || key == "" {
		return false
	}
	_, found := slices.BinarySearch(f.Pending, f.Tombstone(key))
	return found
}

// Met returns a copy of f in which the pending tombstones of keys (the keys
// of submissions a read served and skipped) are counted: one submission
// each. f itself when none is pending.
func (f *Forgotten) Met(keys ...string) *Forgotten {
	var met []string
	for _, k := range keys {
		if f.IsPending(k) {
			met = append(met, f.Tombstone(k))
		}
	}
	if len(met) == 0 {
		return f
	}
	return f.counting(met)
}

// counting returns a copy of f with the pending tombstones met counted.
func (f *Forgotten) counting(met []string) *Forgotten {
	out := f.Clone()
	out.Pending = slices.DeleteFunc(out.Pending, func(t string) bool {
		if slices.Contains(met, t) {
			out.Count++
			return true
		}
		return false
	})
	if len(out.Pending) == 0 {
		out.Pending = nil
	}
	return out
}

// MergedWith is the stored tombstones f with what a writer that read them
// before (ours) learnt since: the tombstones pending in f that ours knows
// but no longer holds pending were met by its read, and are counted.
// Tombstones are only ever added by forget, which commits nothing else, so
// f's are the latest.
func (f *Forgotten) MergedWith(ours *Forgotten) *Forgotten {
	if f == nil || ours == nil || len(f.Pending) == 0 {
		return f
	}
	var met []string
	for _, t := range f.Pending {
		_, known := slices.BinarySearch(ours.Keys, t)
		_, pending := slices.BinarySearch(ours.Pending, t)
		if known && !pending {
			met = append(met, t)
		}
	}
	if len(met) == 0 {
		return f
	}
	return f.counting(met)
}

// Clone returns a deep copy (nil for nil).
func (f *Forgotten) Clone() *Forgotten {
	if f == nil {
		return nil
	}
	out := *f
	out.Keys = slices.Clone(f.Keys)
	if out.Keys == nil {
		out.Keys = []string{}
	}
	out.Pending = slices.Clone(f.Pending)
	return &out
}

func (f *Forgotten) validate() error {
	if f == nil {
		return nil
	}
	if _, err := hex.DecodeString(f.Salt); err != nil || len(f.Salt) < 16 {
		return fmt.Errorf("tombstone salt %q is not hex of at least 8 bytes", f.Salt)
	}
	if !slices.IsSorted(f.Keys) {
		return fmt.Errorf("tombstones not sorted")
	}
	if !slices.IsSorted(f.Pending) {
		return fmt.Errorf("pending tombstones not sorted")
	}
	for _, t := range f.Pending {
		if _, found := slices.BinarySearch(f.Keys, t); !found {
			return fmt.Errorf("pending tombstone %s is not a tombstone", t)
		}
	}
	return nil
}

// Scrub returns w without the keys f has tombstones for: they leave the
// boundary, and ID becomes the largest id left in it (0 when none), so that
// the state names no forgotten submission in clear. A forgotten submission
// that a read meets at w's millisecond reads as new again, and its
// tombstone keeps it out. w itself when nothing of it is forgotten.
func (f *Forgotten) Scrub(w Watermark) Watermark {
	if f.Empty() || w.IsZero() {
		return w
	}
	kept := slices.DeleteFunc(slices.Clone(w.Boundary), f.Has)
	idForgotten := w.ID != 0 && f.Has(strconv.FormatInt(w.ID, 10))
	if len(kept) == len(w.Boundary) && !idForgotten {
		return w
	}
	out := Watermark{CreatedAt: w.CreatedAt, ID: w.ID, Boundary: kept}
	if idForgotten {
		out.ID = 0
		for _, k := range kept {
			if id, err := strconv.ParseInt(k, 10, 64); err == nil && strconv.FormatInt(id, 10) == k {
				out.ID = max(out.ID, id)
			}
		}
	}
	return out
}
