package sink

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewRowKeys(t *testing.T) {
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
	r, err := NewRow("f", nil, time.Now(), false, json.RawMessage(`{"a":"1"}`), json.RawMessage(`{"cv":{"name":"cv.pdf","url":"https://x/cv.pdf"}}`))
	if err != nil || r.Files != `{"cv":{"name":"cv.pdf","url":"https://x/cv.pdf"}}` {
		t.Fatalf("files object: %+v, %v", r, err)
	}
}

func TestNewRowRejectsBadShapes(t *testing.T) {
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
