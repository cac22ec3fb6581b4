package formsapi

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestLiveReferenceExample: the live service's reference example, served
// byte for byte, gives its values in Fields and the submission in Raw.
func TestLiveReferenceExample(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, liveExample) })
	b := setup(t, srv.URL)
	p, _, err := b.client.Page(t.Context(), "contact", 1, 10)
	if err != nil {
		t.Fatal(record(err))
	}
	if len(p.Submissions) != 1 || p.Total != 150 || p.TotalPages != 15 || !p.Newer || p.Next != "https://…/submissions?page=2" {
		t.Fatalf("page = %+v", p)
	}
	s := p.Submissions[0]
	if s.ID == nil || *s.ID != 123 || s.CreatedAt.Format("2006-01-02T15:04:05.000Z") != "2024-05-11T10:30:00.000Z" {
		t.Errorf("id/created_at = %v %v", s.ID, s.CreatedAt)
	}
	if string(s.Fields) != `{"name": "John Doe", "email": "john@example.com", "message": "Hello!"}` {
		t.Errorf("Fields = %s", s.Fields)
	}
	if string(s.Files) != "[]" || s.IsSpam {
		t.Errorf("Files %s IsSpam %v, want [] false", s.Files, s.IsSpam)
	}
	wantRaw := liveExample[strings.Index(liveExample, `{"id"`) : strings.Index(liveExample, `}],`)+1]
	if string(s.Raw) != wantRaw {
		t.Errorf("Raw = %s\nwant  %s", s.Raw, wantRaw)
	}
}

// TestDecodeVariants: every shape the services are known to send.
func TestDecodeVariants(t *testing.T) {
	t.Parallel()
	page := func(sub, links string) string {
		return `{"data":[` + sub + `],"meta":{"pagination":{"total":1,"count":1,"per_page":10,"current_page":1,"total_pages":1,"links":` + links + `}}}`
	}
	const at = `"created_at":"2026-01-01T00:00:00.000Z"`
	tests := []struct {
		name, body    string
		fields, files string // "" means nil
		id            int64  // 0 means nil
		spam, newer   bool
	}{
		{"links empty PHP array", page(`{"id":5,"data":{"a":1},`+at+`}`, `[]`), `{"a":1}`, "[]", 5, false, true},
		{"links null", page(`{"id":5,"data":{"a":1},`+at+`}`, `null`), `{"a":1}`, "[]", 5, false, true},
		{"links members absent", page(`{"fields":{"a":1},`+at+`}`, `{}`), `{"a":1}`, "[]", 0, false, false},
		{"links next only", page(`{"fields":{},`+at+`}`, `{"next":null}`), `{}`, "[]", 0, false, true},
		{"links extra member", page(`{"fields":{},`+at+`}`, `{"first":"x","previous":null}`), `{}`, "[]", 0, false, true},
		{"fields wins over data", page(`{"fields":{"f":1},"data":{"d":1},`+at+`}`, `{}`), `{"f":1}`, "[]", 0, false, false},
		{"fields null, data set", page(`{"fields":null,"data":{"d":1},`+at+`}`, `{}`), `{"d":1}`, "[]", 0, false, false},
		{"data empty PHP array", page(`{"id":7,"data":[],`+at+`}`, `[]`), `{}`, "[]", 7, false, true},
		{"fields empty array", page(`{"fields":[ ],`+at+`}`, `{}`), `{}`, "[]", 0, false, false},
		{"neither fields nor data", page(`{"id":7,`+at+`}`, `{}`), "", "[]", 7, false, true},
		{"files object of one", page(`{"fields":{},"files":{"cv":{"name":"a.pdf","url":"https://x/a"}},`+at+`}`, `{}`),
			`{}`, `{"cv":{"name":"a.pdf","url":"https://x/a"}}`, 0, false, false},
		{"files object of lists", page(`{"fields":{},"files":{"cv":[{"name":"a","url":"u"},{"name":"b","url":"v"}]},`+at+`}`, `{}`),
			`{}`, `{"cv":[{"name":"a","url":"u"},{"name":"b","url":"v"}]}`, 0, false, false},
		{"files null", page(`{"fields":{},"files":null,`+at+`}`, `{}`), `{}`, "[]", 0, false, false},
		{"is_spam 1", page(`{"fields":{},"is_spam":1,`+at+`}`, `{}`), `{}`, "[]", 0, true, false},
		{"is_spam 0", page(`{"fields":{},"is_spam":0,`+at+`}`, `{}`), `{}`, "[]", 0, false, false},
		{"is_spam true", page(`{"fields":{},"is_spam":true,`+at+`}`, `{}`), `{}`, "[]", 0, true, false},
		{"id in a string", page(`{"id":"9007199254740993","data":{},`+at+`}`, `[]`), `{}`, "[]", 9007199254740993, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := decodePage("f", 1, []byte(tc.body))
			if err != nil {
				t.Fatal(record(err))
			}
			s := p.Submissions[0]
			if tc.fields == "" && s.Fields != nil || tc.fields != "" && string(s.Fields) != tc.fields {
				t.Errorf("Fields = %q, want %q", s.Fields, tc.fields)
			}
			if string(s.Files) != tc.files {
				t.Errorf("Files = %s, want %s", s.Files, tc.files)
			}
			if tc.id == 0 && s.ID != nil || tc.id != 0 && (s.ID == nil || *s.ID != tc.id) {
				t.Errorf("ID = %v, want %d", s.ID, tc.id)
			}
			if s.IsSpam != tc.spam || p.Newer != tc.newer {
				t.Errorf("IsSpam %v Newer %v, want %v %v", s.IsSpam, p.Newer, tc.spam, tc.newer)
			}
			body := tc.body[strings.Index(tc.body, "[")+1 : strings.Index(tc.body, `],"meta"`)]
			if string(s.Raw) != body {
				t.Errorf("Raw = %s, want the object as sent %s", s.Raw, body)
			}
		})
	}
}

func TestDecodeRawInvalidUTF8(t *testing.T) {
	t.Parallel()
	body := "{\"data\":[{\"fields\":{\"x\":\"a\xffb\"},\"created_at\":\"2026-01-01T00:00:00Z\"}],\"meta\":{\"pagination\":{\"total\":1,\"per_page\":25,\"current_page\":1}}}"
	p, err := decode("f", []byte(body))
	if err != nil {
		t.Fatal(record(err))
	}
	s := p.Submissions[0]
	if string(s.Raw) != "{\"fields\":{\"x\":\"a\uFFFDb\"},\"created_at\":\"2026-01-01T00:00:00Z\"}" || string(s.Fields) != "{\"x\":\"a\uFFFDb\"}" {
		t.Errorf("Raw %q Fields %q", s.Raw, s.Fields)
	}
}

// TestPagingMustAddUp: a page that is not the one asked for, or whose
// total_pages does not follow from total and per_page, is a KindPaging
// error that says what did not add up, and is not retried.
func TestPagingMustAddUp(t *testing.T) {
	t.Parallel()
	pag := func(total, perPage, current, totalPages int) string {
		return `{"data":[],"meta":{"pagination":{"total":` + itoa(total) + `,"per_page":` + itoa(perPage) +
			`,"current_page":` + itoa(current) + `,"total_pages":` + itoa(totalPages) + `,"links":{}}}}`
	}
	bad := map[string]struct {
		body  string
		asked int
		says  string
	}{
		"page ignored":             {pag(30, 10, 1, 3), 2, "asked for page 2, the response says current_page 1"},
		"total_pages 0":            {pag(30, 10, 1, 0), 1, "total_pages is 0, but total 30 at per_page 10 makes 3 page(s)"},
		"total_pages too many":     {pag(30, 10, 1, 4), 1, "total_pages is 4, but total 30 at per_page 10 makes 3 page(s)"},
		"total_pages rounded down": {pag(31, 10, 1, 3), 1, "total_pages is 3, but total 31 at per_page 10 makes 4 page(s)"},
		"empty form, 2 pages":      {pag(0, 10, 1, 2), 1, "total_pages is 2, but total 0 at per_page 10 makes 1 page(s)"},
		"total near the int limit": {pag(math.MaxInt, 2, 1, 1), 1, "total_pages is 1, but total 9223372036854775807 at per_page 2 makes 4611686018427387904 page(s)"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := decodePage("f", tc.asked, []byte(tc.body))
			var e *Error
			if !errors.As(record(err), &e) || e.Kind != KindPaging || !errors.Is(err, ErrPaging) || e.Kind.retryable() {
				t.Fatalf("err = %v, want a KindPaging *Error", err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v\nwant it to say %q", err, tc.says)
			}
		})
	}
	for name, body := range map[string]string{
		"empty form, 0 pages": pag(0, 10, 1, 0),
		"empty form, 1 page":  pag(0, 10, 1, 1),
		"exact multiple":      pag(30, 10, 1, 3),
	} {
		if _, err := decodePage("f", 1, []byte(body)); err != nil {
			t.Errorf("%s: %v", name, record(err))
		}
	}
	if _, err := decodePage("f", 5, []byte(pag(30, 10, 5, 3))); err != nil {
		t.Errorf("past the end: %v", record(err))
	}
	// Without total_pages it is derived, and never negative.
	noTP := `{"data":[],"meta":{"pagination":{"total":9223372036854775807,"per_page":2,"current_page":1}}}`
	if p, err := decodePage("f", 1, []byte(noTP)); err != nil || p.TotalPages != math.MaxInt/2+1 {
		t.Errorf("total near the int limit, no total_pages: %+v, %v", p, record(err))
	}
	// Through the client: one request, no retry.
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, pag(30, 10, 1, 3)) })
	b := setup(t, srv.URL)
	_, resp, err := b.client.Page(t.Context(), "f", 3, 10)
	if !errors.Is(record(err), ErrPaging) || resp.Requests != 1 {
		t.Fatalf("err = %v after %d requests, want ErrPaging after 1", err, resp.Requests)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
