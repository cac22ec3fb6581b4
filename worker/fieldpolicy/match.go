package fieldpolicy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// text is the two forms JSON reaches a policy in: canonical fields as a
// string, raw submissions as bytes. Code over text reads either without
// converting one to the other, which would copy it.
type text interface{ ~string | ~[]byte }

// fold maps r to the smallest rune of its case-folding orbit, the way
// encoding/json folds keys to match them to struct fields: "EMAIL",
// "Email" and "email" fold alike, and so do "k" and the Kelvin sign.
// Comparing folded runes is case-insensitive matching without building a
// lower-cased copy of every name.
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	for {
		next := unicode.SimpleFold(r)
		if next <= r {
			return next
		}
		r = next
	}
}

// foldString folds every rune of s.
func foldString(s string) string {
	return strings.Map(fold, s)
}

// decodeRune decodes the rune at s[i]; invalid UTF-8 is utf8.RuneError of
// width 1, as utf8.DecodeRune has it.
func decodeRune[S text](s S, i int) (rune, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return rune(b), 1
	}
	return utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
}

// match reports whether name matches pattern, a folded pattern (foldString)
// in which * matches any run of runes, the empty one included.
//
// It walks both once, remembering only the last * seen: on a mismatch the
// last * takes one more rune of name and matching resumes after it. An
// earlier * never needs to take more, since the last one can take
// anything the earlier one could have.
func match[S text](pattern string, name S) bool {
	p, n := 0, 0
	star, starName := -1, 0 // just after the last *, and where in name it resumes
	for n < len(name) {
		if p < len(pattern) {
			pc, nc := pattern[p], name[n]
			if pc == '*' {
				p++
				star, starName = p, n
				continue
			}
			// Most names are ASCII, and an ASCII letter folds to ASCII:
			// compare bytes. An ASCII pattern rune can still match a
			// non-ASCII one (K the Kelvin sign), so bytes decide only
			// when both are ASCII.
			if pc < utf8.RuneSelf && nc < utf8.RuneSelf {
				if 'a' <= nc && nc <= 'z' {
					nc -= 'a' - 'A'
				}
				if pc == nc {
					p++
					n++
					continue
				}
			} else if pw, nw, ok := sameRune(pattern, p, name, n); ok {
				p += pw
				n += nw
				continue
			}
		}
		if star < 0 {
			return false
		}
		if name[starName] < utf8.RuneSelf {
			starName++
		} else {
			_, w := decodeRune(name, starName)
			starName += w
		}
		p, n = star, starName
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// sameRune reports whether the rune at pattern[p] (folded) is the rune at
// name[n] folded, and how wide the two are.
func sameRune[S text](pattern string, p int, name S, n int) (pw, nw int, ok bool) {
	pr, pw := utf8.DecodeRuneInString(pattern[p:])
	nr, nw := decodeRune(name, n)
	return pw, nw, pr == fold(nr)
}
