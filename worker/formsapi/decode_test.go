package formsapi

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDecodePageOlderForm(t *testing.T) {
	t.Parallel()
	p, err := decode("f1", []byte(olderPage))
	if err != nil {
		t.Fatal(record(err))
	}
	if p.Newer {
		t.Error("older form reported as newer")
	}
	if p.PerPage != 25 || p.Total != 27 || p.Count != 2 || p.CurrentPage != 2 || p.TotalPages != 2 {
		t.Errorf("pagination = %+v", p)
	}
	if p.Next != "" || p.Previous != "" {
		t.Errorf("links = %q %q, want empty", p.Next, p.Previous)
	}
	s := p.Submissions[0]
	if s.ID != nil {
		t.Errorf("ID = %v, want nil", *s.ID)
	}
	want := time.Date(2026, 2, 28, 10, 0, 0, 123456000, time.UTC)
	if !s.CreatedAt.Equal(want) || s.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v", s.CreatedAt, want)
	}
	if string(s.Fields) != `{"name":"Ada","email":"ada@example.com","message":"hi"}` || string(s.Files) != `[]` {
		t.Errorf("fields/files = %s %s", s.Fields, s.Files)
	}
	if !p.Submissions[1].IsSpam || string(p.Submissions[1].Files) != `[{"name":"cv.pdf"}]` {
		t.Errorf("second = %+v", p.Submissions[1])
	}
}

func TestDecodePageNewerForm(t *testing.T) {
	t.Parallel()
	p, err := decode("f1", []byte(newerPage))
	if err != nil {
		t.Fatal(record(err))
	}
	if !p.Newer {
		t.Error("newer form not detected")
	}
	if p.Submissions[0].ID == nil || *p.Submissions[0].ID != 1042 {
		t.Errorf("ID = %v", p.Submissions[0].ID)
	}
	if got := p.Submissions[1].CreatedAt; !got.Equal(time.Date(2026, 2, 28, 9, 59, 59, 999000000, time.UTC)) {
		t.Errorf("CreatedAt = %v", got)
	}
	if p.Next != "https://forms.example.com/api/forms/f1/submissions?page=2&limit=2" || p.Previous != "" {
		t.Errorf("links = %q %q", p.Next, p.Previous)
	}
	if p.PerPage != 2 {
		t.Errorf("PerPage = %d", p.PerPage)
	}
}

// TestDecodePageAfterByteOrderMark: a body opened by a UTF-8 byte order
// mark is the page without it.
func TestDecodePageAfterByteOrderMark(t *testing.T) {
	t.Parallel()
	want, err := decode("f1", []byte(newerPage))
	if err != nil {
		t.Fatal(record(err))
	}
	got, err := decode("f1", []byte("\uFEFF"+newerPage))
	if err != nil {
		t.Fatal(record(err))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after a byte order mark:\n%+v\nwithout:\n%+v", got, want)
	}
	// Only one, and only first.
	for _, body := range []string{"\uFEFF\uFEFF" + newerPage, " \uFEFF" + newerPage} {
		if _, err := decode("f1", []byte(body)); err == nil {
			t.Errorf("%q... decoded", body[:8])
		}
	}
}

func TestDecodePageNewerDetectedByLinksAlone(t *testing.T) {
	t.Parallel()
	body := `{"data":[],"meta":{"pagination":{"total":0,"count":0,"per_page":10,"current_page":1,"total_pages":0,"links":{"previous":null,"next":null}}}}`
	p, err := decode("f1", []byte(body))
	if err != nil {
		t.Fatal(record(err))
	}
	if !p.Newer || len(p.Submissions) != 0 {
		t.Errorf("got %+v", p)
	}
}

func TestParseCreatedAt(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2026-02-28T10:00:00Z", base},
		{"2026-02-28T10:00:00.1Z", base.Add(100 * time.Millisecond)},
		{"2026-02-28T10:00:00.12Z", base.Add(120 * time.Millisecond)},
		{"2026-02-28T10:00:00.123Z", base.Add(123 * time.Millisecond)},
		{"2026-02-28T10:00:00.1234Z", base.Add(123400 * time.Microsecond)},
		{"2026-02-28T10:00:00.12345Z", base.Add(123450 * time.Microsecond)},
		{"2026-02-28T10:00:00.123456Z", base.Add(123456 * time.Microsecond)},
		{"2026-02-28T10:00:00.1234567Z", base.Add(123456 * time.Microsecond)}, // truncated
		{"2026-02-28T10:00:00.12345678Z", base.Add(123456 * time.Microsecond)},
		{"2026-02-28T10:00:00.123456789Z", base.Add(123456 * time.Microsecond)},
		{"2026-02-28T12:30:00.5+02:30", base.Add(500 * time.Millisecond)},
		{"2026-02-28T05:00:00.000001-05:00", base.Add(time.Microsecond)},
		{"2026-02-28T10:00:00+00:00", base},
		{"2026-02-28T00:30:00.999999999-09:30", base.Add(999999 * time.Microsecond)},
	}
	for _, tt := range tests {
		got, err := ParseCreatedAt(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, record(err))
			continue
		}
		if !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("%s = %v, want %v UTC", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"", "2026-02-28", "2026-02-28 10:00:00Z", "2026-02-28T10:00:00", "2026-02-28T10:00:00.Z", "2026-13-01T00:00:00Z", "yesterday", "2026-02-28T10:00:00+0200"} {
		if _, err := ParseCreatedAt(bad); err == nil {
			t.Errorf("%q parsed, want error", bad)
		}
	}
}

func TestDecodePageDefaultsAndTolerance(t *testing.T) {
	t.Parallel()
	body := `{"extra":1,"data":[{"created_at":"2026-01-01T00:00:00Z","fields":null,"unknown":{"x":1}},{"created_at":"2026-01-01T00:00:00Z","files":null,"is_spam":null}],
	 "meta":{"pagination":{"total":2,"count":2,"per_page":25,"current_page":1,"total_pages":1,"links":{},"new_member":"x"},"other":true}}`
	p, err := decode("f1", []byte(body))
	if err != nil {
		t.Fatal(record(err))
	}
	for i, s := range p.Submissions {
		if s.Fields != nil || string(s.Files) != "[]" || s.IsSpam {
			t.Errorf("submission %d = %s %s %v", i, s.Fields, s.Files, s.IsSpam)
		}
	}
	// total_pages absent: derived from total and per_page.
	body = `{"data":[],"meta":{"pagination":{"total":51,"per_page":25,"current_page":3}}}`
	p, err = decode("f1", []byte(body))
	if err != nil {
		t.Fatal(record(err))
	}
	if p.TotalPages != 3 {
		t.Errorf("TotalPages = %d, want 3", p.TotalPages)
	}
}

func TestDecodePageMalformed(t *testing.T) {
	t.Parallel()
	sub := `{"created_at":"2026-01-01T00:00:00Z"}`
	env := func(data, pag string) string {
		return `{"data":` + data + `,"meta":{"pagination":` + pag + `}}`
	}
	okPag := `{"total":1,"count":1,"per_page":25,"current_page":4,"total_pages":1,"links":{}}`
	tests := map[string]string{
		"not json":              `<html>502 Bad Gateway</html>`,
		"empty":                 ``,
		"truncated":             olderPage[:len(olderPage)/2],
		"trailing garbage":      olderPage + `x`,
		"top-level array":       `[]`,
		"data missing":          `{"meta":{"pagination":` + okPag + `}}`,
		"data null":             env(`null`, okPag),
		"data object":           env(`{}`, okPag),
		"meta missing":          `{"data":[]}`,
		"no created_at":         env(`[{"fields":{}}]`, okPag),
		"created_at null":       env(`[{"created_at":null}]`, okPag),
		"created_at number":     env(`[{"created_at":1700000000}]`, okPag),
		"created_at garbage":    env(`[{"created_at":"last tuesday"}]`, okPag),
		"fields array":          env(`[{"created_at":"2026-01-01T00:00:00Z","fields":["x"]}]`, okPag),
		"data array":            env(`[{"created_at":"2026-01-01T00:00:00Z","data":[{}]}]`, okPag),
		"fields string":         env(`[{"created_at":"2026-01-01T00:00:00Z","fields":"x"}]`, okPag),
		"files string":          env(`[{"created_at":"2026-01-01T00:00:00Z","files":"x"}]`, okPag),
		"data string":           env(`[{"created_at":"2026-01-01T00:00:00Z","data":"x"}]`, okPag),
		"id float in string":    env(`[{"id":"1.5","created_at":"2026-01-01T00:00:00Z"}]`, okPag),
		"id signed in string":   env(`[{"id":"+15","created_at":"2026-01-01T00:00:00Z"}]`, okPag),
		"is_spam 2":             env(`[{"is_spam":2,"created_at":"2026-01-01T00:00:00Z"}]`, okPag),
		"links array not empty": env(`[]`, `{"total":0,"per_page":25,"current_page":1,"links":["x"]}`),
		"id float":              env(`[{"id":1.5,"created_at":"2026-01-01T00:00:00Z"}]`, okPag),
		"id string":             env(`[{"id":"x","created_at":"2026-01-01T00:00:00Z"}]`, okPag),
		"is_spam string":        env(`[{"is_spam":"no","created_at":"2026-01-01T00:00:00Z"}]`, okPag),
		"submission not object": env(`[1]`, okPag),
		"negative total":        env(`[]`, `{"total":-1,"count":0,"per_page":25,"current_page":1}`),
		"negative per_page":     env(`[]`, `{"total":0,"count":0,"per_page":-25,"current_page":1}`),
		"zero per_page":         env(`[]`, `{"total":0,"count":0,"per_page":0,"current_page":1}`),
		"negative current_page": env(`[]`, `{"total":0,"count":0,"per_page":25,"current_page":-1}`),
		"negative total_pages":  env(`[]`, `{"total":0,"count":0,"per_page":25,"current_page":1,"total_pages":-1}`),
		"per_page missing":      env(`[]`, `{"total":0,"count":0,"current_page":1}`),
		"per_page float":        env(`[]`, `{"total":0,"count":0,"per_page":2.5,"current_page":1}`),
		"huge number":           env(`[]`, `{"total":1e400,"per_page":25,"current_page":1}`),
		"count not a number":    env(`[`+sub+`]`, `{"total":5,"count":"2","per_page":25,"current_page":1}`),
		"more than per_page":    env(`[`+sub+`,`+sub+`]`, `{"total":5,"count":2,"per_page":1,"current_page":1}`),
		"links next number":     env(`[]`, `{"total":0,"per_page":25,"current_page":1,"links":{"next":3}}`),
		"pagination not object": `{"data":[],"meta":{"pagination":3}}`,
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := decode("form-77", []byte(body))
			record(err)
			if err == nil {
				t.Fatalf("decoded %+v, want error", p)
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindMalformed || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %#v, want *Error KindMalformed", err)
			}
			if !strings.Contains(err.Error(), `form "form-77"`) {
				t.Errorf("message does not name the form: %v", err)
			}
		})
	}
}

func TestDecodePageErrorNamesPage(t *testing.T) {
	t.Parallel()
	body := `{"data":[{"created_at":"bad"}],"meta":{"pagination":{"total":1,"count":1,"per_page":25,"current_page":4}}}`
	_, err := decode("f9", []byte(body))
	if err == nil || !strings.Contains(record(err).Error(), `form "f9" page 4`) {
		t.Fatalf("err = %v, want it to name form f9 page 4", err)
	}
}

// TestDecodePageShapeMessages: a member of the wrong JSON type is named in
// the message, with what it is instead.
func TestDecodePageShapeMessages(t *testing.T) {
	t.Parallel()
	pag := `{"total":1,"count":1,"per_page":25,"current_page":4}`
	for body, want := range map[string]string{
		`{"data":{},"meta":{"pagination":` + pag + `}}`:  "data is a JSON object, not an array",
		`{"data":"x","meta":{"pagination":` + pag + `}}`: "data is a JSON string, not an array",
		`{"data":[1],"meta":{"pagination":` + pag + `}}`: "data: a submission is a JSON number, not an object",
		`{"data":[],"meta":{"pagination":3}}`:            "meta.pagination is a JSON number, not an object",
		`{"data":[],"meta":[]}`:                          "meta is a JSON array, not an object",
	} {
		_, err := decode("f", []byte(body))
		if err == nil || !strings.Contains(record(err).Error(), want) {
			t.Errorf("%s: err = %v, want it to say %q", body, err, want)
		}
	}
}

// TestDecodeErrorsKeepValuesOut: a submission's values, or files, of the
// wrong shape are refused by naming the shape, not by quoting what was
// typed into the form: the error reaches the logs.
func TestDecodeErrorsKeepValuesOut(t *testing.T) {
	t.Parallel()
	pag := `{"total":1,"count":1,"per_page":25,"current_page":1}`
	sub := `{"created_at":"2026-01-01T00:00:00Z",`
	for body, want := range map[string]string{
		`{"data":[` + sub + `"fields":["alice@example.com"]}],"meta":{"pagination":` + pag + `}}`:  "fields: a JSON array, not an object",
		`{"data":[` + sub + `"data":"alice@example.com"}],"meta":{"pagination":` + pag + `}}`:      "data: a JSON string, not an object",
		`{"data":[` + sub + `"files":"alice@example.com.pdf"}],"meta":{"pagination":` + pag + `}}`: "files: a JSON string, not an array or an object",
	} {
		_, err := decode("f", []byte(body))
		if err == nil || !strings.Contains(record(err).Error(), want) || strings.Contains(err.Error(), "alice") {
			t.Errorf("%s: err = %v, want it to say %q and not quote the value", body, err, want)
		}
	}
}

// decode decodes body as a page that was not asked for by number, so only
// the body names the page.
func decode(formID string, body []byte) (*Page, error) { return decodePage(formID, 0, body) }
