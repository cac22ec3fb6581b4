package sink

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical JSON is what decoding a value with encoding/json (UseNumber)
// and encoding it again (SetEscapeHTML(false)) produces: object keys sorted
// bytewise and unique (the last of duplicates wins), no insignificant
// space, numbers as written, strings escaped the way encoding/json escapes
// them, invalid UTF-8 replaced by U+FFFD. Content keys hash it, so it must
// not change; FuzzCanonicalMatchesEncodingJSON holds it to that reference.
// It is written out here because the reflective round trip was a fifth of
// the CPU time of a sync.

// AppendCanonical appends the canonical form of the single JSON value src
// to dst.
func AppendCanonical(dst, src []byte) ([]byte, error) {
	c := canonicalizer{src: src}
	dst, err := c.document(dst, nil)
	return dst, err
}

// CanonicalJSON is AppendCanonical for strings.
func CanonicalJSON(s string) (string, error) {
	b, err := AppendCanonical(nil, []byte(s))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// errSyntax reports where src stops being JSON.
type errSyntax struct {
	off int
	msg string
}

func (e *errSyntax) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.off, e.msg)
}

type canonicalizer struct {
	src   []byte
	i     int
	depth int
	// limit is the deepest nesting accepted; 0 means maxDepth.
	limit int
	// str is scratch for unquoting strings with escapes, tmp for
	// reordering an object's members.
	str, tmp []byte
	// With wantKeys, topObject says that the document is an object, and
	// keys holds its keys in canonical order (aliasing src, or scratch).
	wantKeys, topObject bool
	keys                [][]byte
}

// maxDepth matches encoding/json's nesting limit.
const maxDepth = 10000

func (c *canonicalizer) fail(msg string) error { return &errSyntax{off: c.i, msg: msg} }

func (c *canonicalizer) tooDeep() error {
	return fmt.Errorf("%w: more than %d levels", ErrTooDeep, cmp.Or(c.limit, maxDepth))
}

func (c *canonicalizer) space() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// document canonicalises the one value src holds; keys, when not nil,
// receives the top-level object's keys in canonical order.
func (c *canonicalizer) document(dst []byte, keys *[]string) ([]byte, error) {
	c.wantKeys = keys != nil
	dst, err := c.canonical(dst)
	if err == nil && keys != nil && c.topObject {
		*keys = make([]string, len(c.keys))
		for j, k := range c.keys {
			(*keys)[j] = string(k)
		}
	}
	return dst, err
}

// canonical canonicalises the one value src holds, and with wantKeys
// sets topObject and keys.
func (c *canonicalizer) canonical(dst []byte) ([]byte, error) {
	c.topObject, c.keys = false, c.keys[:0]
	c.space()
	var err error
	if c.wantKeys && c.i < len(c.src) && c.src[c.i] == '{' {
		dst, err = c.object(dst, true)
	} else {
		dst, err = c.value(dst)
	}
	if err != nil {
		return dst, err
	}
	c.space()
	if c.i != len(c.src) {
		return dst, c.fail("data after the value")
	}
	return dst, nil
}

func (c *canonicalizer) value(dst []byte) ([]byte, error) {
	c.space()
	if c.i >= len(c.src) {
		return dst, c.fail("unexpected end")
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.object(dst, false)
	case b == '[':
		return c.array(dst)
	case b == '"':
		return c.string(dst)
	case b == '-' || ('0' <= b && b <= '9'):
		return c.number(dst)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(c.src[c.i:], []byte(lit)) {
				c.i += len(lit)
				return append(dst, lit...), nil
			}
		}
		return dst, c.fail(fmt.Sprintf("unexpected %q", b))
	}
}

// member is one key, and the member as written (key, colon and canonical
// value) at dst[start:end].
type member struct {
	key        []byte
	start, end int
}

// object canonicalises the object at c.i; top says it is the document's,
// whose keys c.keys receives when wanted.
func (c *canonicalizer) object(dst []byte, top bool) ([]byte, error) {
	if c.depth++; c.depth > cmp.Or(c.limit, maxDepth) {
		return dst, c.tooDeep()
	}
	defer func() { c.depth-- }()
	c.i++ // {
	begin := len(dst)
	dst = append(dst, '{')
	var small [16]member
	members := small[:0]
	sorted := true
	c.space()
	if c.i < len(c.src) && c.src[c.i] == '}' {
		c.i++
		if top {
			c.topObject = true
		}
		return append(dst, '}'), nil
	}
	for {
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != '"' {
			return dst, c.fail("want an object key")
		}
		key, plain, err := c.key()
		if err != nil {
			return dst, err
		}
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return dst, c.fail("want ':' after an object key")
		}
		c.i++
		if len(members) > 0 {
			dst = append(dst, ',')
			if bytes.Compare(members[len(members)-1].key, key) >= 0 {
				sorted = false
			}
		}
		start := len(dst)
		if plain {
			dst = append(append(append(dst, '"'), key...), '"')
		} else {
			dst = appendQuoted(dst, key)
		}
		dst = append(dst, ':')
		if dst, err = c.value(dst); err != nil {
			return dst, err
		}
		members = append(members, member{key: key, start: start, end: len(dst)})
		c.space()
		if c.i >= len(c.src) {
			return dst, c.fail("unexpected end in an object")
		}
		if c.src[c.i] == ',' {
			c.i++
			continue
		}
		if c.src[c.i] != '}' {
			return dst, c.fail("want ',' or '}' in an object")
		}
		c.i++
		break
	}
	if !sorted {
		// Sort by key, keep the last of duplicates, and write the object
		// again from a copy of what was written.
		c.tmp = append(c.tmp[:0], dst[begin:]...)
		written := c.tmp
		for j := range members {
			members[j].start -= begin
			members[j].end -= begin
		}
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
			dst = append(dst, written[m.start:m.end]...)
		}
	}
	if top {
		c.topObject = true
		for _, m := range members {
			c.keys = append(c.keys, m.key)
		}
	}
	return append(dst, '}'), nil
}

func (c *canonicalizer) array(dst []byte) ([]byte, error) {
	if c.depth++; c.depth > cmp.Or(c.limit, maxDepth) {
		return dst, c.tooDeep()
	}
	defer func() { c.depth-- }()
	c.i++ // [
	dst = append(dst, '[')
	c.space()
	if c.i < len(c.src) && c.src[c.i] == ']' {
		c.i++
		return append(dst, ']'), nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = c.value(dst); err != nil {
			return dst, err
		}
		c.space()
		if c.i >= len(c.src) {
			return dst, c.fail("unexpected end in an array")
		}
		if c.src[c.i] == ',' {
			c.i++
			continue
		}
		if c.src[c.i] != ']' {
			return dst, c.fail("want ',' or ']' in an array")
		}
		c.i++
		return append(dst, ']'), nil
	}
}

// number copies a number as written, after checking its grammar.
func (c *canonicalizer) number(dst []byte) ([]byte, error) {
	start := c.i
	s := c.src
	i := c.i
	digits := func() int {
		n := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		c.i = i
		return dst, c.fail("want a digit")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			c.i = i
			return dst, c.fail("want a digit after '.'")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			c.i = i
			return dst, c.fail("want a digit in the exponent")
		}
	}
	c.i = i
	return append(dst, s[start:i]...), nil
}

// string appends the canonical form of the string at c.i.
func (c *canonicalizer) string(dst []byte) ([]byte, error) {
	raw, plain, err := c.scanString()
	if err != nil {
		return dst, err
	}
	if plain {
		return append(append(append(dst, '"'), raw...), '"'), nil
	}
	c.str = unquote(c.str[:0], raw)
	return appendQuoted(dst, c.str), nil
}

// key returns an object key, unquoted. It aliases src when the key has
// nothing to unquote, and plain says it is then canonical as it is.
func (c *canonicalizer) key() (key []byte, plain bool, err error) {
	raw, plain, err := c.scanString()
	if err != nil || plain {
		return raw, plain, err
	}
	return unquote(nil, raw), false, nil
}

// scanString moves past the string at c.i and returns what is between its
// quotes. plain reports that it is already canonical: no escapes, valid
// UTF-8 and nothing encoding/json would escape.
func (c *canonicalizer) scanString() (raw []byte, plain bool, err error) {
	s := c.src
	i := c.i + 1
	start := i
	plain = true
	for {
		if i >= len(s) {
			c.i = i
			return nil, false, c.fail("unterminated string")
		}
		b := s[i]
		switch {
		case b == '"':
			c.i = i + 1
			return s[start:i], plain, nil
		case b < 0x20:
			c.i = i
			return nil, false, c.fail("control character in a string")
		case b == '\\':
			plain = false
			i++
			if i >= len(s) {
				c.i = i
				return nil, false, c.fail("unterminated escape")
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 > len(s) || !isHex4(s[i+1:i+5]) {
					c.i = i
					return nil, false, c.fail(`want four hex digits after \u`)
				}
				i += 5
			default:
				c.i = i
				return nil, false, c.fail("invalid escape")
			}
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
				plain = false
			}
			i += size
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// unquote appends the string raw (a scanned string's contents) decodes to,
// as encoding/json decodes it: invalid UTF-8 and unpaired surrogates
// become U+FFFD.
func unquote(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		b := raw[i]
		switch {
		case b == '\\':
			e := raw[i+1]
			i += 2
			switch e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i : i+4])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = hex4(raw[i+2 : i+6])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						i += 6
						r = d
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
		case b < utf8.RuneSelf:
			dst = append(dst, b)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as a JSON string the way encoding/json does with
// HTML escaping off.
func appendQuoted[S []byte | string](dst []byte, s S) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			// Eight bytes at a time: all are written, and those from the
			// first that is not copied as it is are taken back. Most of a
			// submission's text is copied as it is.
			x := load8(s, i)
			n := 8
			if m := special8(x); m != 0 {
				n = bits.TrailingZeros64(m) / 8
			}
			dst = binary.LittleEndian.AppendUint64(dst, x)[:len(dst)+n]
			if i += n; n == 8 {
				continue
			}
		}
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b >= 0x20:
				dst = append(dst, b)
			case b == '\b':
				dst = append(dst, '\\', 'b')
			case b == '\f':
				dst = append(dst, '\\', 'f')
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			continue
		}
		n := min(len(s)-i, utf8.UTFMax)
		r, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// load8 reads s[i:i+8] as a little-endian word.
func load8[S []byte | string](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// special8 marks, in the high bit of each byte of the result, the bytes of
// x that appendQuoted does not copy as they are: control characters, quote,
// backslash, and bytes beyond ASCII (which it must look at). A byte above
// one marked may be marked too (a borrow carries), but the lowest mark is
// always the first such byte.
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * ones)
	bs := x ^ ('\\' * ones)
	ctl := (x - 0x20*ones) &^ x
	return (x | ctl | (q-ones)&^q | (bs-ones)&^bs) & highs
}
