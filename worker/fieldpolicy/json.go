package fieldpolicy

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// The policy rewrites JSON in place: it finds members by scanning the text
// and replaces only their bytes, so that everything else stays as it was
// (canonical fields stay canonical, a raw submission stays as the API sent
// it) and nothing is decoded into maps only to be encoded again. The
// scanner accepts exactly what encoding/json.Valid accepts: invalid UTF-8
// inside strings included, nesting up to the same depth.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// syntaxError reports where the input stops being JSON.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.off, e.msg)
}

// scanner reads one JSON value from src, checking it as it goes.
type scanner[S text] struct {
	src   S
	i     int
	depth int
}

func (sc *scanner[S]) fail(msg string) error { return &syntaxError{off: sc.i, msg: msg} }

// peek returns the byte at the cursor, 0 at the end.
func (sc *scanner[S]) peek() byte {
	if sc.i < len(sc.src) {
		return sc.src[sc.i]
	}
	return 0
}

func (sc *scanner[S]) space() {
	for sc.i < len(sc.src) {
		switch sc.src[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// end checks that nothing but space follows the value read.
func (sc *scanner[S]) end() error {
	sc.space()
	if sc.i != len(sc.src) {
		return sc.fail("data after the value")
	}
	return nil
}

// value moves past the value at the cursor (after space).
func (sc *scanner[S]) value() error {
	sc.space()
	switch b := sc.peek(); {
	case sc.i >= len(sc.src):
		return sc.fail("unexpected end")
	case b == '{':
		return sc.object()
	case b == '[':
		return sc.array()
	case b == '"':
		_, err := sc.string()
		return err
	case b == '-' || '0' <= b && b <= '9':
		return sc.number()
	case b == 't':
		return sc.literal("true")
	case b == 'f':
		return sc.literal("false")
	case b == 'n':
		return sc.literal("null")
	default:
		return sc.fail(fmt.Sprintf("unexpected %q", b))
	}
}

func (sc *scanner[S]) literal(lit string) error {
	for j := range len(lit) {
		if sc.i >= len(sc.src) || sc.src[sc.i] != lit[j] {
			return sc.fail("want " + lit)
		}
		sc.i++
	}
	return nil
}

func (sc *scanner[S]) object() error {
	empty, err := sc.openObject()
	if err != nil || empty {
		return err
	}
	for {
		if _, _, _, err := sc.memberKey(); err != nil {
			return err
		}
		if err := sc.value(); err != nil {
			return err
		}
		if more, err := sc.nextMember(); err != nil || !more {
			return err
		}
	}
}

// openObject moves past the { at the cursor and reports whether the object
// is empty (and then past its }).
func (sc *scanner[S]) openObject() (empty bool, err error) {
	if err := sc.enter(); err != nil {
		return false, err
	}
	sc.space()
	if sc.peek() == '}' {
		sc.i++
		sc.depth--
		return true, nil
	}
	return false, nil
}

// memberKey reads a member's key and its colon, and leaves the cursor at
// the value. The key, quotes included, is src[start:end]; escaped reports
// that it holds a backslash.
func (sc *scanner[S]) memberKey() (start, end int, escaped bool, err error) {
	sc.space()
	if sc.peek() != '"' {
		return 0, 0, false, sc.fail("want an object key")
	}
	start = sc.i
	if escaped, err = sc.string(); err != nil {
		return 0, 0, false, err
	}
	end = sc.i
	sc.space()
	if sc.peek() != ':' {
		return 0, 0, false, sc.fail("want ':' after an object key")
	}
	sc.i++
	sc.space()
	return start, end, escaped, nil
}

// nextMember reads what follows a member: a comma (more) or the object's
// closing brace.
func (sc *scanner[S]) nextMember() (more bool, err error) {
	sc.space()
	switch sc.peek() {
	case ',':
		sc.i++
		return true, nil
	case '}':
		sc.i++
		sc.depth--
		return false, nil
	}
	if sc.i >= len(sc.src) {
		return false, sc.fail("unexpected end in an object")
	}
	return false, sc.fail("want ',' or '}' in an object")
}

func (sc *scanner[S]) array() error {
	if err := sc.enter(); err != nil {
		return err
	}
	sc.space()
	if sc.peek() == ']' {
		sc.i++
		sc.depth--
		return nil
	}
	for {
		if err := sc.value(); err != nil {
			return err
		}
		sc.space()
		switch sc.peek() {
		case ',':
			sc.i++
			continue
		case ']':
			sc.i++
			sc.depth--
			return nil
		}
		if sc.i >= len(sc.src) {
			return sc.fail("unexpected end in an array")
		}
		return sc.fail("want ',' or ']' in an array")
	}
}

// enter moves past the opening { or [ at the cursor, one level deeper.
func (sc *scanner[S]) enter() error {
	if sc.depth++; sc.depth > maxDepth {
		return sc.fail(fmt.Sprintf("nested more than %d levels", maxDepth))
	}
	sc.i++
	return nil
}

func (sc *scanner[S]) number() error {
	if sc.peek() == '-' {
		sc.i++
	}
	switch {
	case sc.peek() == '0':
		sc.i++
	case sc.digits() == 0:
		return sc.fail("want a digit")
	}
	if sc.peek() == '.' {
		sc.i++
		if sc.digits() == 0 {
			return sc.fail("want a digit after '.'")
		}
	}
	if b := sc.peek(); b == 'e' || b == 'E' {
		sc.i++
		if b := sc.peek(); b == '+' || b == '-' {
			sc.i++
		}
		if sc.digits() == 0 {
			return sc.fail("want a digit in the exponent")
		}
	}
	return nil
}

func (sc *scanner[S]) digits() int {
	start := sc.i
	for sc.i < len(sc.src) && '0' <= sc.src[sc.i] && sc.src[sc.i] <= '9' {
		sc.i++
	}
	return sc.i - start
}

// string moves past the string at the cursor and reports whether it holds
// an escape.
func (sc *scanner[S]) string() (escaped bool, err error) {
	s := sc.src
	sc.i++ // "
	for sc.i < len(s) {
		switch b := s[sc.i]; {
		case b == '"':
			sc.i++
			return escaped, nil
		case b < 0x20:
			return false, sc.fail("control character in a string")
		case b == '\\':
			escaped = true
			if err := sc.escape(); err != nil {
				return false, err
			}
		default:
			sc.i++
		}
	}
	return false, sc.fail("unterminated string")
}

// escape moves past the escape sequence at the cursor.
func (sc *scanner[S]) escape() error {
	s := sc.src
	sc.i++ // \
	if sc.i >= len(s) {
		return sc.fail("unterminated string")
	}
	switch s[sc.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		sc.i++
		return nil
	case 'u':
		if sc.i+5 > len(s) || hex4(s[sc.i+1:sc.i+5]) < 0 {
			return sc.fail(`want four hex digits after \u`)
		}
		sc.i += 5
		return nil
	}
	return sc.fail("invalid escape")
}

// hex4 decodes four hex digits, -1 if they are not.
func hex4[S text](b S) rune {
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

// stringContents returns what is between the quotes of v when v, space
// around it aside, is exactly one JSON string.
func stringContents[S text](v S) (S, bool) {
	sc := scanner[S]{src: v}
	sc.space()
	start := sc.i
	if sc.peek() != '"' {
		return v, false
	}
	if _, err := sc.string(); err != nil {
		return v, false
	}
	end := sc.i
	if sc.end() != nil {
		return v, false
	}
	return v[start+1 : end-1], true
}

// unquote appends the text raw, the contents of a string the scanner
// accepted, decodes to, as encoding/json decodes it: invalid UTF-8 and
// unpaired surrogates become U+FFFD.
func unquote[S text](dst []byte, raw S) []byte {
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
			r, w := decodeRune(raw, i)
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
func unescape[S text](raw S, i int) (rune, int) {
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
