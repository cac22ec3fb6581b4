package formsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"
	"unicode/utf8"
)

func FuzzDecodePage(f *testing.F) {
	for _, seed := range []string{
		olderPage,
		newerPage,
		olderPage[:len(olderPage)/2],
		`{"data":[],"meta":{"pagination":{"total":0,"count":0,"per_page":10,"current_page":1,"total_pages":0,"links":{"previous":null,"next":null}}}}`,
		`{"data":[{"id":9223372036854775807,"created_at":"2026-01-01T00:00:00.123456789+14:00","fields":{"a":"\ud800"},"files":null}],"meta":{"pagination":{"total":1,"count":1,"per_page":1,"current_page":1}}}`,
		`{"data":[{"created_at":"0000-01-01T00:00:00Z"}],"meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}}`,
		`{"data":[{"created_at":"9999-12-31T23:59:59.9999999999-23:59"}],"meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}}`,
		`{"data":{},"meta":{"pagination":{"total":-1}}}`,
		`{"data":[1,2,3]}`,
		`{"data":[{"created_at":"2026-01-01T00:00:00Z","fields":[]}],"meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}}`,
		`{"data":[],"meta":{"pagination":{"total":1e400,"per_page":25,"current_page":1}}}`,
		`{"data":[],"meta":{"pagination":{"total":0,"per_page":25,"current_page":1,"links":[]}}}`,
		"{\"data\":[{\"created_at\":\"2026-01-01T00:00:00Z\",\"fields\":{\"x\":\"\xff\xfe\"}}],\"meta\":{\"pagination\":{\"total\":1,\"per_page\":25,\"current_page\":1}}}",
		liveExample,
		`{"data":[{"id":"17","data":{"a":"b"},"files":{"cv":{"name":"a.pdf","url":"https://x/a.pdf"}},"is_spam":1,"created_at":"2026-01-01T00:00:00.000Z"}],"meta":{"pagination":{"total":1,"count":1,"per_page":10,"current_page":1,"total_pages":1,"links":[]}}}`,
		`{"data":[],"meta":{"pagination":{"total":30,"per_page":10,"current_page":1,"total_pages":0}}}`,
		`null`, ``, `[]`, `"x"`, `{}`, `{"data":null}`, `<html></html>`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decode("fz", body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Kind != KindMalformed && e.Kind != KindPaging) || !errors.Is(err, e.Kind.sentinel()) || e.FormID != "fz" {
				t.Fatalf("error %v is not a malformed *Error", err)
			}
			if p != nil {
				t.Fatal("page returned with an error")
			}
			return
		}
		if p.FormID != "fz" || p.PerPage < 1 || p.Total < 0 || p.CurrentPage < 0 || p.TotalPages < 0 {
			t.Fatalf("pagination insane: %+v", p)
		}
		if p.Count != len(p.Submissions) || p.Count > p.PerPage {
			t.Fatalf("count %d, %d submissions, per_page %d", p.Count, len(p.Submissions), p.PerPage)
		}
		for i, s := range p.Submissions {
			if s.CreatedAt.Location() != time.UTC || s.CreatedAt.Nanosecond()%1000 != 0 {
				t.Fatalf("submission %d CreatedAt %v not UTC microseconds", i, s.CreatedAt)
			}
			var fields map[string]any
			var files any
			if s.Fields != nil && (unmarshal(s.Fields, &fields) != nil || fields == nil || s.Fields[0] != '{') {
				t.Fatalf("submission %d fields %q not an object", i, s.Fields)
			}
			if unmarshal(s.Files, &files) != nil || (s.Files[0] != '[' && s.Files[0] != '{') {
				t.Fatalf("submission %d files %q neither an array nor an object", i, s.Files)
			}
			var raw map[string]any
			if unmarshal(s.Raw, &raw) != nil || raw == nil || !utf8.Valid(s.Raw) {
				t.Fatalf("submission %d raw %q not a valid object", i, s.Raw)
			}
			if s.ID != nil && !p.Newer {
				t.Fatal("id present but page not marked newer")
			}
		}
	})
}

// unmarshal decodes JSON keeping numbers as text: a number beyond
// float64's range (1e700) is valid JSON that json.Unmarshal into any
// refuses.
func unmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}
