package formsapi

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A server that echoes the request into an error body rarely echoes it
// verbatim: JSON writers escape "/" as "\/" or anything as \uXXXX, a
// query-string echo percent-encodes (sometimes twice), an HTML page writes
// character references, and some frameworks upper- or lower-case what they
// echo. redactToken finds the token under any mix of these, character by
// character, so that none of them reaches a log line, sync_state.last_error
// or formsync status.

// tokenMatcher knows, for each character of the token, every way a body
// may write it.
type tokenMatcher struct {
	alts [][]string // per rune of the token: its spellings
}

func newTokenMatcher(token string) *tokenMatcher {
	if token == "" {
		return nil
	}
	m := &tokenMatcher{}
	for _, r := range token {
		m.alts = append(m.alts, spellings(r))
	}
	return m
}

// spellings lists the ways r may appear. Matching is case-insensitive, so
// one spelling covers both cases of ASCII letters and hex digits; the
// encoded spellings are listed for every case of r, since an upper-cased
// echo of "é" percent-encodes "É".
func spellings(r rune) []string {
	var s []string
	switch r {
	case '/':
		s = append(s, `\/`)
	case '\\':
		s = append(s, `\\`)
	case '"':
		s = append(s, `\"`)
	}
	v := r
	for {
		s = append(s, encodings(v)...)
		if v = unicode.SimpleFold(v); v == r {
			return s
		}
	}
}

// encodings lists r written as itself, as a JSON \u escape, percent-encoded
// once and twice, and as HTML decimal and hex character references.
func encodings(r rune) []string {
	var u strings.Builder
	if r > 0xFFFF {
		hi, lo := utf16Pair(r)
		fmt.Fprintf(&u, `\u%04x\u%04x`, hi, lo)
	} else {
		fmt.Fprintf(&u, `\u%04x`, r)
	}
	var pct, pct2 strings.Builder
	var buf [utf8.UTFMax]byte
	for _, b := range buf[:utf8.EncodeRune(buf[:], r)] {
		fmt.Fprintf(&pct, "%%%02x", b)
		fmt.Fprintf(&pct2, "%%25%02x", b)
	}
	return []string{string(r), u.String(), pct.String(), pct2.String(),
		fmt.Sprintf("&#%d;", r), fmt.Sprintf("&#x%x;", r)}
}

func utf16Pair(r rune) (hi, lo rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// redact replaces every occurrence of the token, however encoded, with
// Redacted.
func (m *tokenMatcher) redact(s string) string {
	if m == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		if end := m.matchAt(s, i); end > i {
			b.WriteString(s[last:i])
			b.WriteString(Redacted)
			i, last = end, end
			continue
		}
		i++
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// contains reports whether s holds the token in any encoding.
func (m *tokenMatcher) contains(s string) bool {
	return m != nil && m.redact(s) != s
}

// matchAt returns the end of a token spelled from s[i], or -1. It searches
// depth first (one spelling of a character can be a prefix of another's),
// remembering dead ends so that a hostile body costs O(len(s)·len(token)).
func (m *tokenMatcher) matchAt(s string, i int) int {
	dead := map[[2]int]bool{}
	var walk func(pos, k int) int
	walk = func(pos, k int) int {
		if k == len(m.alts) {
			return pos
		}
		if dead[[2]int{pos, k}] {
			return -1
		}
		for _, a := range m.alts[k] {
			if len(s)-pos >= len(a) && strings.EqualFold(s[pos:pos+len(a)], a) {
				if end := walk(pos+len(a), k+1); end >= 0 {
					return end
				}
			}
		}
		dead[[2]int{pos, k}] = true
		return -1
	}
	// Cheap first-character filter before any allocation-heavy search.
	first := false
	for _, a := range m.alts[0] {
		if len(s)-i >= len(a) && strings.EqualFold(s[i:i+len(a)], a) {
			first = true
			break
		}
	}
	if !first {
		return -1
	}
	return walk(i, 0)
}
