package formsapi

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// A proxy or debug page that echoes request headers may also quote the
// Authorization header encoded as a whole: in base64 (standard or URL
// alphabet, padded or not, as HTTP Basic credentials or "Bearer <token>"),
// or in hex. Those encodings do not map the token character by character,
// so the matcher also looks for the part of each encoding that depends on
// the token's bytes alone, whatever precedes it (see encodedForms).

// tokenMatcher knows, for the token and each encoded form of it, every way
// a body may write each character.
type tokenMatcher struct {
	forms [][][]string // per form, per rune: its spellings
}

func newTokenMatcher(token string) *tokenMatcher {
	if token == "" {
		return nil
	}
	m := &tokenMatcher{}
	for _, f := range append([]string{token}, encodedForms(token)...) {
		var alts [][]string
		for _, r := range f {
			alts = append(alts, spellings(r))
		}
		m.forms = append(m.forms, alts)
	}
	return m
}

// minEncoded is the shortest token whose encoded forms are looked for: the
// part of a base64 encoding that only the token decides is about 4/3 of
// its length less two characters, and a shorter pattern would match
// innocent text.
const minEncoded = 6

// encodedForms returns the parts of the token's hex and base64 encodings
// that any text holding the encoded token contains. A base64 character
// carries 6 bits, so where the token's bytes start within the encoded
// text (its offset modulo 3) changes every character: for each of the
// three offsets, the characters whose 6 bits all come from the token.
func encodedForms(token string) []string {
	if len(token) < minEncoded {
		return nil
	}
	forms := []string{hex.EncodeToString([]byte(token))}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := range 3 {
			b := append(make([]byte, k), token...)
			e := enc.EncodeToString(b)
			from := (8*k + 5) / 6
			to := 8 * len(b) / 6
			forms = append(forms, e[from:to])
		}
	}
	slices.Sort(forms)
	return slices.Compact(forms)
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

// matchAt returns the end of the token, in any of its forms, spelled from
// s[i], or -1.
func (m *tokenMatcher) matchAt(s string, i int) int {
	for _, alts := range m.forms {
		if end := matchForm(alts, s, i); end >= 0 {
			return end
		}
	}
	return -1
}

// matchForm returns the end of one form spelled from s[i], or -1. It
// searches depth first (one spelling of a character can be a prefix of
// another's), remembering dead ends so that a hostile body costs
// O(len(s)·len(token)).
func matchForm(alts [][]string, s string, i int) int {
	// Cheap first-character filter before any allocation-heavy search.
	first := false
	for _, a := range alts[0] {
		if len(s)-i >= len(a) && strings.EqualFold(s[i:i+len(a)], a) {
			first = true
			break
		}
	}
	if !first {
		return -1
	}
	dead := map[[2]int]bool{}
	var walk func(pos, k int) int
	walk = func(pos, k int) int {
		if k == len(alts) {
			return pos
		}
		if dead[[2]int{pos, k}] {
			return -1
		}
		for _, a := range alts[k] {
			if len(s)-pos >= len(a) && strings.EqualFold(s[pos:pos+len(a)], a) {
				if end := walk(pos+len(a), k+1); end >= 0 {
					return end
				}
			}
		}
		dead[[2]int{pos, k}] = true
		return -1
	}
	return walk(i, 0)
}

// Redactor removes API tokens, in every form the client's own errors are
// cleaned of (raw in any case, JSON, URL and HTML escaping, base64 and
// hex), from text that leaves the process by another way: a log handler
// passes every line through it. A deployment syncing several accounts
// holds a token per account, and one Redactor covers them all. A nil
// Redactor leaves text as it is.
type Redactor struct {
	mu sync.RWMutex
	ms []*tokenMatcher
}

// NewRedactor returns the Redactor of tokens; nil when every token is
// empty.
func NewRedactor(tokens ...Secret) *Redactor {
	r := &Redactor{}
	r.Add(tokens...)
	if len(r.ms) == 0 {
		return nil
	}
	return r
}

// Add makes r redact tokens too: an account's new token, read after a
// rotation. It is safe to call while r redacts.
func (r *Redactor) Add(tokens ...Secret) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range tokens {
		if t != "" {
			r.ms = append(r.ms, newTokenMatcher(t.Reveal()))
		}
	}
	// A longer token first: one token may hold another, and the longer
	// match must not leave a tail of the longer token behind.
	slices.SortStableFunc(r.ms, func(a, b *tokenMatcher) int { return len(b.forms[0]) - len(a.forms[0]) })
}

// Redact returns s with every occurrence of each token replaced by
// Redacted.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, m := range r.ms {
		s = m.redact(s)
	}
	return s
}
