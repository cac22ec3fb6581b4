package fieldpolicy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/formsync/formsync/sink"
)

// Fields applies the policy to obj, a submission's fields as canonical
// JSON (an object, keys sorted, no space): it removes the members the
// policy drops and replaces the values it hashes by the JSON string of
// their HashValue, which needs no escaping. Every other byte is left as it
// was, so the result is canonical too. When no member is dropped or
// hashed it returns obj itself. Input that is not a JSON object is an
// error.
func (p *Policy) Fields(obj string) (string, error) {
	if p.empty() {
		return obj, nil
	}
	if err := p.Validate(); err != nil {
		return "", err
	}
	var small [4]edit // room for the edits of a typical submission, on the stack
	r := rewriter[string]{p: p, sc: scanner[string]{src: obj}}
	edits, err := r.fields(small[:0])
	r.done()
	if err != nil {
		return "", fmt.Errorf("field policy: fields: %w", err)
	}
	if len(edits) == 0 {
		return obj, nil
	}
	return applyString(obj, edits), nil
}

// Raw applies the policy to a submission object exactly as the API sent
// it: to the members of its fields member and of its data member (the
// live API sends the values under data), when they are objects; those two
// names in any case, since encoding/json would decode them so. A member
// is matched by its unescaped name, so "em\u0061il" is email. Only the
// dropped members and hashed values change; the rest of raw, space and
// escapes included, is copied as sent, and raw itself is returned when
// nothing changes. raw that is JSON but not an object is returned as it
// is; raw that is not JSON is an error.
//
// A hashed value that is an object or an array is hashed in its canonical
// form (what encoding/json's round trip gives, as in the stored fields),
// so that it hashes alike in the raw object and in the fields.
func (p *Policy) Raw(raw []byte) ([]byte, error) {
	if p.empty() {
		return raw, nil
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var small [4]edit
	r := rewriter[[]byte]{p: p, sc: scanner[[]byte]{src: raw}, canonicalize: true}
	edits, err := r.submission(small[:0])
	r.done()
	if err != nil {
		return nil, fmt.Errorf("field policy: raw submission: %w", err)
	}
	if len(edits) == 0 {
		return raw, nil
	}
	return applyBytes(make([]byte, 0, outputLen(len(raw), edits)), raw, edits), nil
}

// edit replaces src[from:to]: by nothing for a dropped member (with one of
// the commas around it), by the JSON string of hex for a hashed value.
type edit struct {
	from, to int
	hashed   bool
	hex      [hexLen]byte
}

// rewriter finds the edits a policy makes to one JSON text. Edits are
// passed along and returned rather than kept in the rewriter, so that the
// caller's array for them can stay on its stack.
type rewriter[S text] struct {
	p  *Policy
	sc scanner[S]
	h  *hasher // taken at the first hashed value
	// name holds an escaped member name, unescaped.
	name []byte
	// canonicalize makes a hashed object or array hash as its canonical
	// form; raw submissions are not canonical.
	canonicalize bool
}

func (r *rewriter[S]) done() {
	if r.h != nil {
		r.p.release(r.h)
	}
}

// fields reads a text that must be one object and edits its members.
func (r *rewriter[S]) fields(edits []edit) ([]edit, error) {
	r.sc.space()
	if r.sc.peek() != '{' {
		if err := r.sc.value(); err != nil {
			return nil, err
		}
		return nil, errors.New("not a JSON object")
	}
	edits, err := r.object(edits)
	if err != nil {
		return nil, err
	}
	return edits, r.sc.end()
}

// submission reads a raw submission and edits the members of its fields
// and data objects. A text that is not an object is read only to check
// it.
func (r *rewriter[S]) submission(edits []edit) ([]edit, error) {
	sc := &r.sc
	sc.space()
	if sc.peek() != '{' {
		if err := sc.value(); err != nil {
			return nil, err
		}
		return nil, sc.end()
	}
	empty, err := sc.openObject()
	for more := !empty; err == nil && more; more, err = sc.nextMember() {
		start, end, escaped, kerr := sc.memberKey()
		if kerr != nil {
			return nil, kerr
		}
		if sc.peek() == '{' && r.holdsValues(start, end, escaped) {
			edits, err = r.object(edits)
		} else {
			err = sc.value()
		}
		if err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	return edits, sc.end()
}

// Folded names of the members holding a submission's values.
var (
	fieldsMember = foldString("fields")
	dataMember   = foldString("data")
)

// holdsValues reports whether the key at src[start:end] names fields or
// data. Case is ignored because encoding/json, which decodes submissions,
// ignores it too: values sent under "Data" would reach the fields.
func (r *rewriter[S]) holdsValues(start, end int, escaped bool) bool {
	if escaped {
		r.name = unquote(r.name[:0], r.sc.src[start+1:end-1])
		return match(fieldsMember, r.name) || match(dataMember, r.name)
	}
	name := r.sc.src[start+1 : end-1]
	return match(fieldsMember, name) || match(dataMember, name)
}

// action returns what the policy does to the member whose key is at
// src[start:end].
func (r *rewriter[S]) action(start, end int, escaped bool) Action {
	if escaped {
		r.name = unquote(r.name[:0], r.sc.src[start+1:end-1])
		return actionOf(r.p, r.name)
	}
	return actionOf(r.p, r.sc.src[start+1:end-1])
}

// object reads the object at the cursor and appends the edits that apply
// the policy to its members.
//
// A dropped member goes with the comma before it when a member is kept
// before it. When none is, it goes with the comma after it instead: the
// span from its key up to the next kept member's key is removed once that
// member is seen (pending), or up to the end of the last member when
// none is kept.
func (r *rewriter[S]) object(edits []edit) ([]edit, error) {
	sc := &r.sc
	empty, err := sc.openObject()
	if err != nil || empty {
		return edits, err
	}
	kept := false
	pending := -1 // start of dropped members no kept member precedes
	prevEnd := 0  // end of the previous member's value
	for more := true; more; {
		start, end, escaped, err := sc.memberKey()
		if err != nil {
			return nil, err
		}
		action := r.action(start, end, escaped)
		valueStart := sc.i
		if err := sc.value(); err != nil {
			return nil, err
		}
		valueEnd := sc.i
		switch {
		case action == Drop && kept:
			edits = append(edits, edit{from: prevEnd, to: valueEnd})
		case action == Drop:
			if pending < 0 {
				pending = start
			}
		default:
			if pending >= 0 {
				edits = append(edits, edit{from: pending, to: start})
				pending = -1
			}
			if action == Hash {
				edits = append(edits, edit{from: valueStart, to: valueEnd, hashed: true})
				if err := r.hash(&edits[len(edits)-1]); err != nil {
					return nil, err
				}
			}
			kept = true
		}
		prevEnd = valueEnd
		if more, err = sc.nextMember(); err != nil {
			return nil, err
		}
	}
	if pending >= 0 {
		edits = append(edits, edit{from: pending, to: prevEnd})
	}
	return edits, nil
}

// hash fills in e.hex with the hash of the value at src[e.from:e.to].
func (r *rewriter[S]) hash(e *edit) error {
	if r.h == nil {
		r.h = r.p.hasher()
	}
	v := r.sc.src[e.from:e.to]
	if r.canonicalize && (v[0] == '{' || v[0] == '[') {
		c, err := sink.AppendCanonical(r.h.buf[:0], []byte(v))
		if err != nil {
			return err
		}
		r.h.buf = c
	} else {
		r.h.buf = loadValue(r.h.buf[:0], v)
	}
	r.h.hexSum(e.hex[:])
	return nil
}

// outputLen is the length of a text of n bytes after edits.
func outputLen(n int, edits []edit) int {
	for _, e := range edits {
		n -= e.to - e.from
		if e.hashed {
			n += hexLen + 2
		}
	}
	return n
}

func applyBytes(dst, src []byte, edits []edit) []byte {
	at := 0
	for i := range edits {
		e := &edits[i]
		dst = append(dst, src[at:e.from]...)
		if e.hashed {
			dst = append(append(append(dst, '"'), e.hex[:]...), '"')
		}
		at = e.to
	}
	return append(dst, src[at:]...)
}

// applyString is applyBytes building a string in place, which saves
// copying the result from bytes.
func applyString(src string, edits []edit) string {
	var b strings.Builder
	b.Grow(outputLen(len(src), edits))
	at := 0
	for i := range edits {
		e := &edits[i]
		b.WriteString(src[at:e.from])
		if e.hashed {
			b.WriteByte('"')
			b.Write(e.hex[:])
			b.WriteByte('"')
		}
		at = e.to
	}
	b.WriteString(src[at:])
	return b.String()
}
