package jsonscan

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// The canonical form of a JSON value is what decoding it with
// encoding/json (UseNumber) and encoding it again (SetEscapeHTML(false))
// produces: object keys sorted bytewise and unique (the last of duplicates
// wins), no insignificant space, numbers as written, strings escaped the
// way encoding/json escapes them, invalid UTF-8 replaced by U+FFFD.
// Content keys hash it, so it must never change. It is written out here
// because the reflective round trip was a fifth of the CPU time of a sync.

// AppendCanonical appends the canonical form of the single JSON value src
// to dst.
func AppendCanonical(dst, src []byte) ([]byte, error) {
	c := canonicalizers.Get().(*Canonicalizer)
	dst, err := c.Append(dst, src)
	if c.Release(maxKeptScratch) {
		canonicalizers.Put(c)
	}
	return dst, err
}

// A Canonicalizer's reader is too large to make for every call.
var canonicalizers = sync.Pool{New: func() any { return new(Canonicalizer) }}

// maxKeptScratch bounds the scratch a pooled Canonicalizer keeps.
const maxKeptScratch = 64 << 10

// A Canonicalizer writes canonical forms, keeping its scratch from one to
// the next.
type Canonicalizer struct {
	// Limit is the deepest nesting accepted; 0 means MaxDepth.
	Limit int
	r     Reader
	// str is scratch for unquoting strings with escapes, tmp for
	// reordering an object's members.
	str, tmp []byte
	// top says that the last value written was an object, and keys holds
	// its keys in canonical order (slices of its text, or of their own).
	top  bool
	keys [][]byte
}

// A DepthError reports a value nested deeper than the limit.
type DepthError struct{ Limit int }

func (e *DepthError) Error() string { return fmt.Sprintf("nested more than %d levels", e.Limit) }

// Append appends the canonical form of the single JSON value src to dst.
func (c *Canonicalizer) Append(dst, src []byte) ([]byte, error) {
	c.top, c.keys = false, c.keys[:0]
	c.r.Reset(src)
	dst, err := c.value(dst, true)
	if err == nil {
		err = c.r.End()
	}
	return dst, err
}

// Keys returns the keys of the value Append last wrote, in canonical
// order, and whether it was an object. They are valid until the next
// Append.
func (c *Canonicalizer) Keys() ([][]byte, bool) { return c.keys, c.top }

// Release drops the references c holds to the last text it read, and
// reports whether its scratch is at most max bytes, worth keeping.
func (c *Canonicalizer) Release(max int) bool {
	c.r.Reset(nil)
	clear(c.keys[:cap(c.keys)])
	return cap(c.str) <= max && cap(c.tmp) <= max
}

// member is one key, and the member as written (key, colon and canonical
// value) at dst[start:end].
type member struct {
	key        []byte
	start, end int
}

func (c *Canonicalizer) value(dst []byte, top bool) ([]byte, error) {
	switch c.r.PeekKind() {
	case '{':
		return c.object(dst, top)
	case '[':
		return c.array(dst)
	case '"':
		v, err := c.r.ReadValue()
		if err != nil {
			return dst, err
		}
		return c.string(dst, v), nil
	}
	v, err := c.r.ReadValue() // a number or a literal, as written
	return append(dst, v...), err
}

// enter reads the { or [ that opens a value, one level deeper.
func (c *Canonicalizer) enter() error {
	if _, err := c.r.ReadToken(); err != nil {
		if c.r.StackDepth() >= MaxDepth {
			return &DepthError{Limit: cmp.Or(c.Limit, MaxDepth)}
		}
		return err
	}
	if limit := cmp.Or(c.Limit, MaxDepth); c.r.StackDepth() > limit {
		return &DepthError{Limit: limit}
	}
	return nil
}

// leave reads the } or ] that closes a value.
func (c *Canonicalizer) leave() error {
	_, err := c.r.ReadToken()
	return err
}

// string appends the canonical form of the string v, quotes included.
func (c *Canonicalizer) string(dst, v []byte) []byte {
	return appendQuoted(dst, Unquote(&c.str, v), "\uFFFD")
}

// key returns an object key, decoded: a slice of the text when it needs
// no decoding.
func key(v []byte) []byte {
	var buf []byte // a key is kept: never a shared buffer
	return Unquote(&buf, v)
}

func (c *Canonicalizer) object(dst []byte, top bool) ([]byte, error) {
	if err := c.enter(); err != nil {
		return dst, err
	}
	begin := len(dst)
	dst = append(dst, '{')
	var small [16]member
	members := small[:0]
	sorted := true
	for c.r.PeekKind() == '"' {
		v, err := c.r.ReadValue()
		if err != nil {
			return dst, err
		}
		k := key(v)
		if len(members) > 0 {
			dst = append(dst, ',')
			if bytes.Compare(members[len(members)-1].key, k) >= 0 {
				sorted = false
			}
		}
		start := len(dst)
		dst = append(appendQuoted(dst, k, "\uFFFD"), ':')
		if dst, err = c.value(dst, false); err != nil {
			return dst, err
		}
		members = append(members, member{key: k, start: start, end: len(dst)})
	}
	if err := c.leave(); err != nil {
		return dst, err
	}
	if !sorted {
		// Sort by key, keep the last of duplicates, and write the object
		// again from a copy of what was written.
		c.tmp = append(c.tmp[:0], dst[begin:]...)
		written := c.tmp
		slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
		uniq := members[:0]
		for j, m := range members {
			if j+1 < len(members) && bytes.Equal(members[j+1].key, m.key) {
				continue // a later duplicate wins
			}
			uniq = append(uniq, m)
		}
		members = uniq
		dst = append(dst[:begin], '{')
		for j, m := range members {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, written[m.start-begin:m.end-begin]...)
		}
	}
	if top {
		c.top = true
		for _, m := range members {
			c.keys = append(c.keys, m.key)
		}
	}
	return append(dst, '}'), nil
}

func (c *Canonicalizer) array(dst []byte) ([]byte, error) {
	if err := c.enter(); err != nil {
		return dst, err
	}
	dst = append(dst, '[')
	for n := 0; ; n++ {
		switch c.r.PeekKind() {
		case ']':
			if err := c.leave(); err != nil {
				return dst, err
			}
			return append(dst, ']'), nil
		case 0:
			_, err := c.r.ReadToken() // the error PeekKind found
			return dst, err
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = c.value(dst, false); err != nil {
			return dst, err
		}
	}
}
