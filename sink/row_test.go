package sink

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/jsonscan"
)

func TestNewRowKeys(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	id := int64(42)
	withID, err := NewRow("f", &id, at, false, json.RawMessage(`{"b":"2","a":"<1>"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if withID.SubmissionKey != "42" || withID.Fields != `{"a":"<1>","b":"2"}` || withID.Files != "[]" {
		t.Errorf("row = %+v", withID)
	}
	if !withID.CreatedAt.Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("created_at %v not truncated to microseconds", withID.CreatedAt)
	}
	// The older form prints 6 digits, the newer 3: the content key must
	// not see the difference, nor key order or spacing.
	older, err := NewRow("f", nil, at, true, json.RawMessage(`{ "a" : "<1>", "b":"2" }`), json.RawMessage(`[]`))
	if err != nil {
		t.Fatal(err)
	}
	if older.SubmissionKey != older.ContentKey || older.SubmissionID != nil {
		t.Errorf("an id-less row must be keyed by content: %+v", older)
	}
	if older.ContentKey != withID.ContentKey {
		t.Error("content key differs between response forms for the same submission")
	}
	other, _ := NewRow("f", nil, at, false, json.RawMessage(`{"a":"<1>","b":"3"}`), nil)
	if other.ContentKey == older.ContentKey {
		t.Error("different content, same key")
	}
}

// The live service keys files by input name: an object is as good as an
// array.
func TestNewRowAcceptsFilesObject(t *testing.T) {
	t.Parallel()
	r, err := NewRow("f", nil, time.Now(), false, json.RawMessage(`{"a":"1"}`), json.RawMessage(`{"cv":{"name":"cv.pdf","url":"https://x/cv.pdf"}}`))
	if err != nil || r.Files != `{"cv":{"name":"cv.pdf","url":"https://x/cv.pdf"}}` {
		t.Fatalf("files object: %+v, %v", r, err)
	}
}

func TestNewRowRejectsBadShapes(t *testing.T) {
	t.Parallel()
	at := time.Now()
	for _, tc := range []struct{ fields, files string }{
		{`[1]`, `[]`}, {`"x"`, `[]`}, {`{}`, `"x"`}, {`{}`, `1`}, {`{"a":`, `[]`},
	} {
		if _, err := NewRow("f", nil, at, false, json.RawMessage(tc.fields), json.RawMessage(tc.files)); err == nil {
			t.Errorf("fields %s files %s accepted", tc.fields, tc.files)
		}
	}
	if r, err := NewRow("f", nil, at, false, json.RawMessage(`null`), nil); err != nil || r.Fields != "{}" {
		t.Errorf("null fields: %v %q", err, r.Fields)
	}
}

func TestSpoolRoundTrip(t *testing.T) {
	t.Parallel()
	s, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []Row
	for i := range 100 {
		id := int64(i)
		var idp *int64
		if i%2 == 0 {
			idp = &id
		}
		r, err := NewRow("form", idp, base.Add(time.Duration(i)*time.Microsecond*1001), i%3 == 0,
			json.RawMessage(`{"msg":"line\nbreak \u2028 <b>`+strings.Repeat("x", i)+`"}`), json.RawMessage(`[{"name":"a.pdf"}]`))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	if s.Append(want[0]) == nil {
		t.Error("append after finish accepted")
	}
	lo, hi := s.CreatedRange()
	if !lo.Equal(want[0].CreatedAt) || !hi.Equal(want[99].CreatedAt) || s.Len() != 100 || s.Size() == 0 {
		t.Errorf("range %v..%v len %d size %d", lo, hi, s.Len(), s.Size())
	}
	for pass := range 2 { // readable more than once (a retried upload)
		i := 0
		for r, err := range s.Rows() {
			if err != nil {
				t.Fatal(err)
			}
			w := want[i]
			if r.SubmissionKey != w.SubmissionKey || r.ContentKey != w.ContentKey || !r.CreatedAt.Equal(w.CreatedAt) ||
				r.Fields != w.Fields || r.Files != w.Files || r.IsSpam != w.IsSpam || (r.SubmissionID == nil) != (w.SubmissionID == nil) {
				t.Fatalf("pass %d row %d: got %+v want %+v", pass, i, r, w)
			}
			i++
		}
		if i != 100 {
			t.Fatalf("read %d rows", i)
		}
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal("second Remove:", err)
	}
}

// Fields nested deeper than any sink can query are refused with
// ErrTooDeep, so that the engine can keep the row without them.
func TestNewRowDepthBound(t *testing.T) {
	t.Parallel()
	nested := func(levels int) json.RawMessage {
		return json.RawMessage(`{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`)
	}
	if _, err := NewRow("f", nil, time.Now(), false, nested(MaxDepth), nil); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	if _, err := NewRow("f", nil, time.Now(), false, nested(MaxDepth+1), nil); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("%d levels: %v, want ErrTooDeep", MaxDepth+1, err)
	}
	if _, err := NewRow("f", nil, time.Now(), false, nil, nested(1001)); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("files 1001 levels: %v, want ErrTooDeep", err)
	}
}

// fieldNames are the names of a row's fields, sorted; none when err.
func fieldNames(t *testing.T, r Row, err error) []string {
	t.Helper()
	if err != nil {
		return nil
	}
	names, err := storedNames(r.Fields)
	if err != nil {
		t.Fatalf("stored fields %q: %v", r.Fields, err)
	}
	return names
}

// storedNames are the member names of stored fields, sorted.
func storedNames(fields string) ([]string, error) {
	var m map[string]json.RawMessage
	err := json.Unmarshal([]byte(fields), &m)
	return slices.Sorted(maps.Keys(m)), err
}

// referenceRow is how NewRow built a row when it canonicalised fields
// and files into strings of their own and hashed them in three writes: the
// bytes it stores and the key it computes must not change.
func referenceRow(formID string, id *int64, createdAt time.Time, isSpam bool, fields, files json.RawMessage) (Row, []string, error) {
	canonical := func(raw json.RawMessage, empty string, want ...byte) (string, []string, error) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			return empty, []string{}, nil
		}
		if !bytes.Contains(want, raw[:1]) {
			kinds := map[byte]string{'{': "object", '[': "array"}
			names := make([]string, len(want))
			for i, w := range want {
				names[i] = kinds[w]
			}
			return "", nil, fmt.Errorf("want a JSON %s, got %.20q", strings.Join(names, " or "), raw)
		}
		c := jsonscan.Canonicalizer{Limit: MaxDepth}
		out, err := c.Append(make([]byte, 0, len(raw)), raw)
		if err != nil {
			return "", nil, canonicalError(err)
		}
		var keys []string
		if k, ok := c.Keys(); ok {
			keys = []string{}
			for _, k := range k {
				keys = append(keys, string(k))
			}
		}
		return string(out), keys, nil
	}
	f, names, err := canonical(fields, "{}", '{')
	if err != nil {
		return Row{}, nil, fmt.Errorf("submission fields: %w", err)
	}
	fl, _, err := canonical(files, "[]", '[', '{')
	if err != nil {
		return Row{}, nil, fmt.Errorf("submission files: %w", err)
	}
	createdAt = createdAt.UTC().Truncate(time.Microsecond)
	h := sha256.New()
	h.Write([]byte(createdAt.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")))
	h.Write([]byte{0})
	h.Write([]byte(f))
	h.Write([]byte{0})
	h.Write([]byte(fl))
	r := Row{FormID: formID, CreatedAt: createdAt, IsSpam: isSpam, Fields: f, Files: fl, ContentKey: hex.EncodeToString(h.Sum(nil)[:16])}
	if id != nil {
		v := *id
		r.SubmissionID = &v
		r.SubmissionKey = strconv.FormatInt(v, 10)
	} else {
		r.SubmissionKey = r.ContentKey
	}
	return r, names, nil
}

func checkNewRow(t *testing.T, id *int64, at time.Time, fields, files []byte) {
	t.Helper()
	got, gerr := NewRow("f", id, at, false, fields, files)
	gotNames := fieldNames(t, got, gerr)
	want, wantNames, werr := referenceRow("f", id, at, false, fields, files)
	if (gerr == nil) != (werr == nil) || gerr != nil && (gerr.Error() != werr.Error() || errors.Is(gerr, ErrTooDeep) != errors.Is(werr, ErrTooDeep)) {
		t.Fatalf("%q %q: error %v, want %v", fields, files, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) || !slices.Equal(gotNames, wantNames) {
		t.Fatalf("%q %q:\n got  %+v %q\n want %+v %q", fields, files, got, gotNames, want, wantNames)
	}
	if gerr == nil && ContentKey(at, got.Fields, got.Files) != got.ContentKey {
		t.Fatalf("%q %q: ContentKey differs from the row's", fields, files)
	}
}

func TestNewRowMatchesReference(t *testing.T) {
	t.Parallel()
	id := int64(77)
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, fields := range append(canonicalCases, ``, ` null `, `{"k\u00e9":1,"b":{"z":1,"a":2},"a":[]}`, `{"é":1,"e":2,"\u00e9":3}`, `{"a":`) {
		for _, files := range []string{``, `[]`, `{"cv":{"name":"a.pdf"}}`, `[{"b":1,"a":2}]`, `"x"`, `[`} {
			checkNewRow(t, &id, at, []byte(fields), []byte(files))
			checkNewRow(t, nil, at, []byte(fields), []byte(files))
		}
	}
	deep := `{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`
	checkNewRow(t, nil, at, []byte(deep), nil)
	checkNewRow(t, nil, at, nil, []byte(deep))
}

// FuzzNewRow holds NewRow to the way it built rows before, byte for
// byte and key for key.
//
//	go test ./sink -run '^$' -fuzz FuzzNewRow -fuzztime 60s
func FuzzNewRow(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c), []byte(`[]`), int64(1767225600123456), true)
	}
	f.Add([]byte(`{"b":"\u2028","a":{"y":1,"x":2},"a":3}`), []byte(`{"cv":[{"n":"a"}]}`), int64(-1), false)
	f.Fuzz(func(t *testing.T, fields, files []byte, us int64, withID bool) {
		var id *int64
		if withID {
			id = &us
		}
		checkNewRow(t, id, time.UnixMicro(us%253402300799000000), fields, files)
	})
}

// appendUTC writes what time.Time.AppendFormat writes, years 0 to 9999
// by hand, the others by AppendFormat.
func TestAppendUTC(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		{}, time.Unix(0, 0), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 28, 23, 59, 59, 999999999, time.FixedZone("x", -3600)),
		time.Date(2024, 2, 29, 1, 2, 3, 4005006, time.FixedZone("y", 5*3600+1800)),
	}
	for us := int64(-62167219200_000000); us < 253402300800_000000; us += 7_777_777_777_777 {
		times = append(times, time.UnixMicro(us).Add(987*time.Nanosecond))
	}
	// Every day of years whose leap rules differ, at both ends of the day.
	for _, year := range []int{0, 1, 3, 4, 100, 399, 400, 1600, 1900, 1970, 2000, 2024, 2100, 9996, 9999} {
		for d := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() == year; d = d.AddDate(0, 0, 1) {
			times = append(times, d, d.Add(24*time.Hour-time.Nanosecond))
		}
	}
	for _, at := range times {
		for frac, layout := range map[int]string{6: TimeLayout, 3: "2006-01-02T15:04:05.000Z"} {
			if got, want := string(appendUTC(nil, at, frac)), at.UTC().Format(layout); got != want {
				t.Errorf("%v: %s, want %s", at, got, want)
			}
		}
	}
}
