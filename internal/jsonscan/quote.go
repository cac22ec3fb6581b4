package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendQuoted appends s as a JSON string the way encoding/json writes a
// Go string with HTML escaping off: U+2028 and U+2029 escaped, invalid
// UTF-8 as \ufffd.
func AppendQuoted[S ~[]byte | ~string](dst []byte, s S) []byte {
	return appendQuoted(dst, s, `\ufffd`)
}

// appendQuoted is AppendQuoted writing bad, for each byte of invalid
// UTF-8 in s. Text decoded from JSON has U+FFFD itself there, which
// encoding/json writes as it is.
func appendQuoted[S ~[]byte | ~string](dst []byte, s S, bad string) []byte {
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
			dst = append(dst, bad...)
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
func load8[S ~[]byte | ~string](s S, i int) uint64 {
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
