package sink

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/formsync/formsync/internal/jsonscan"
)

// MaxDepth is the deepest nesting of objects and arrays a submission's
// fields or files may have. BigQuery's JSON type takes at most 500 levels
// (SQLite's JSON functions 1000), and the raw submission object holds the
// fields one level down.
const MaxDepth = 499

// ErrTooDeep is returned by NewRow for fields or files nested deeper than
// MaxDepth: no sink could query them.
var ErrTooDeep = errors.New("JSON nested too deeply for the sinks")

// MaxViewFields is the most field columns a form's view carries, in either
// sink: SQLite allows 2000 columns per view (BigQuery 10,000), and a form's
// view has the same columns whichever sink holds it. Fields beyond it stay
// in the fields JSON column.
const MaxViewFields = 1900

// TimeLayout is how created_at and synced_at travel in NDJSON and are stored
// as text: RFC 3339, UTC, exactly six fractional digits, so that text order is
// time order.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// Row is one submission as formsync stores it.
type Row struct {
	FormID string
	// SubmissionID is the API's id; nil in the older response form.
	SubmissionID *int64
	// SubmissionKey identifies the submission within its form: the id as
	// decimal text, or ContentKey when the API gives no id.
	SubmissionKey string
	// ContentKey is a hash of created_at (to the millisecond), fields and
	// files. It is computed for every row so that a row first loaded from the
	// older response form (keyed by content) is recognised, and re-keyed
	// rather than duplicated, when the form later answers with ids.
	ContentKey string
	// CreatedAt is UTC, truncated to microseconds.
	CreatedAt time.Time
	IsSpam    bool
	// Fields is the submission's fields as canonical JSON (an object, keys
	// sorted); Files the files as canonical JSON (an array).
	Fields string
	Files  string
	// Raw is the submission object exactly as the API sent it (valid
	// UTF-8), so that a member formsync does not read today is never lost;
	// empty when unknown (rows stored before it was kept).
	Raw string
	// DeletedAt is when a reconcile found the submission no longer served
	// upstream; zero while it is. Sinks set it; a staged row's is ignored.
	DeletedAt time.Time
}

// NewRow builds the stored form of a submission. fields must be a JSON
// object (or null/absent) and files a JSON array or object (the live
// service keys files by input name), or null/absent.
func NewRow(formID string, id *int64, createdAt time.Time, isSpam bool, fields, files json.RawMessage) (Row, error) {
	sc := rowScratches.Get().(*rowScratch)
	defer sc.put()
	createdAt = createdAt.UTC().Truncate(time.Microsecond)
	// The canonical fields and files are written after what the content key
	// hashes before them, so that it is hashed in one piece, and become one
	// string.
	buf := appendKeyTime(sc.buf[:0], createdAt)
	buf = append(buf, 0)
	start := len(buf)
	buf, err := sc.canonical(buf, fields, "{}", '{')
	if err != nil {
		return Row{}, fmt.Errorf("submission fields: %w", err)
	}
	sep := len(buf)
	buf = append(buf, 0)
	buf, err = sc.canonical(buf, files, "[]", '[', '{')
	if err != nil {
		return Row{}, fmt.Errorf("submission files: %w", err)
	}
	sc.buf = buf
	text := string(buf[start:])
	r := Row{
		FormID:     formID,
		CreatedAt:  createdAt,
		IsSpam:     isSpam,
		Fields:     text[:sep-start],
		Files:      text[sep-start+1:],
		ContentKey: hexKey(sha256.Sum256(buf)),
	}
	if id != nil {
		v := *id
		r.SubmissionID = &v
		r.SubmissionKey = strconv.FormatInt(v, 10)
	} else {
		r.SubmissionKey = r.ContentKey
	}
	return r, nil
}

// ContentKey hashes what identifies a submission that has no id. created_at
// enters at millisecond precision because the newer response form prints only
// three fractional digits; fields and files must already be canonical.
func ContentKey(createdAt time.Time, fields, files string) string {
	buf := appendKeyTime(make([]byte, 0, 26+len(fields)+len(files)), createdAt)
	buf = append(append(buf, 0), fields...)
	buf = append(append(buf, 0), files...)
	return hexKey(sha256.Sum256(buf))
}

// appendKeyTime appends created_at as the content key hashes it,
// 2006-01-02T15:04:05.000Z.
func appendKeyTime(dst []byte, t time.Time) []byte {
	return appendUTC(dst, t, 3)
}

// appendUTC appends t as time.Time.AppendFormat does in UTC with the layout
// 2006-01-02T15:04:05, a point and frac (3 or 6) fractional digits, Z:
// TimeLayout for 6. AppendFormat interprets its layout on every call, and
// the two times of every row staged were a tenth of the read path's CPU.
func appendUTC(dst []byte, t time.Time, frac int) []byte {
	// Seconds since 0000-01-01T00:00:00Z; years beyond 0 to 9999, which no
	// submission has, are left to AppendFormat.
	const year0, year10000 = -62167219200, 253402300800
	sec := t.Unix()
	if sec < year0 || sec >= year10000 {
		return t.UTC().AppendFormat(dst, "2006-01-02T15:04:05."+"000000"[:frac]+"Z")
	}
	sec -= year0
	secOfDay := int(sec % 86400)
	// The date, by Howard Hinnant's days_from_civil inverse, counting in
	// 400-year eras from 0000-03-01 (one era early, so that January and
	// February of year 0 count from a positive day).
	z := int(sec/86400) - 60 + 146097
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day := doy - (153*mp+2)/5 + 1
	month := mp + 3
	year := yoe + (era-1)*400
	if month > 12 {
		month -= 12
		year++
	}
	var b [27]byte
	put2(b[0:], year/100)
	put2(b[2:], year%100)
	b[4] = '-'
	put2(b[5:], month)
	b[7] = '-'
	put2(b[8:], day)
	b[10] = 'T'
	put2(b[11:], secOfDay/3600)
	b[13] = ':'
	put2(b[14:], secOfDay/60%60)
	b[16] = ':'
	put2(b[17:], secOfDay%60)
	b[19] = '.'
	us := t.Nanosecond() / 1000
	put2(b[20:], us/10000)
	put2(b[22:], us/100%100)
	put2(b[24:], us%100)
	b[20+frac] = 'Z'
	return append(dst, b[:21+frac]...)
}

// put2 writes n (0 to 99) in two digits.
func put2(b []byte, n int) {
	b[0], b[1] = byte('0'+n/10), byte('0'+n%10)
}

// hexKey is a content key: the first half of the hash, in hex.
func hexKey(sum [sha256.Size]byte) string {
	var h [sha256.Size]byte
	hex.Encode(h[:], sum[:sha256.Size/2])
	return string(h[:])
}

// rowScratch is what NewRow reuses from row to row.
type rowScratch struct {
	buf []byte
	c   jsonscan.Canonicalizer
}

var rowScratches = sync.Pool{New: func() any { return &rowScratch{} }}

// maxKeptScratch bounds the scratch kept: grown beyond it by an odd row,
// it is not.
const maxKeptScratch = 256 << 10

func (sc *rowScratch) put() {
	if !sc.c.Release(maxKeptScratch) || cap(sc.buf) > maxKeptScratch {
		return
	}
	rowScratches.Put(sc)
}

// canonical appends the canonical JSON of raw (see AppendCanonical) to dst.
// empty is
// appended for a missing or null value; the value must otherwise start with
// one of want.
func (sc *rowScratch) canonical(dst []byte, raw json.RawMessage, empty string, want ...byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return append(dst, empty...), nil
	}
	if !bytes.Contains(want, raw[:1]) {
		kinds := map[byte]string{'{': "object", '[': "array"}
		names := make([]string, len(want))
		for i, w := range want {
			names[i] = kinds[w]
		}
		return dst, fmt.Errorf("want a JSON %s, got %.20q", strings.Join(names, " or "), raw)
	}
	sc.c.Limit = MaxDepth
	dst, err := sc.c.Append(dst, raw)
	return dst, canonicalError(err)
}
