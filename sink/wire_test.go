package sink

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// encodeReference is how the spool's lines were written with encoding/json;
// appendWireRow must write the same bytes.
func encodeReference(t testing.TB, r Row) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	id := json.RawMessage("null")
	if r.SubmissionID != nil {
		id = json.RawMessage(`"` + strconv.FormatInt(*r.SubmissionID, 10) + `"`)
	}
	err := enc.Encode(wireRow{
		FormID: r.FormID, SubmissionID: id, SubmissionKey: r.SubmissionKey,
		ContentKey: r.ContentKey, CreatedAt: r.CreatedAt.UTC().Format(TimeLayout),
		IsSpam: r.IsSpam, Fields: r.Fields, Files: r.Files, Raw: r.Raw,
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func checkWire(t *testing.T, r Row) {
	t.Helper()
	line := appendWireRow(nil, r)
	if want := encodeReference(t, r); !bytes.Equal(line, want) {
		t.Fatalf("line differs from encoding/json:\n got  %s want %s", line, want)
	}
	var p wireParser
	got, err := p.fast(line)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	// Reading decodes strings as encoding/json does: invalid UTF-8 becomes
	// U+FFFD. Compare with what encoding/json reads back.
	var w wireRow
	if err := json.Unmarshal(line, &w); err != nil {
		t.Fatal(err)
	}
	want := Row{FormID: w.FormID, SubmissionID: r.SubmissionID, SubmissionKey: w.SubmissionKey, ContentKey: w.ContentKey,
		CreatedAt: r.CreatedAt.UTC().Truncate(time.Microsecond), IsSpam: w.IsSpam, Fields: w.Fields, Files: w.Files, Raw: w.Raw}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
}

func TestWireMatchesEncodingJSON(t *testing.T) {
	id, neg := int64(9007199254740993), int64(-5)
	at := time.Date(2026, 2, 3, 4, 5, 6, 789012000, time.UTC)
	for _, r := range []Row{
		{FormID: "contact", SubmissionKey: "k", ContentKey: "c", CreatedAt: at, Fields: "{}", Files: "[]"},
		{FormID: "f", SubmissionID: &id, SubmissionKey: "9007199254740993", CreatedAt: at.In(time.FixedZone("x", 3600)), IsSpam: true,
			Fields: `{"msg":"line\nbreak \u2028 <b>&amp;","q":"\"quoted\" \\ back"}`, Files: `[{"name":"a.pdf"}]`,
			Raw: `{"id":9007199254740993,"data":{"msg":"x"},"extra":[1.50,2e400]}`},
		{FormID: "tab\there \x01 \u2029 é \xff", SubmissionID: &neg, Fields: "\x00\x1f\x7f", Files: strings.Repeat("x", 70<<10)},
	} {
		checkWire(t, r)
	}
}

func TestSpoolReadsOtherLayoutsAndLongLines(t *testing.T) {
	s, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// With an id, so that the rows are written as they are staged, the
	// line below between them.
	one := int64(1)
	big := Row{FormID: "f", SubmissionID: &one, SubmissionKey: "big", ContentKey: "c", CreatedAt: at, Fields: `{"x":"` + strings.Repeat("y", 200<<10) + `"}`, Files: "[]"}
	if err := s.Append(big); err != nil {
		t.Fatal(err)
	}
	// A line in another key order, with spaces, as another writer might
	// produce: read through encoding/json.
	if _, err := s.w.WriteString(`{ "files":"[]", "fields":"{}", "is_spam":true, "created_at":"2026-01-01T00:00:00.000001Z", "content_key":"c2", "submission_key":"7", "submission_id":7, "form_id":"f" }` + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(Row{FormID: "f", SubmissionKey: "last", CreatedAt: at, Fields: "{}", Files: "[]"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for r, err := range s.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, r.SubmissionKey)
		if r.SubmissionKey == "big" && r.Fields != big.Fields {
			t.Errorf("a %d-byte line came back as %d bytes", len(big.Fields), len(r.Fields))
		}
		if r.SubmissionKey == "7" && (r.SubmissionID == nil || *r.SubmissionID != 7 || !r.IsSpam || r.CreatedAt.Nanosecond() != 1000) {
			t.Errorf("other layout read as %+v", r)
		}
	}
	if strings.Join(keys, ",") != "big,7,last" {
		t.Errorf("read %v", keys)
	}
}

func TestSpoolReportsACorruptLine(t *testing.T) {
	s, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	s.w.WriteString(`{"form_id":"f","submission_id":` + "\n")
	s.Finish()
	for _, err := range s.Rows() {
		if err == nil || !strings.Contains(err.Error(), "row 1") {
			t.Fatalf("corrupt line read with error %v", err)
		}
		return
	}
	t.Fatal("no row and no error")
}

// FuzzWire holds the spool's hand-written lines to encoding/json's bytes
// and its reader to what encoding/json reads back.
func FuzzWire(f *testing.F) {
	f.Add("contact", int64(42), true, "k", "{\"a\":\"\\u2028\"}", "[]", int64(1767225600123456))
	f.Add("\xff\x00<>&", int64(-1), false, "", "", "\u2029", int64(0))
	f.Fuzz(func(t *testing.T, form string, id int64, withID bool, key, fields, files string, us int64) {
		r := Row{FormID: form, SubmissionKey: key, ContentKey: key + "c", IsSpam: id%2 == 0, Fields: fields, Files: files,
			CreatedAt: time.UnixMicro(us % 253402300799000000).UTC()}
		if r.CreatedAt.Year() < 1 {
			r.CreatedAt = time.UnixMicro(0).UTC()
		}
		if withID {
			r.SubmissionID = &id
		}
		checkWire(t, r)
	})
}

func BenchmarkSpool(b *testing.B) {
	id := int64(123456)
	r, err := NewRow("contact", &id, time.Date(2026, 1, 1, 0, 0, 0, 123000000, time.UTC), false,
		json.RawMessage(`{"name":"Ada Lovelace","email":"ada@example.com","message":"Hello \"there\", I'd like a quote.\nThanks!","consent":true}`),
		json.RawMessage(`[{"name":"cv.pdf","size":12345,"url":"https://files.example.com/a/b/cv.pdf"}]`))
	if err != nil {
		b.Fatal(err)
	}
	line := appendWireRow(nil, r)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		var dst []byte
		for b.Loop() {
			dst = appendWireRow(dst[:0], r)
		}
	})
	b.Run("encode-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			encodeReference(b, r)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		var p wireParser
		for b.Loop() {
			if _, err := p.parse(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w wireRow
			if err := json.Unmarshal(line, &w); err != nil {
				b.Fatal(err)
			}
			if _, err := time.Parse(TimeLayout, w.CreatedAt); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// RowsReversed yields what Rows does, last row first, whatever the lines'
// lengths against its chunk (lines longer than a chunk, lines that end on a
// chunk's edge); DescendingIDs holds only for strictly descending ids.
func TestSpoolRowsReversed(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, 2, 3, 50, 700} {
		s, err := NewSpool(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Remove()
		for i := range n {
			id := int64(n - i)
			pad := strings.Repeat("z", (i*7919)%(reverseChunk/3))
			if i%97 == 5 {
				pad = strings.Repeat("w", reverseChunk+i) // longer than a chunk
			}
			if err := s.Append(Row{FormID: "f", SubmissionID: &id, SubmissionKey: strconv.FormatInt(id, 10), ContentKey: "c",
				CreatedAt: at.Add(time.Duration(id) * time.Second), Fields: `{"p":"` + pad + `"}`, Files: "[]"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
		var fwd, rev []Row
		for r, err := range s.Rows() {
			if err != nil {
				t.Fatal(err)
			}
			fwd = append(fwd, r)
		}
		for r, err := range s.RowsReversed() {
			if err != nil {
				t.Fatal(err)
			}
			rev = append(rev, r)
		}
		if len(fwd) != n || len(rev) != n {
			t.Fatalf("n=%d: forward %d rows, reversed %d", n, len(fwd), len(rev))
		}
		for i := range fwd {
			if !reflect.DeepEqual(fwd[i], rev[n-1-i]) {
				t.Fatalf("n=%d: row %d differs read backwards", n, i)
			}
		}
		if s.DescendingIDs() != (n > 0) {
			t.Errorf("n=%d: DescendingIDs = %v", n, s.DescendingIDs())
		}
	}
	s, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	for _, id := range []int64{5, 4, 4} { // a repeat
		if err := s.Append(Row{FormID: "f", SubmissionID: &id, SubmissionKey: strconv.FormatInt(id, 10), CreatedAt: at, Fields: "{}", Files: "[]"}); err != nil {
			t.Fatal(err)
		}
	}
	if s.DescendingIDs() {
		t.Error("DescendingIDs with an id staged twice")
	}
	if err := s.Append(Row{FormID: "f", SubmissionKey: "c", CreatedAt: at, Fields: "{}", Files: "[]"}); err != nil {
		t.Fatal(err)
	}
	if s.DescendingIDs() {
		t.Error("DescendingIDs with a row without id")
	}
}
