package formsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// wirePage is the envelope as sent, read in one pass by scanPage (by
// encoding/json when scanPage declines the body). The members of
// pagination and of each submission are kept raw so that their types are
// checked here, with messages that say which member is wrong, rather than
// trusted to reflection.
type wirePage struct {
	Data *[]wireSubmission `json:"data"`
	Meta *wireMeta         `json:"meta"`
}

// wireMeta and wirePagination are aliases, not types of their own, so that
// encoding/json's messages name the same types as ever.
type (
	wireMeta = struct {
		Pagination *wirePagination `json:"pagination"`
	}
	wirePagination = struct {
		Total       json.RawMessage `json:"total"`
		Count       json.RawMessage `json:"count"`
		PerPage     json.RawMessage `json:"per_page"`
		CurrentPage json.RawMessage `json:"current_page"`
		TotalPages  json.RawMessage `json:"total_pages"`
		Links       json.RawMessage `json:"links"`
	}
)

// wireSubmission is one submission as sent. raw keeps the object's bytes
// for Submission.Raw: whatever the service adds later is stored, not
// dropped. The live service sends the values under data, the documented
// forms under fields.
type wireSubmission struct {
	raw       []byte
	ID        json.RawMessage `json:"id"`
	Fields    json.RawMessage `json:"fields"`
	Data      json.RawMessage `json:"data"`
	Files     json.RawMessage `json:"files"`
	IsSpam    json.RawMessage `json:"is_spam"`
	CreatedAt json.RawMessage `json:"created_at"`
}

func (w *wireSubmission) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		// As encoding/json does for a null element: leave it zero (and
		// then refused for its missing created_at).
		return nil
	case b[0] != '{':
		return &json.UnmarshalTypeError{Value: jsonKind(b[0]), Type: reflect.TypeFor[wireSubmission]()}
	}
	// The members alone, through a type without this method.
	type members wireSubmission
	var m members
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*w = wireSubmission(m)
	// b belongs to the caller's buffer only for this call.
	w.raw = bytes.Clone(b)
	return nil
}

// decodePage decodes one response body of either form into a Page. It
// never panics; a body that is not a well-formed page is an *Error of
// KindMalformed, one whose pagination does not add up (page not the one
// asked for, total_pages not derived from total and per_page) KindPaging.
// page, when > 0, is the page that was asked for; 0 (tests) skips that check
// and names the page from the body. The submissions' Raw, Fields and Files
// may be parts of body, which the caller must then leave as it is.
func decodePage(formID string, page int, body []byte) (*Page, error) {
	subs := wireScratch.Get().(*[]wireSubmission)
	defer func() {
		if cap(*subs) <= maxKeptSubmissions {
			clear((*subs)[:cap(*subs)]) // they point into body
			*subs = (*subs)[:0]
			wireScratch.Put(subs)
		}
	}()
	var w wirePage
	if scanPage(bytes.TrimPrefix(body, utf8BOM), &w, subs) {
		return w.page(formID, page)
	}
	return decodePageStd(formID, page, body)
}

// utf8BOM may open a body written by a server that should not send one:
// RFC 8259 lets a parser ignore it, and encoding/json does not.
var utf8BOM = []byte("\uFEFF")

// wireScratch holds the slices scanPage reads submissions into: they are
// needed only until decodePage returns.
var wireScratch = sync.Pool{New: func() any { return new([]wireSubmission) }}

// maxKeptSubmissions bounds the scratch kept after an unusually long page.
const maxKeptSubmissions = 1000

// decodePageStd is decodePage through encoding/json alone: what says what
// is wrong with a body scanPage declines, and the reference scanPage is
// held to.
func decodePageStd(formID string, page int, body []byte) (*Page, error) {
	body = bytes.TrimPrefix(body, utf8BOM)
	malformed := func(format string, args ...any) error {
		return &Error{FormID: formID, Page: page, Kind: KindMalformed, Err: fmt.Errorf(format, args...)}
	}
	var w wirePage
	if err := json.Unmarshal(body, &w); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case len(bytes.TrimSpace(body)) == 0:
			// Before the truncation case, which an empty body also meets.
			return nil, malformed("empty body (%d bytes): a page is a JSON object", len(body))
		case errors.As(err, &syn) && syn.Offset >= int64(len(bytes.TrimRight(body, " \t\r\n"))):
			return nil, malformed("body ends early after %d bytes (truncated transfer?): %w", len(body), err)
		case errors.As(err, &typ) && typ.Type == reflect.TypeFor[wireSubmission]():
			return nil, malformed("data: a submission is a JSON %s, not an object", typ.Value)
		case errors.As(err, &typ) && typ.Field == "data":
			return nil, malformed("data is a JSON %s, not an array", typ.Value)
		case errors.As(err, &typ) && (typ.Field == "meta" || typ.Field == "meta.pagination"):
			return nil, malformed("%s is a JSON %s, not an object", typ.Field, typ.Value)
		}
		return nil, malformed("body is not a JSON page envelope: %w", err)
	}
	return w.page(formID, page)
}

// page checks the envelope's members and decodes its submissions.
func (w *wirePage) page(formID string, page int) (p *Page, err error) {
	malformed := func(format string, args ...any) error {
		return &Error{FormID: formID, Page: page, Kind: KindMalformed, Err: fmt.Errorf(format, args...)}
	}
	if w.Meta == nil || w.Meta.Pagination == nil {
		return nil, malformed("meta.pagination is missing")
	}
	pg := w.Meta.Pagination
	p = &Page{FormID: formID}

	// current_page first, so that later messages can name the page.
	if p.CurrentPage, err = nonNegative("current_page", pg.CurrentPage, true); err != nil {
		return nil, malformed("meta.pagination.%w", err)
	}
	asked := page
	if page == 0 {
		page = p.CurrentPage
	}
	if p.Total, err = nonNegative("total", pg.Total, true); err != nil {
		return nil, malformed("meta.pagination.%w", err)
	}
	if p.PerPage, err = nonNegative("per_page", pg.PerPage, true); err != nil {
		return nil, malformed("meta.pagination.%w", err)
	}
	if p.PerPage == 0 {
		return nil, malformed("meta.pagination.per_page is 0")
	}
	if _, err := nonNegative("count", pg.Count, false); err != nil {
		return nil, malformed("meta.pagination.%w", err)
	}
	totalPages, err := nonNegative("total_pages", pg.TotalPages, false)
	if err != nil {
		return nil, malformed("meta.pagination.%w", err)
	}
	if p.Next, p.Previous, p.Newer, err = decodeLinks(pg.Links); err != nil {
		return nil, malformed("meta.pagination.links: %w", err)
	}

	if w.Data == nil {
		return nil, malformed("data is missing or null")
	}
	raws := *w.Data
	p.Submissions = make([]Submission, 0, len(raws))
	for i, r := range raws {
		s, err := decodeSubmission(r)
		if err != nil {
			return nil, malformed("data[%d]: %w", i, err)
		}
		if s.ID != nil {
			p.Newer = true
		}
		p.Submissions = append(p.Submissions, s)
	}

	// count is type-checked but not compared with data: the live
	// service's own reference shows count 10 beside one submission, and a
	// body cut short cannot parse anyway. Count is what data holds.
	p.Count = len(p.Submissions)
	if p.Count > p.PerPage {
		return nil, malformed("data holds %d submissions, more than per_page %d", p.Count, p.PerPage)
	}
	p.TotalPages = totalPages
	if pg.TotalPages == nil {
		p.TotalPages = pagesOf(p.Total, p.PerPage)
	}
	if err := p.pagingProblem(asked); err != nil {
		return nil, &Error{FormID: formID, Page: page, Kind: KindPaging, Err: err}
	}
	return p, nil
}

func decodeSubmission(r wireSubmission) (Submission, error) {
	// The members are parts of raw: when it is valid UTF-8, so are they.
	valid := r.raw == nil || utf8.Valid(r.raw)
	s := Submission{Raw: r.raw}
	if !valid {
		s.Raw = bytes.ToValidUTF8(r.raw, []byte("\uFFFD"))
	}
	if !isNull(r.ID) {
		// An integer, or (from a serialiser that stringifies big keys) an
		// integer in a string.
		digits := r.ID
		if n := len(digits); n >= 2 && digits[0] == '"' && digits[n-1] == '"' {
			digits = digits[1 : n-1]
		}
		if len(digits) > 0 && digits[0] == '+' {
			digits = nil // ParseInt takes a sign JSON never writes
		}
		id, err := strconv.ParseInt(string(digits), 10, 64)
		if err != nil {
			return s, fmt.Errorf("id %.40s is not an integer", r.ID)
		}
		s.ID = &id
	}
	if isNull(r.CreatedAt) {
		return s, errors.New("created_at is missing")
	}
	created, ok := plainString(r.CreatedAt)
	if !ok {
		if err := json.Unmarshal(r.CreatedAt, &created); err != nil {
			return s, fmt.Errorf("created_at %.40s is not a string", r.CreatedAt)
		}
	}
	t, err := ParseCreatedAt(created)
	if err != nil {
		return s, err
	}
	s.CreatedAt = t
	switch string(r.IsSpam) {
	case "", "null", "false", "0":
	case "true", "1":
		s.IsSpam = true
	default:
		return s, fmt.Errorf("is_spam %.40s is not a boolean (or 0/1)", r.IsSpam)
	}
	// The documented forms send the values under fields, the live service
	// under data. Neither leaves Fields nil rather than {}: the caller
	// stores an empty object but can tell the user that nothing came,
	// and Raw still holds what did.
	values, member := r.Fields, "fields"
	if isNull(values) {
		values, member = r.Data, "data"
	}
	switch {
	case isEmptyArray(values):
		// The live service's PHP serialiser writes a submission without
		// values (a form of file inputs only) as an empty array, not {}.
		s.Fields = json.RawMessage("{}")
	case !isNull(values):
		if s.Fields, err = rawOf(values, "{", valid); err != nil {
			return s, fmt.Errorf("%s: %w", member, err)
		}
	}
	// files: an array of attachments, or (the live dashboard's shape) an
	// object keyed by input name; the sinks take either.
	if isNull(r.Files) {
		s.Files = json.RawMessage("[]")
	} else if s.Files, err = rawOf(r.Files, "[{", valid); err != nil {
		return s, fmt.Errorf("files: %w", err)
	}
	return s, nil
}

// plainString returns the JSON string raw (a whole JSON value) holds when
// it decodes to what is between its quotes: no escapes, valid UTF-8.
func plainString(raw json.RawMessage) (string, bool) {
	n := len(raw)
	if n < 2 || raw[0] != '"' || bytes.IndexByte(raw[1:n-1], '\\') >= 0 || !utf8.Valid(raw[1:n-1]) {
		return "", false
	}
	return string(raw[1 : n-1]), true
}

// ParseCreatedAt parses an RFC 3339 timestamp with any number of fractional
// digits and a Z or numeric offset, and returns it in UTC truncated to
// microseconds (the precision every sink stores). As RFC 3339 has it, 't'
// and 'z' may be lower case, and an offset's hours run to 23: "+24:00" is
// refused. A leap second (":60"), which RFC 3339 allows but no instant
// stored in UTC can tell from the next second, is refused: see
// docs/operations.md.
func ParseCreatedAt(v string) (time.Time, error) {
	bad := func() (time.Time, error) {
		return time.Time{}, fmt.Errorf("created_at %.60q is not an RFC 3339 timestamp", v)
	}
	if len(v) > 10 && v[10] == 't' {
		v = v[:10] + "T" + v[11:]
	}
	if strings.HasSuffix(v, "z") {
		v = v[:len(v)-1] + "Z"
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return bad()
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return bad()
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// rawOf checks that raw (not null) is a JSON value starting with one of
// want ('{', '['). Invalid UTF-8 inside strings is replaced so the sinks get
// text they can store; valid says there is none. The error names the kind
// of value it got, never the value: it holds what people typed into the
// form, which a field policy keeps out of the tables and must not reach a
// log instead.
func rawOf(raw json.RawMessage, want string, valid bool) (json.RawMessage, error) {
	if !strings.ContainsRune(want, rune(raw[0])) {
		kinds := map[string]string{"{": "an object", "[": "an array", "[{": "an array or an object"}
		return nil, fmt.Errorf("a JSON %s, not %s", jsonKind(raw[0]), kinds[want])
	}
	if valid {
		return raw, nil
	}
	return validUTF8(raw), nil
}

// validUTF8 replaces each run of invalid UTF-8 bytes with U+FFFD.
func validUTF8(raw []byte) []byte {
	if raw == nil || utf8.Valid(raw) {
		return raw
	}
	return bytes.ToValidUTF8(raw, []byte("\uFFFD"))
}

// jsonKind names the JSON type a value starting with c has.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// nonNegative reads an optional or required non-negative integer member.
func nonNegative(name string, raw json.RawMessage, required bool) (int, error) {
	if isNull(raw) {
		if required {
			return 0, fmt.Errorf("%s is missing", name)
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 0)
	if err != nil {
		return 0, fmt.Errorf("%s %.40s is not an integer", name, raw)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s is negative (%d)", name, n)
	}
	return int(n), nil
}

// decodeLinks reads links: {} in the older form; next/previous strings,
// null or absent in the newer one; [] from the live service's PHP
// serialiser when the form has one page (an empty PHP array). Either member
// being present marks the newer form.
func decodeLinks(raw json.RawMessage) (next, previous string, newer bool, err error) {
	if isNull(raw) {
		return "", "", false, nil
	}
	if raw[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil || len(elems) > 0 {
			return "", "", false, fmt.Errorf("%.40s is an array that is not empty", raw)
		}
		return "", "", false, nil
	}
	if raw[0] != '{' {
		return "", "", false, fmt.Errorf("%.40s is not an object", raw)
	}
	var links map[string]json.RawMessage
	if err := json.Unmarshal(raw, &links); err != nil {
		return "", "", false, err
	}
	for name, dst := range map[string]*string{"next": &next, "previous": &previous} {
		v, ok := links[name]
		if !ok {
			continue
		}
		newer = true
		if isNull(v) {
			continue
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return "", "", false, fmt.Errorf("%s %.40s is not a string", name, v)
		}
	}
	return next, previous, newer, nil
}

// CheckPaging refuses a page whose pagination does not add up, with an
// error that matches ErrPaging: current_page must be the page asked for
// (asked 0 skips that check), and total_pages max(1, ⌈total / per_page⌉)
// (an empty form may say 0). Client.Page checks every page it decodes; a
// caller that is handed pages from elsewhere checks them with the same
// rule.
func (p *Page) CheckPaging(asked int) error {
	if err := p.pagingProblem(asked); err != nil {
		return fmt.Errorf("%w: %w", ErrPaging, err)
	}
	return nil
}

// pagingProblem says what does not add up in p's pagination, or nil.
func (p *Page) pagingProblem(asked int) error {
	if p.PerPage > 0 {
		if err := checkTotalPages(p.Total, p.PerPage, p.TotalPages); err != nil {
			return err
		}
	}
	if asked > 0 && p.CurrentPage != asked {
		// A server (or a cache in front of it) that ignores page would
		// otherwise hand back page 1 for every page asked, and the engine
		// would take it for the page it wanted.
		return fmt.Errorf("asked for page %d, the response says current_page %d", asked, p.CurrentPage)
	}
	return nil
}

// checkTotalPages says what does not add up when total_pages is not
// max(1, ⌈total / per_page⌉); an empty form may say 0 or 1. A wrong
// total_pages is how a broken serialiser or proxy shows itself, and paging
// by it would silently stop early or run past the end.
func checkTotalPages(total, perPage, totalPages int) error {
	want := max(1, pagesOf(total, perPage))
	if totalPages == want || (total == 0 && totalPages == 0) {
		return nil
	}
	return fmt.Errorf("total_pages is %d, but total %d at per_page %d makes %d page(s)", totalPages, total, perPage, want)
}

// pagesOf is ⌈total / perPage⌉ for perPage > 0, computed without the
// overflow of total+perPage-1 that a total near the int limit would cause.
func pagesOf(total, perPage int) int {
	n := total / perPage
	if total%perPage != 0 {
		n++
	}
	return n
}

// isNull reports a missing (empty) or JSON null member.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// isEmptyArray reports whether raw is [] (with any JSON space inside).
func isEmptyArray(raw json.RawMessage) bool {
	return len(raw) >= 2 && raw[0] == '[' && len(bytes.TrimLeft(raw[1:], " \t\r\n")) == 1 && raw[len(raw)-1] == ']'
}
