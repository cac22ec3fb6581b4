package fieldpolicy

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/formsync/formsync/internal/jsonscan"
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
	// The reader only reads obj's bytes.
	r := rewriter{p: p, src: unsafe.Slice(unsafe.StringData(obj), len(obj))}
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
	r := rewriter{p: p, src: raw, canonicalize: true}
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
type rewriter struct {
	p   *Policy
	src []byte
	r   jsonscan.Reader
	h   *hasher // taken at the first hashed value
	// name holds an escaped member name, unescaped.
	name []byte
	// canonicalize makes a hashed object or array hash as its canonical
	// form; raw submissions are not canonical.
	canonicalize bool
}

func (r *rewriter) start() *jsonscan.Reader {
	r.r.Reset(r.src)
	return &r.r
}

func (r *rewriter) done() {
	if r.h != nil {
		r.p.release(r.h)
	}
}

// fields reads a text that must be one object and edits its members.
func (r *rewriter) fields(edits []edit) ([]edit, error) {
	rd := r.start()
	if rd.PeekKind() != '{' {
		if _, err := rd.ReadValue(); err != nil {
			return nil, err
		}
		return nil, errors.New("not a JSON object")
	}
	edits, err := r.object(edits)
	if err != nil {
		return nil, err
	}
	return edits, rd.End()
}

// submission reads a raw submission and edits the members of its fields
// and data objects. A text that is not an object is read only to check
// it.
func (r *rewriter) submission(edits []edit) ([]edit, error) {
	rd := r.start()
	if rd.PeekKind() != '{' {
		if _, err := rd.ReadValue(); err != nil {
			return nil, err
		}
		return nil, rd.End()
	}
	if _, err := rd.ReadToken(); err != nil {
		return nil, err
	}
	for rd.PeekKind() == '"' {
		key, err := rd.ReadValue()
		if err != nil {
			return nil, err
		}
		if rd.PeekKind() == '{' && r.holdsValues(key) {
			edits, err = r.object(edits)
		} else {
			_, err = rd.ReadValue()
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := rd.ReadToken(); err != nil { // }
		return nil, err
	}
	return edits, rd.End()
}

// Folded names of the members holding a submission's values.
var (
	fieldsMember = foldString("fields")
	dataMember   = foldString("data")
)

// holdsValues reports whether the key (quotes included) names fields or
// data. Case is ignored because encoding/json, which decodes submissions,
// ignores it too: values sent under "Data" would reach the fields.
func (r *rewriter) holdsValues(key []byte) bool {
	name := r.unescaped(key)
	return match(fieldsMember, name) || match(dataMember, name)
}

// action returns what the policy does to the member named key (quotes
// included).
func (r *rewriter) action(key []byte) Action { return actionOf(r.p, r.unescaped(key)) }

// unescaped returns the name key (quotes included) stands for.
func (r *rewriter) unescaped(key []byte) []byte { return jsonscan.Unquote(&r.name, key) }

// object reads the object at the cursor and appends the edits that apply
// the policy to its members.
//
// A dropped member goes with the comma before it when a member is kept
// before it. When none is, it goes with the comma after it instead: the
// span from its key up to the next kept member's key is removed once that
// member is seen (pending), or up to the end of the last member when
// none is kept.
func (r *rewriter) object(edits []edit) ([]edit, error) {
	rd := &r.r
	if _, err := rd.ReadToken(); err != nil { // {
		return nil, err
	}
	kept := false
	pending := -1 // start of dropped members no kept member precedes
	prevEnd := 0  // end of the previous member's value
	for rd.PeekKind() == '"' {
		key, err := rd.ReadValue()
		if err != nil {
			return nil, err
		}
		start := rd.Offset() - len(key)
		action := r.action(key)
		v, err := rd.ReadValue()
		if err != nil {
			return nil, err
		}
		valueEnd := rd.Offset()
		valueStart := valueEnd - len(v)
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
	}
	if _, err := rd.ReadToken(); err != nil { // }
		return nil, err
	}
	if pending >= 0 {
		edits = append(edits, edit{from: pending, to: prevEnd})
	}
	return edits, nil
}

// hash fills in e.hex with the hash of the value at src[e.from:e.to].
func (r *rewriter) hash(e *edit) error {
	if r.h == nil {
		r.h = r.p.hasher()
	}
	v := r.src[e.from:e.to]
	if r.canonicalize && (v[0] == '{' || v[0] == '[') {
		c, err := jsonscan.AppendCanonical(r.h.buf[:0], v)
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
