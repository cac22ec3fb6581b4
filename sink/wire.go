package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/formsync/formsync/internal/jsonscan"
)

// The spool's NDJSON is written and read by hand: the reflective
// encoding/json round trip was a quarter of a sync's CPU time. The bytes
// are what json.Encoder (HTML escaping off) writes for a wireRow, and any
// line that is not in exactly that layout is read with encoding/json.

// appendWireRow appends r as one NDJSON line, '\n' included.
func appendWireRow(dst []byte, r Row) []byte {
	dst = append(dst, `{"form_id":`...)
	dst = jsonscan.AppendQuoted(dst, r.FormID)
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
	dst = jsonscan.AppendQuoted(dst, r.SubmissionKey)
	dst = append(dst, `,"content_key":`...)
	dst = jsonscan.AppendQuoted(dst, r.ContentKey)
	dst = append(dst, `,"created_at":"`...)
	dst = appendUTC(dst, r.CreatedAt, 6)
	dst = append(dst, `","is_spam":`...)
	dst = strconv.AppendBool(dst, r.IsSpam)
	dst = append(dst, `,"fields":`...)
	dst = jsonscan.AppendQuoted(dst, r.Fields)
	dst = append(dst, `,"files":`...)
	dst = jsonscan.AppendQuoted(dst, r.Files)
	dst = append(dst, `,"raw":`...)
	dst = jsonscan.AppendQuoted(dst, r.Raw)
	return append(dst, "}\n"...)
}

// wireParser reads spool lines; its scratch is reused from line to line.
type wireParser struct {
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

// fast decodes a line in exactly the layout appendWireRow writes.
func (p *wireParser) fast(line []byte) (Row, error) {
	line = bytes.TrimRight(line, "\n")
	i := 0
	ok := true
	expect := func(s string) {
		if ok = ok && bytes.HasPrefix(line[i:], []byte(s)); ok {
			i += len(s)
		}
	}
	str := func() string {
		if !ok {
			return ""
		}
		end := jsonscan.StringEnd(line, i)
		if ok = end > 0; !ok {
			return ""
		}
		v := line[i:end]
		i = end
		return p.string(v)
	}
	var r Row
	expect(`{"form_id":`)
	r.FormID = str()
	expect(`,"submission_id":`)
	if ok && !bytes.HasPrefix(line[i:], []byte("null")) {
		// A string; a number in older spools.
		j := i + 1
		for j < len(line) && line[j] != ',' {
			j++
		}
		id, err := strconv.ParseInt(string(bytes.Trim(line[i:j], `"`)), 10, 64)
		if err != nil {
			return Row{}, errLayout
		}
		r.SubmissionID, i = &id, j
	} else {
		i += 4
	}
	expect(`,"submission_key":`)
	r.SubmissionKey = str()
	expect(`,"content_key":`)
	r.ContentKey = str()
	expect(`,"created_at":`)
	created := str()
	switch expect(`,"is_spam":`); {
	case ok && bytes.HasPrefix(line[i:], []byte("true")):
		r.IsSpam, i = true, i+4
	case ok && bytes.HasPrefix(line[i:], []byte("false")):
		i += 5
	default:
		ok = false
	}
	expect(`,"fields":`)
	r.Fields = str()
	expect(`,"files":`)
	r.Files = str()
	expect(`,"raw":`)
	r.Raw = str()
	expect(`}`)
	if !ok || i != len(line) {
		return Row{}, errLayout
	}
	var err error
	if r.CreatedAt, err = time.Parse(TimeLayout, created); err != nil {
		return Row{}, errLayout
	}
	return r, nil
}

// string decodes the JSON string v, as encoding/json decodes it.
func (p *wireParser) string(v []byte) string {
	return string(jsonscan.Unquote(&p.str, v))
}
