package formsapi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/formsync/formsync/internal/jsonscan"
)

// checkScan holds scanPage to encoding/json: what it accepts decodes to the
// same wirePage, and decodePage says what decodePageStd says, page or
// error, whichever path it took.
func checkScan(t *testing.T, body []byte, asked int) (accepted bool) {
	t.Helper()
	var fast wirePage
	var subs []wireSubmission
	accepted = scanPage(body, &fast, &subs)
	if accepted {
		var std wirePage
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatalf("%q: scanned, but encoding/json says %v", body, err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q: scanned as\n%s\nencoding/json:\n%s", body, dumpWire(fast), dumpWire(std))
		}
	}
	got, gerr := decodePage("fz", asked, body)
	want, werr := decodePageStd("fz", asked, body)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: error %v, encoding/json's path %v", body, gerr, werr)
	}
	if gerr != nil {
		var g, w *Error
		if !errors.As(gerr, &g) || !errors.As(werr, &w) || g.Kind != w.Kind || gerr.Error() != werr.Error() {
			t.Fatalf("%q: error %#v\nencoding/json's path %#v", body, gerr, werr)
		}
		return accepted
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: page %+v\nencoding/json's path %+v", body, got, want)
	}
	return accepted
}

func dumpWire(w wirePage) string {
	var b strings.Builder
	if w.Meta == nil {
		b.WriteString("meta: nil\n")
	} else if pg := w.Meta.Pagination; pg == nil {
		b.WriteString("pagination: nil\n")
	} else {
		for _, m := range []json.RawMessage{pg.Total, pg.Count, pg.PerPage, pg.CurrentPage, pg.TotalPages, pg.Links} {
			b.WriteString(string(m) + " ")
		}
		b.WriteString("\n")
	}
	if w.Data == nil {
		b.WriteString("data: nil\n")
		return b.String()
	}
	for _, s := range *w.Data {
		for _, m := range [][]byte{s.raw, s.ID, s.Fields, s.Data, s.Files, s.IsSpam, s.CreatedAt} {
			b.WriteString(string(m) + " | ")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The pages the services send are read in one pass.
func TestScanPageAcceptsPages(t *testing.T) {
	for _, body := range []string{olderPage, newerPage, liveExample,
		`{"data":[],"meta":{"pagination":{"total":0,"per_page":25,"current_page":1,"links":[]}}}`,
		` {"meta":null, "x":[1,-2.5e+3,true,false,null,{"y":"\u00e9\n\"\\\/"}], "data":null} `,
		"{\"data\":[{\"created_at\":\"2026-01-01T00:00:00Z\",\"fields\":{\"x\":\"\xff\xfe\",\"\u2028\":0}}],\"meta\":{\"pagination\":{\"total\":1,\"per_page\":25,\"current_page\":1}}}",
		`{"data":[{"created_at":"2026-01-01T00:00:00Z","id":1,"id":2,"extra":{"Data":1}}],"meta":{"pagination":{"total":1,"total":2,"per_page":25,"current_page":1}}}`,
	} {
		if !checkScan(t, []byte(body), 0) {
			t.Errorf("%s: not scanned", body)
		}
	}
}

// What encoding/json would decode otherwise than the scanner, or refuse,
// is left to it.
func TestScanPageDeclines(t *testing.T) {
	pag := `"meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}`
	sub := `{"created_at":"2026-01-01T00:00:00Z","fields":{"a":1}}`
	for _, body := range []string{
		``, ` `, `null`, `[]`, `"x"`, `{`, `{}x`, `{} {}`, `{"data":[],` + pag + `,}`,
		`{"data":{},` + pag + `}`, `{"data":[1],` + pag + `}`, `{"data":[null],` + pag + `}`, `{"data":[` + sub + `,null],` + pag + `}`,
		`{"meta":3}`, `{"meta":{"pagination":[]}}`,
		// Names encoding/json matches without regard to case.
		`{"DATA":[` + sub + `],` + pag + `}`, `{"data":[],"Meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}}`,
		`{"data":[],"meta":{"Pagination":{"total":1,"per_page":25,"current_page":1}}}`,
		`{"data":[],"meta":{"pagination":{"TOTAL":1,"per_page":25,"current_page":1}}}`,
		`{"data":[{"created_at":"2026-01-01T00:00:00Z","Fields":{"a":1}}],` + pag + `}`,
		`{"data":[{"created_at":"2026-01-01T00:00:00Z","fields":{"a":1},"is_ſpam":true}],` + pag + `}`,
		`{"data":[],"meta":{"pagination":{"total":1,"per_page":25,"current_page":1,"lin` + "\u212a" + `s":{"next":"x"}}}}`,
		`{"d\u0061ta":[` + sub + `],` + pag + `}`,
		// encoding/json merges a pointer member given twice.
		`{"data":[` + sub + `],"data":[null],` + pag + `}`,
		`{"data":[],"meta":{"pagination":{"total":1}},"meta":{"pagination":{"per_page":25,"current_page":1}}}`,
		`{"data":[],"meta":{"pagination":{"total":1},"pagination":{"per_page":25,"current_page":1}}}`,
		// Grammar.
		`{"data":[],` + pag + `,"x":01}`, `{"data":[],` + pag + `,"x":1.}`, `{"data":[],` + pag + `,"x":-}`,
		`{"data":[],` + pag + `,"x":1e}`, `{"data":[],` + pag + `,"x":.5}`, `{"data":[],` + pag + `,"x":+1}`,
		`{"data":[],` + pag + `,"x":tru}`, `{"data":[],` + pag + `,"x":nulls}`, `{"data":[],` + pag + `,"x":[1,]}`,
		`{"data":[],` + pag + `,"x":[1 2]}`, `{"data":[],` + pag + `,"x":"\x"}`, `{"data":[],` + pag + `,"x":"\u12g4"}`,
		"{\"data\":[]," + pag + ",\"x\":\"\t\"}", `{"data":[],` + pag + `,"x":{"a"}}`, `{"data":[],` + pag + `,"x":{1:2}}`,
		`{"data":[],` + pag + `,"x":"abc}`, `{"data":[],` + pag + `,"x":"abc\`,
	} {
		if checkScan(t, []byte(body), 0) {
			t.Errorf("%q: scanned", body)
		}
	}
}

// Nesting is accepted as deep as encoding/json accepts it, no deeper.
func TestScanPageNesting(t *testing.T) {
	page := func(levels int) []byte {
		// The envelope and the data array are two levels, the submission
		// a third.
		v := strings.Repeat(`[`, levels-3) + strings.Repeat(`]`, levels-3)
		return []byte(`{"data":[{"created_at":"2026-01-01T00:00:00Z","x":` + v + `}],"meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}}`)
	}
	if !checkScan(t, page(jsonscan.MaxDepth), 0) {
		t.Errorf("%d levels not scanned", jsonscan.MaxDepth)
	}
	if checkScan(t, page(jsonscan.MaxDepth+1), 0) {
		t.Errorf("%d levels scanned", jsonscan.MaxDepth+1)
	}
}

// No member name beyond ASCII folds to an ASCII letter but the Kelvin sign
// and the long s, which foldable covers by declining every name beyond
// ASCII: the reason it can pass a lower-case ASCII name that is not a
// field's as unknown.
func TestOnlyTwoRunesFoldToASCII(t *testing.T) {
	for r := rune(0x80); r <= 0x10FFFF; r++ {
		for f := r; ; {
			if f = unicode.SimpleFold(f); f == r {
				break
			}
			if f < 0x80 && r != '\u212a' && r != '\u017f' {
				t.Errorf("%U folds to %q", r, f)
			}
		}
	}
}

// FuzzScanPage holds the one-pass reader to encoding/json's decoding of the
// same body, page or error.
//
//	go test ./worker/formsapi -run '^$' -fuzz FuzzScanPage -fuzztime 60s
func FuzzScanPage(f *testing.F) {
	for _, seed := range []string{
		olderPage, newerPage, liveExample, olderPage[:len(olderPage)/2],
		`{"data":[{"created_at":"2026-01-01T00:00:00Z","fields":{"a":1},"Files":[]}],"meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}}`,
		`{"data":[{"created_at":"2026-01-01T00:00:00Z"}],"data":[null],"meta":{"pagination":{"total":1,"per_page":25,"current_page":1}}}`,
		"{\"data\":[{\"created_at\":\"2026-01-01T00:00:00Z\",\"fields\":{\"x\":\"\xff\xfe\"}}],\"meta\":{\"pagination\":{\"total\":1,\"per_page\":25,\"current_page\":1}}}",
		`{"data":[],"meta":{"pagination":{"total":30,"per_page":10,"current_page":1,"total_pages":0}}}`,
		`null`, ``, `[]`, `{}`, `{"data":null}`,
	} {
		f.Add([]byte(seed), 0)
	}
	f.Add([]byte(newerPage), 1)
	f.Add([]byte(newerPage), 2)
	f.Fuzz(func(t *testing.T, body []byte, asked int) {
		checkScan(t, body, asked)
	})
}
