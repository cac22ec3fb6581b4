package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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
	c    canonicalizer
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
	c := &p.c
	c.src, c.i = bytes.TrimRight(line, "\n"), 0
	var r Row
	var err error
	expect := func(s string) {
		if err == nil {
			if !bytes.HasPrefix(c.src[c.i:], []byte(s)) {
				err = errLayout
				return
			}
			c.i += len(s)
		}
	}
	str := func() string {
		if err != nil {
			return ""
		}
		if c.i >= len(c.src) || c.src[c.i] != '"' {
			err = errLayout
			return ""
		}
		raw, plain, serr := c.scanString()
		if serr != nil {
			err = serr
			return ""
		}
		if plain {
			return string(raw)
		}
		c.str = unquote(c.str[:0], raw)
		return string(c.str)
	}
	expect(`{"form_id":`)
	r.FormID = str()
	expect(`,"submission_id":`)
	if err == nil {
		if bytes.HasPrefix(c.src[c.i:], []byte("null")) {
			c.i += 4
		} else {
			if c.i < len(c.src) && c.src[c.i] == '"' {
				c.i++
			}
			j := c.i
			for j < len(c.src) && (c.src[j] == '-' || '0' <= c.src[j] && c.src[j] <= '9') {
				j++
			}
			id, perr := strconv.ParseInt(string(c.src[c.i:j]), 10, 64)
			if perr != nil {
				return Row{}, errLayout
			}
			r.SubmissionID, c.i = &id, j
			if c.i < len(c.src) && c.src[c.i] == '"' {
				c.i++
			}
		}
	}
	expect(`,"submission_key":`)
	r.SubmissionKey = str()
	expect(`,"content_key":`)
	r.ContentKey = str()
	expect(`,"created_at":`)
	created := str()
	expect(`,"is_spam":`)
	if err == nil {
		switch {
		case bytes.HasPrefix(c.src[c.i:], []byte("true")):
			r.IsSpam, c.i = true, c.i+4
		case bytes.HasPrefix(c.src[c.i:], []byte("false")):
			c.i += 5
		default:
			err = errLayout
		}
	}
	expect(`,"fields":`)
	r.Fields = str()
	expect(`,"files":`)
	r.Files = str()
	expect(`,"raw":`)
	r.Raw = str()
	expect(`}`)
	if err != nil {
		return Row{}, err
	}
	if c.i != len(c.src) {
		return Row{}, errLayout
	}
	if r.CreatedAt, err = time.Parse(TimeLayout, created); err != nil {
		return Row{}, errLayout
	}
	return r, nil
}
