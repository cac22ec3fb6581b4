package formsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"
)

// wirePage is the envelope as sent, decoded in one pass. The members of
// pagination and of each submission are kept raw so that their types are
// checked here, with messages that say which member is wrong, rather than
// trusted to reflection.
type wirePage struct {
	Data *[]wireSubmission `json:"data"`
	Meta *struct {
		Pagination *struct {
			Total       json.RawMessage `json:"total"`
			Count       json.RawMessage `json:"count"`
			PerPage     json.RawMessage `json:"per_page"`
			CurrentPage json.RawMessage `json:"current_page"`
			TotalPages  json.RawMessage `json:"total_pages"`
			Links       json.RawMessage `json:"links"`
		} `json:"pagination"`
	} `json:"meta"`
}

type wireSubmission struct {
	ID        json.RawMessage `json:"id"`
	Fields    json.RawMessage `json:"fields"`
	Files     json.RawMessage `json:"files"`
	IsSpam    json.RawMessage `json:"is_spam"`
	CreatedAt json.RawMessage `json:"created_at"`
}

// DecodePage decodes one response body of either form into a Page. It
// never panics; anything that is not a well-formed page is an *Error of
// KindMalformed naming the form (and the page, when the body says which).
func DecodePage(formID string, body []byte) (*Page, error) {
	return decodePage(formID, 0, body)
}

// decodePage decodes body; page, when > 0, is the page that was asked for
// and names the page in errors.
func decodePage(formID string, page int, body []byte) (p *Page, err error) {
	malformed := func(format string, args ...any) error {
		return &Error{FormID: formID, Page: page, Kind: KindMalformed, Err: fmt.Errorf(format, args...)}
	}
	var w wirePage
	if err := json.Unmarshal(body, &w); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn) && syn.Offset >= int64(len(bytes.TrimRight(body, " \t\r\n"))):
			return nil, malformed("body ends early after %d bytes (truncated transfer?): %w", len(body), err)
		case len(bytes.TrimSpace(body)) == 0:
			return nil, malformed("empty body")
		case errors.As(err, &typ) && typ.Type == reflect.TypeFor[wireSubmission]():
			return nil, malformed("data: a submission is a JSON %s, not an object", typ.Value)
		case errors.As(err, &typ) && typ.Field == "data":
			return nil, malformed("data is a JSON %s, not an array", typ.Value)
		case errors.As(err, &typ) && (typ.Field == "meta" || typ.Field == "meta.pagination"):
			return nil, malformed("%s is a JSON %s, not an object", typ.Field, typ.Value)
		}
		return nil, malformed("body is not a JSON page envelope: %w", err)
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
	count, err := nonNegative("count", pg.Count, false)
	if err != nil {
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

	// count is only checked, never used: it is how a short body that still
	// parses (a proxy cutting an array) shows itself.
	p.Count = len(p.Submissions)
	if pg.Count != nil && count != p.Count {
		return nil, malformed("meta.pagination.count is %d but data holds %d submissions", count, p.Count)
	}
	if p.Count > p.PerPage {
		return nil, malformed("data holds %d submissions, more than per_page %d", p.Count, p.PerPage)
	}
	p.TotalPages = totalPages
	if pg.TotalPages == nil {
		p.TotalPages = (p.Total + p.PerPage - 1) / p.PerPage
	}
	return p, nil
}

func decodeSubmission(r wireSubmission) (Submission, error) {
	var s Submission
	if !isNull(r.ID) {
		id, err := strconv.ParseInt(string(r.ID), 10, 64)
		if err != nil {
			return s, fmt.Errorf("id %.40s is not an integer", r.ID)
		}
		s.ID = &id
	}
	if isNull(r.CreatedAt) {
		return s, errors.New("created_at is missing")
	}
	var created string
	if err := json.Unmarshal(r.CreatedAt, &created); err != nil {
		return s, fmt.Errorf("created_at %.40s is not a string", r.CreatedAt)
	}
	t, err := ParseCreatedAt(created)
	if err != nil {
		return s, err
	}
	s.CreatedAt = t
	if !isNull(r.IsSpam) {
		if err := json.Unmarshal(r.IsSpam, &s.IsSpam); err != nil {
			return s, fmt.Errorf("is_spam %.40s is not a boolean", r.IsSpam)
		}
	}
	if s.Fields, err = rawOf(r.Fields, '{', "{}"); err != nil {
		return s, fmt.Errorf("fields: %w", err)
	}
	if s.Files, err = rawOf(r.Files, '[', "[]"); err != nil {
		return s, fmt.Errorf("files: %w", err)
	}
	return s, nil
}

// ParseCreatedAt parses an RFC 3339 timestamp with any number of fractional
// digits and a Z or numeric offset, and returns it in UTC truncated to
// microseconds (the precision every sink stores).
func ParseCreatedAt(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("created_at %.60q is not an RFC 3339 timestamp", v)
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// rawOf checks that raw is a JSON value starting with want ('{' or '['),
// defaulting null or missing to empty. Invalid UTF-8 inside strings is
// replaced the way encoding/json does for decoded strings, so the sinks get
// text they can store.
func rawOf(raw json.RawMessage, want byte, empty string) (json.RawMessage, error) {
	if isNull(raw) {
		return json.RawMessage(empty), nil
	}
	if raw[0] != want {
		kind := "an object"
		if want == '[' {
			kind = "an array"
		}
		return nil, fmt.Errorf("%.40s is not %s", raw, kind)
	}
	if !utf8.Valid(raw) {
		raw = bytes.ToValidUTF8(raw, []byte("\uFFFD"))
	}
	return raw, nil
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

// decodeLinks reads links: {} in the older form; next/previous strings or
// null in the newer one. Either member being present marks the newer form.
func decodeLinks(raw json.RawMessage) (next, previous string, newer bool, err error) {
	if isNull(raw) {
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

// isNull reports a missing (empty) or JSON null member.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}
