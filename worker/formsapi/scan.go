package formsapi

import "encoding/json"

// scanPage fills w as json.Unmarshal(body, w) would, in one pass over body
// and without copying: every member it keeps is a slice of body, capped so
// that appending to it cannot overwrite what follows. It reports false,
// and w is then to be ignored, for any body it is not sure encoding/json
// would decode the same way: anything that is not valid JSON, a member of
// the wrong type, a null submission, a pointer member given twice (where
// encoding/json merges), or a member name that encoding/json might match
// to a field without being spelt exactly like it (it matches names case-
// insensitively, Unicode folds included). The caller then decodes with
// encoding/json, whose messages say what is wrong.
//
// A well-formed page is thus read once: encoding/json's check of the whole
// body, its reflection and its copies of every member are paid only by the
// bodies scanPage declines.
//
// The submissions are read into subs, whose backing array w.Data then
// shares.
func scanPage(body []byte, w *wirePage, subs *[]wireSubmission) bool {
	s := pageScanner{b: body, subs: subs}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	var seenData, seenMeta bool
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "data":
			if seenData {
				return false
			}
			seenData = true
			return s.submissions(w)
		case "meta":
			if seenMeta {
				return false
			}
			seenMeta = true
			return s.meta(w)
		}
		return !foldable(key) && s.value()
	})
	if !ok {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// pageScanner reads JSON from b, at i. Every method that reads a value
// starts at its first byte (space skipped) and leaves i just past it.
type pageScanner struct {
	b     []byte
	i     int
	depth int
	subs  *[]wireSubmission
}

// maxNesting is encoding/json's limit on nested objects and arrays.
const maxNesting = 10000

// foldable reports whether encoding/json might take the member name key for
// one of a struct's fields without it being spelt exactly so: it compares
// names with Unicode case folding, and every field name here is lower-case
// ASCII. A name with neither an upper-case ASCII letter, nor an escape, nor
// a byte beyond ASCII (K, the Kelvin sign, folds to k) matches a field
// only when spelt exactly like it.
func foldable(key []byte) bool {
	for _, c := range key {
		if 'A' <= c && c <= 'Z' || c == '\\' || c >= 0x80 {
			return true
		}
	}
	return false
}

func (s *pageScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// raw reads a value and returns its bytes, capped.
func (s *pageScanner) raw() (json.RawMessage, bool) {
	s.space()
	start := s.i
	if !s.value() {
		return nil, false
	}
	return s.b[start:s.i:s.i], true
}

// null reads the literal null if it comes next.
func (s *pageScanner) null() bool {
	s.space()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// object reads an object at i ('{'), calling member for each member with
// the name as written between its quotes; member reads the value.
func (s *pageScanner) object(member func(key []byte) bool) bool {
	if s.depth++; s.depth > maxNesting {
		return false
	}
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		start := s.i + 1
		if !s.string() {
			return false
		}
		key := s.b[start : s.i-1]
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		if !member(key) {
			return false
		}
		if more, ok := s.after('}'); !more {
			return ok
		}
	}
}

// after reads what follows a member or an element: a comma (more follows)
// or end, which closes the object or array.
func (s *pageScanner) after(end byte) (more, ok bool) {
	s.space()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, true
	case end:
		s.i++
		s.depth--
		return false, true
	}
	return false, false
}

// submissions reads the page's data member: an array of submission objects.
func (s *pageScanner) submissions(w *wirePage) bool {
	if s.null() {
		w.Data = nil
		return true
	}
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return false
	}
	if s.depth++; s.depth > maxNesting {
		return false
	}
	s.i++ // [
	subs := (*s.subs)[:0]
	if subs == nil {
		subs = []wireSubmission{} // as encoding/json leaves an empty array
	}
	*s.subs = subs
	w.Data = s.subs
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '{' {
			return false // null, or not an object
		}
		subs = append(subs, wireSubmission{})
		*s.subs = subs
		if !s.submission(&subs[len(subs)-1]) {
			return false
		}
		if more, ok := s.after(']'); !more {
			return ok
		}
	}
}

// submission reads one submission object; a member given twice is the last
// one, as encoding/json leaves a json.RawMessage.
func (s *pageScanner) submission(sub *wireSubmission) bool {
	start := s.i
	ok := s.object(func(key []byte) bool {
		var dst *json.RawMessage
		switch string(key) {
		case "id":
			dst = &sub.ID
		case "fields":
			dst = &sub.Fields
		case "data":
			dst = &sub.Data
		case "files":
			dst = &sub.Files
		case "is_spam":
			dst = &sub.IsSpam
		case "created_at":
			dst = &sub.CreatedAt
		default:
			return !foldable(key) && s.value()
		}
		v, ok := s.raw()
		*dst = v
		return ok
	})
	sub.raw = s.b[start:s.i:s.i]
	return ok
}

// meta reads the page's meta member: null or an object holding pagination.
func (s *pageScanner) meta(w *wirePage) bool {
	if s.null() {
		w.Meta = nil
		return true
	}
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	w.Meta = new(wireMeta)
	seen := false
	return s.object(func(key []byte) bool {
		if string(key) != "pagination" {
			return !foldable(key) && s.value()
		}
		if seen {
			return false
		}
		seen = true
		if s.null() {
			w.Meta.Pagination = nil
			return true
		}
		if s.i >= len(s.b) || s.b[s.i] != '{' {
			return false
		}
		pg := new(wirePagination)
		w.Meta.Pagination = pg
		return s.object(func(key []byte) bool {
			var dst *json.RawMessage
			switch string(key) {
			case "total":
				dst = &pg.Total
			case "count":
				dst = &pg.Count
			case "per_page":
				dst = &pg.PerPage
			case "current_page":
				dst = &pg.CurrentPage
			case "total_pages":
				dst = &pg.TotalPages
			case "links":
				dst = &pg.Links
			default:
				return !foldable(key) && s.value()
			}
			v, ok := s.raw()
			*dst = v
			return ok
		})
	})
}

// value checks the grammar of the value at i (space skipped first) and
// moves past it.
func (s *pageScanner) value() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.string()
	case c == '{':
		return s.object(func([]byte) bool { return s.value() })
	case c == '[':
		return s.array()
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *pageScanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *pageScanner) array() bool {
	if s.depth++; s.depth > maxNesting {
		return false
	}
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		if more, ok := s.after(']'); !more {
			return ok
		}
	}
}

// number moves past a number in JSON's grammar; what follows it is checked
// by the caller (a delimiter, or the end).
func (s *pageScanner) number() bool {
	b, i := s.b, s.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
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
			return false
		}
	}
	s.i = i
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

// string moves past the string at i ('"').
func (s *pageScanner) string() bool {
	b := s.b
	i := s.i + 1
	for {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return true
		case '\\':
			i++
			if i >= len(b) {
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 > len(b) || !isHex4(b[i+1:i+5]) {
					return false
				}
				i += 5
			default:
				return false
			}
		default:
			return false // a control character
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
