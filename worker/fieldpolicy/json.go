package fieldpolicy

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// Hashed strings are decoded here rather than by encoding/json, which
// would allocate a string for every value hashed; they decode exactly as
// encoding/json decodes them.

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
	src S
	i   int
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
