package formsapi

import (
	"encoding/json"
	"sync"

	"github.com/formsync/formsync/internal/jsonscan"
)

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
	r := pageReaders.Get().(*jsonscan.Reader)
	defer func() {
		r.Reset(nil)
		pageReaders.Put(r)
	}()
	r.Reset(body)
	s := pageScanner{r: r, b: body, subs: subs}
	if r.PeekKind() != '{' {
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
	return ok && r.End() == nil
}

// pageReaders are scanPage's readers, too large to make for every page.
var pageReaders = sync.Pool{New: func() any { return new(jsonscan.Reader) }}

// pageScanner reads a page's members from r, reading b.
type pageScanner struct {
	r    *jsonscan.Reader
	b    []byte
	subs *[]wireSubmission
	// open is where the object object last read starts.
	open int
}

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

// value reads the next value, checking it.
func (s *pageScanner) value() bool {
	_, err := s.r.ReadValue()
	return err == nil
}

// raw reads the next value and returns its bytes, capped.
func (s *pageScanner) raw() (json.RawMessage, bool) {
	v, err := s.r.ReadValue()
	return v, err == nil
}

// null reads the next value when it is null, and reports whether it was.
func (s *pageScanner) null() bool {
	if s.r.PeekKind() != 'n' {
		return false
	}
	return s.value()
}

// delim reads the next token when it is the delimiter d.
func (s *pageScanner) delim(d byte) bool {
	if byte(s.r.PeekKind()) != d {
		return false
	}
	_, err := s.r.ReadToken()
	return err == nil
}

// object reads an object, calling member for each member with the name as
// written between its quotes; member reads the value.
func (s *pageScanner) object(member func(key []byte) bool) bool {
	if !s.delim('{') {
		return false
	}
	open := s.r.Offset() - 1
	for s.r.PeekKind() == '"' {
		k, err := s.r.ReadValue()
		if err != nil || !member(k[1:len(k)-1]) {
			return false
		}
	}
	s.open = open
	return s.delim('}')
}

// submissions reads the page's data member: an array of submission objects.
func (s *pageScanner) submissions(w *wirePage) bool {
	if s.null() {
		w.Data = nil
		return true
	}
	if !s.delim('[') {
		return false
	}
	subs := (*s.subs)[:0]
	if subs == nil {
		subs = []wireSubmission{} // as encoding/json leaves an empty array
	}
	*s.subs = subs
	w.Data = s.subs
	for s.r.PeekKind() == '{' {
		subs = append(subs, wireSubmission{})
		*s.subs = subs
		if !s.submission(&subs[len(subs)-1]) {
			return false
		}
	}
	return s.delim(']') // or null, or not an object: declined
}

// submission reads one submission object; a member given twice is the last
// one, as encoding/json leaves a json.RawMessage.
func (s *pageScanner) submission(sub *wireSubmission) bool {
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
	end := s.r.Offset()
	sub.raw = s.b[s.open:end:end]
	return ok
}

// meta reads the page's meta member: null or an object holding pagination.
func (s *pageScanner) meta(w *wirePage) bool {
	if s.null() {
		w.Meta = nil
		return true
	}
	if s.r.PeekKind() != '{' {
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
		if s.r.PeekKind() != '{' {
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
