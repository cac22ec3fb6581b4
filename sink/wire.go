package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/formsync/formsync/internal/jsonscan"
)

// The spool's NDJSON is written and read by hand: the reflective
// encoding/json round trip was a quarter of a sync's CPU time. The bytes
// are what json.Encoder (HTML escaping off) writes for a wireRow, and any
// line that is not in exactly that layout is read with encoding/json.

// appendWireRow appends r as one NDJSON line, '\n' included.
func appendWireRow(dst []byte, r Row) []byte {
	dst = append(dst, `{"form_id":`...)
	dst = appendQuoted(dst, r.FormID)
	dst = append(dst, `,"submission_id":`...)
	if r.SubmissionID == nil {
		dst = append(dst, "null"...)
	} else {
		// As a string: JSON readers that hold numbers as float64 (BigQuery's
		// NDJSON loader among them) would round ids beyond 2^53.
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, *r.SubmissionID, 10)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"submission_key":`...)
	dst = appendQuoted(dst, r.SubmissionKey)
	dst = append(dst, `,"content_key":`...)
	dst = appendQuoted(dst, r.ContentKey)
	dst = append(dst, `,"created_at":"`...)
	dst = appendUTC(dst, r.CreatedAt, 6)
	dst = append(dst, `","is_spam":`...)
	dst = strconv.AppendBool(dst, r.IsSpam)
	dst = append(dst, `,"fields":`...)
	dst = appendQuoted(dst, r.Fields)
	dst = append(dst, `,"files":`...)
	dst = appendQuoted(dst, r.Files)
	dst = append(dst, `,"raw":`...)
	dst = appendQuoted(dst, r.Raw)
	return append(dst, "}\n"...)
}

// wireParser reads spool lines; its scratch is reused from line to line.
type wireParser struct {
	r    jsonscan.Reader
	str  []byte
	rows int
}

var errLayout = errors.New("not in the spool's layout")

// parse decodes one line (its '\n' optional).
func (p *wireParser) parse(line []byte) (Row, error) {
	r, err := p.fast(line)
	if err == nil {
		return r, nil
	}
	var w wireRow
	if err := json.Unmarshal(line, &w); err != nil {
		return Row{}, err
	}
	var id *int64
	if v := strings.Trim(string(w.SubmissionID), `"`); v != "" && v != "null" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Row{}, fmt.Errorf("submission_id: %w", err)
		}
		id = &n
	}
	at, err := time.Parse(TimeLayout, w.CreatedAt)
	if err != nil {
		return Row{}, fmt.Errorf("created_at: %w", err)
	}
	return Row{
		FormID: w.FormID, SubmissionID: id, SubmissionKey: w.SubmissionKey,
		ContentKey: w.ContentKey, CreatedAt: at, IsSpam: w.IsSpam, Fields: w.Fields, Files: w.Files, Raw: w.Raw,
	}, nil
}

// wireNames are the members of a line, in the order appendWireRow writes
// them.
var wireNames = [...]string{`"form_id"`, `"submission_id"`, `"submission_key"`, `"content_key"`, `"created_at"`,
	`"is_spam"`, `"fields"`, `"files"`, `"raw"`}

// fast decodes a line with the members appendWireRow writes, in its
// order, each spelt exactly so.
func (p *wireParser) fast(line []byte) (Row, error) {
	r := &p.r
	r.Reset(line)
	if r.PeekKind() != '{' {
		return Row{}, errLayout
	}
	if _, err := r.ReadToken(); err != nil {
		return Row{}, errLayout
	}
	var row Row
	var created string
	for _, name := range wireNames {
		k, err := r.ReadValue()
		if err != nil || string(k) != name {
			return Row{}, errLayout
		}
		v, err := r.ReadValue()
		if err != nil {
			return Row{}, err
		}
		switch name {
		case `"submission_id"`:
			if string(v) == "null" {
				continue
			}
			id, err := strconv.ParseInt(string(bytes.Trim(v, `"`)), 10, 64)
			if err != nil {
				return Row{}, errLayout
			}
			row.SubmissionID = &id
		case `"is_spam"`:
			if v[0] != 't' && v[0] != 'f' {
				return Row{}, errLayout
			}
			row.IsSpam = v[0] == 't'
		default:
			if v[0] != '"' {
				return Row{}, errLayout
			}
			s := p.string(v)
			switch name {
			case `"form_id"`:
				row.FormID = s
			case `"submission_key"`:
				row.SubmissionKey = s
			case `"content_key"`:
				row.ContentKey = s
			case `"created_at"`:
				created = s
			case `"fields"`:
				row.Fields = s
			case `"files"`:
				row.Files = s
			case `"raw"`:
				row.Raw = s
			}
		}
	}
	if r.PeekKind() != '}' {
		return Row{}, errLayout
	}
	if _, err := r.ReadToken(); err != nil {
		return Row{}, errLayout
	}
	if err := r.End(); err != nil {
		return Row{}, errLayout
	}
	var err error
	if row.CreatedAt, err = time.Parse(TimeLayout, created); err != nil {
		return Row{}, errLayout
	}
	return row, nil
}

// string decodes the JSON string v, as encoding/json decodes it.
func (p *wireParser) string(v []byte) string {
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	p.str = jsonscan.AppendUnquote(p.str[:0], v)
	return string(p.str)
}
