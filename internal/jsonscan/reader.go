package jsonscan

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is encoding/json's nesting limit.
const MaxDepth = 10000

// Kind is the kind of the next token: '{', '}', '[', ']', '"' (a string,
// a member's name included), '0' (a number), 't', 'f', 'n', or 0 at the
// end of the text or of what is JSON in it.
type Kind byte

// A Reader reads one JSON text held in memory, token by token or value by
// value, accepting exactly what encoding/json accepts: invalid UTF-8 inside
// strings, duplicate names, nesting up to MaxDepth. Values it returns are
// slices of the text. Reset and reused, it does not allocate.
type Reader struct {
	src []byte
	i   int
	err error
	// depth is how many containers are open; bit n of low, or of deep
	// beyond 64 levels, says whether the one at depth n+1 is an object.
	// Kept in a word rather than a slice, a Reader allocates nothing.
	depth int
	low   uint64
	deep  []uint64
	// state says what the grammar wants next.
	state state
	// next is the kind PeekKind found at i, 0 until it looks; name says
	// that it is a member's name.
	next Kind
	name bool
}

type state uint8

const (
	wantValue      state = iota // a value, or a name in an object
	wantFirst                   // as wantValue, or the container's close
	wantColon                   // the colon after a name
	wantMember                  // a member's value, after its colon
	wantCommaClose              // a comma or the container's close; the end at the top
)

// Reset makes r read src.
func (r *Reader) Reset(src []byte) {
	r.src, r.i, r.err, r.depth, r.state, r.next = src, 0, nil, 0, wantValue, 0
}

// Offset is where the text after the last token or value read starts.
func (r *Reader) Offset() int { return r.i }

// StackDepth is how many objects and arrays are open.
func (r *Reader) StackDepth() int { return r.depth }

// inObject reports whether the innermost open container is an object.
func (r *Reader) inObject() bool {
	n := r.depth - 1
	if n < 64 {
		return n >= 0 && r.low>>n&1 != 0
	}
	n -= 64
	return r.deep[n/64]>>(n%64)&1 != 0
}

// push opens a container, an object or not.
func (r *Reader) push(object bool) {
	n := r.depth
	r.depth++
	bit := uint64(0)
	if object {
		bit = 1
	}
	if n < 64 {
		r.low = r.low&^(1<<n) | bit<<n
		return
	}
	n -= 64
	if n/64 >= len(r.deep) {
		r.deep = append(r.deep, 0)
	}
	r.deep[n/64] = r.deep[n/64]&^(1<<(n%64)) | bit<<(n%64)
}

func (r *Reader) fail(msg string) Kind {
	if r.err == nil {
		r.err = &SyntaxError{Offset: r.i, Msg: msg}
	}
	return 0
}

func (r *Reader) space() {
	for r.i < len(r.src) && spaces[r.src[r.i]] {
		r.i++
	}
}

// spaces marks the bytes JSON takes as space between tokens.
var spaces = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// PeekKind returns the kind of the next token without reading it (the
// comma or colon before it aside). 0 means the end, or an error that the
// next read returns.
func (r *Reader) PeekKind() Kind {
	if r.next != 0 || r.err != nil {
		return r.next
	}
	r.next, r.name = r.peek()
	return r.next
}

// peek finds the next token's kind, moving past the comma or colon before
// it, and whether it is a member's name.
func (r *Reader) peek() (k Kind, name bool) {
	r.space()
	switch r.state {
	case wantColon:
		if r.i >= len(r.src) || r.src[r.i] != ':' {
			return r.fail("want ':' after an object key"), false
		}
		r.i++
		r.space()
		r.state = wantMember
	case wantCommaClose:
		if r.depth == 0 {
			return 0, false
		}
		close := byte(']')
		if r.inObject() {
			close = '}'
		}
		switch {
		case r.i < len(r.src) && r.src[r.i] == ',':
			r.i++
			r.space()
			r.state = wantValue
			if close == '}' {
				if r.i < len(r.src) && r.src[r.i] == '"' {
					return '"', true
				}
				return r.fail("want an object key"), false
			}
		case r.i < len(r.src) && r.src[r.i] == close:
			return Kind(close), false
		case r.i >= len(r.src):
			return r.fail("unexpected end"), false
		default:
			return r.fail(fmt.Sprintf("want ',' or '%c'", close)), false
		}
	}
	if r.i >= len(r.src) {
		return r.fail("unexpected end"), false
	}
	b := r.src[r.i]
	if r.state == wantValue || r.state == wantFirst {
		if r.inObject() {
			switch {
			case b == '"':
				return '"', true
			case b == '}' && r.state == wantFirst:
				return '}', false
			}
			return r.fail("want an object key"), false
		}
		if b == ']' && r.state == wantFirst {
			return ']', false
		}
	}
	if k := kinds[b]; k != 0 {
		return k, false
	}
	return r.fail(fmt.Sprintf("unexpected %q", b)), false
}

// kinds maps the first byte of a value to its kind.
var kinds = func() (t [256]Kind) {
	for _, b := range []byte(`"{[tfn`) {
		t[b] = Kind(b)
	}
	for _, b := range []byte("-0123456789") {
		t[b] = '0'
	}
	return t
}()

// ReadToken reads the next token: one of { } [ ], or a whole value. At
// the end of the text it returns io.EOF.
func (r *Reader) ReadToken() (Kind, error) {
	k := r.PeekKind()
	r.next = 0
	switch {
	case r.err != nil:
		return 0, r.err
	case k == 0:
		if r.i < len(r.src) {
			r.fail("data after the value")
			return 0, r.err
		}
		return 0, io.EOF
	case k == '{' || k == '[':
		if r.depth >= MaxDepth {
			r.fail(fmt.Sprintf("nested more than %d levels", MaxDepth))
			return 0, r.err
		}
		r.push(k == '{')
		r.i++
		r.state = wantFirst
	case k == '}' || k == ']':
		r.depth--
		r.i++
		r.state = wantCommaClose
	default:
		if _, err := r.ReadValue(); err != nil {
			return 0, err
		}
	}
	return k, nil
}

// ReadValue reads the next value, or name, and returns it as a slice of
// the text, capped so that appending to it cannot overwrite what follows.
func (r *Reader) ReadValue() ([]byte, error) {
	k := r.PeekKind()
	r.next = 0
	if r.err != nil {
		return nil, r.err
	}
	name := r.name
	start := r.i
	var ok bool
	switch k {
	case '"':
		ok = r.string()
	case '{', '[':
		ok = r.container(r.depth + 1)
	case '0':
		ok = r.number()
	case 't':
		ok = r.literal("true")
	case 'f':
		ok = r.literal("false")
	case 'n':
		ok = r.literal("null")
	case 0:
		r.fail("data after the value")
	default:
		r.fail(fmt.Sprintf("unexpected %q", k))
	}
	if !ok {
		return nil, r.err
	}
	if name {
		r.state = wantColon
	} else {
		r.state = wantCommaClose
	}
	return r.src[start:r.i:r.i], nil
}

// End checks that nothing but space follows the value read.
func (r *Reader) End() error {
	if _, err := r.ReadToken(); err != io.EOF {
		if err == nil {
			r.fail("data after the value")
			err = r.err
		}
		return err
	}
	return nil
}

// A SyntaxError says where a text stops being JSON.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

// value moves past the value at r.i, depth levels deep, checking it.
func (r *Reader) value(depth int) bool {
	r.space()
	if r.i >= len(r.src) {
		r.fail("unexpected end")
		return false
	}
	switch b := r.src[r.i]; {
	case b == '"':
		return r.string()
	case b == '{', b == '[':
		return r.container(depth + 1)
	case b == '-' || '0' <= b && b <= '9':
		return r.number()
	case b == 't':
		return r.literal("true")
	case b == 'f':
		return r.literal("false")
	case b == 'n':
		return r.literal("null")
	default:
		r.fail(fmt.Sprintf("unexpected %q", b))
		return false
	}
}

// container moves past the object or array at r.i, depth levels deep.
func (r *Reader) container(depth int) bool {
	if depth > MaxDepth {
		r.fail(fmt.Sprintf("nested more than %d levels", MaxDepth))
		return false
	}
	object := r.src[r.i] == '{'
	close := byte(']')
	if object {
		close = '}'
	}
	r.i++
	r.space()
	if r.i < len(r.src) && r.src[r.i] == close {
		r.i++
		return true
	}
	for {
		if object {
			r.space()
			if r.i >= len(r.src) || r.src[r.i] != '"' {
				r.fail("want an object key")
				return false
			}
			if !r.string() {
				return false
			}
			r.space()
			if r.i >= len(r.src) || r.src[r.i] != ':' {
				r.fail("want ':' after an object key")
				return false
			}
			r.i++
		}
		if !r.value(depth) {
			return false
		}
		r.space()
		switch {
		case r.i >= len(r.src):
			r.fail("unexpected end")
			return false
		case r.src[r.i] == ',':
			r.i++
		case r.src[r.i] == close:
			r.i++
			return true
		default:
			r.fail(fmt.Sprintf("want ',' or '%c'", close))
			return false
		}
	}
}

func (r *Reader) literal(lit string) bool {
	if len(r.src)-r.i < len(lit) || string(r.src[r.i:r.i+len(lit)]) != lit {
		r.fail("want " + lit)
		return false
	}
	r.i += len(lit)
	return true
}

// number moves past a number in JSON's grammar; what follows it is checked
// by the caller (a delimiter, or the end).
func (r *Reader) number() bool {
	b, i := r.src, r.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		r.i = i
		r.fail("want a digit")
		return false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	default:
		r.i = i
		r.fail("want a digit")
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			r.i = i
			r.fail("want a digit after '.'")
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			r.i = i
			r.fail("want a digit in the exponent")
			return false
		}
	}
	r.i = i
	return true
}

// plain marks the bytes a string can hold as they are: not a control
// character, a quote or a backslash. Bytes beyond ASCII are taken as they
// come, valid UTF-8 or not, as encoding/json takes them.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// string moves past the string at r.i ('"').
func (r *Reader) string() bool {
	b := r.src
	i := r.i + 1
	for {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			r.i = i
			r.fail("unterminated string")
			return false
		}
		switch b[i] {
		case '"':
			r.i = i + 1
			return true
		case '\\':
			i++
			if i >= len(b) {
				r.i = i
				r.fail("unterminated string")
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 > len(b) || hex4(b[i+1:i+5]) < 0 {
					r.i = i
					r.fail(`want four hex digits after \u`)
					return false
				}
				i += 5
			default:
				r.i = i
				r.fail("invalid escape")
				return false
			}
		default:
			r.i = i
			r.fail("control character in a string")
			return false
		}
	}
}

// StringEnd returns where the JSON string that starts at src[i] ends, just
// past its closing quote, or -1 when no valid string starts there.
func StringEnd(src []byte, i int) int {
	if i >= len(src) || src[i] != '"' {
		return -1
	}
	r := Reader{src: src, i: i}
	if !r.string() {
		return -1
	}
	return r.i
}

// String returns v without the space around it when that is exactly one
// JSON string, quotes included.
func String(v []byte) ([]byte, bool) {
	i, j := 0, len(v)
	for i < j && isSpace(v[i]) {
		i++
	}
	for j > i && isSpace(v[j-1]) {
		j--
	}
	if j-i < 2 || v[i] != '"' {
		return v, false
	}
	r := Reader{src: v[i:j]}
	if !r.string() || r.i != j-i {
		return v, false
	}
	return v[i:j], true
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// hex4 decodes four hex digits, -1 if they are not.
func hex4[S ~string | ~[]byte](b S) rune {
	var r rune
	for i := range len(b) {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Unquote returns the text of quoted, a JSON string a Reader accepted
// (quotes included), decoded as AppendUnquote decodes it. When quoted holds
// no escape and only valid UTF-8 its text is returned as a slice of it, with
// no copy; otherwise it is decoded into *buf, which keeps what it grew to
// for the next call. This is the one fast path for every caller, so that
// every caller reads invalid UTF-8 the same way.
func Unquote(buf *[]byte, quoted []byte) []byte {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw
	}
	*buf = AppendUnquote((*buf)[:0], quoted)
	return *buf
}

// AppendUnquote appends the text of quoted, a JSON string a Reader
// accepted (quotes included), decoded as encoding/json decodes it: invalid
// UTF-8 and unpaired surrogates become U+FFFD.
func AppendUnquote[S ~string | ~[]byte](dst []byte, quoted S) []byte {
	raw := quoted[1 : len(quoted)-1]
	for i := 0; i < len(raw); {
		switch b := raw[i]; {
		case b == '\\':
			var r rune
			r, i = unescape(raw, i)
			dst = utf8.AppendRune(dst, r)
		case b < utf8.RuneSelf:
			dst = append(dst, b)
			i++
		default:
			n := min(len(raw)-i, utf8.UTFMax)
			r, w := utf8.DecodeRuneInString(string(raw[i : i+n]))
			if r == utf8.RuneError && w == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+w]...)
			}
			i += w
		}
	}
	return dst
}

// unescape decodes the escape at raw[i] and returns the rune and where the
// text after it starts. A \u escape of a surrogate takes the next escape
// with it when the two make a pair.
func unescape[S ~string | ~[]byte](raw S, i int) (rune, int) {
	switch e := raw[i+1]; e {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := hex4(raw[i+2 : i+6])
		i += 6
		if !utf16.IsSurrogate(r) {
			return r, i
		}
		if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
			if pair := utf16.DecodeRune(r, hex4(raw[i+2:i+6])); pair != utf8.RuneError {
				return pair, i + 6
			}
		}
		return utf8.RuneError, i
	default: // " \ /
		return rune(e), i + 2
	}
}
