package formsapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The pages in testdata/pages, of every response form, decode to the rows
// recorded in testdata/contentkeys.golden: content keys, canonical fields
// and files, and the raw submissions' hashes, byte for byte. A content key
// is what recognises a submission without an id across runs and versions.
//
//	go test ./worker/formsapi -run TestContentKeysGolden -update   # only to add pages
const (
	goldenPages    = "testdata/pages"
	goldenKeysFile = "testdata/contentkeys.golden"
	goldenOddsPage = `{"data":[` + goldenOddsSub1 + `,` + goldenOddsSub2 + `,` + goldenOddsSub3 + `],"meta":{"pagination":{"total":3,"count":3,"per_page":25,"current_page":1,"total_pages":1,"links":[]}}}`
	goldenOddsSub1 = "{\"fields\":{ \"z\" : \"\\u00e9\\u2028\\ud83d\\ude00\\ud83d \\/\\\"\" , \"a\":[1.50,-0,1e400,123456789012345678901234567890],\"a\":{\"y\":null,\"x\":true},\"\\u0065\":\"<&>\",\"\xff\":\"\xfe\" },\"files\":{\"cv\":{\"name\":\"a.pdf\",\"url\":\"https://x/a.pdf?a=1&b=2\"}},\"is_spam\":true,\"created_at\":\"2026-02-28T10:00:00.123456Z\"}"
	goldenOddsSub2 = `{"id":9007199254740993,"data":{"Name":"Zoë O'Brien","How did you hear about us?":"Twitter / X","rating":5,"msg":"Tab\tand\nnewline"},"created_at":"2026-02-28T09:00:00.999Z","extra":{"kept":[1,2]}}`
	goldenOddsSub3 = "{\n  \"created_at\": \"2026-02-28T08:00:00+02:00\",\n  \"fields\": {},\n  \"files\": [ {\"b\":1,\"a\":2} ],\n  \"is_spam\": 0\n}"
)

// writeGoldenPages renders pages of every response form from the
// simulator, and a page of odd submissions written by hand.
func writeGoldenPages(t *testing.T) {
	if err := os.MkdirAll(goldenPages, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range []apisim.Variant{apisim.Older, apisim.Newer, apisim.Live} {
		for _, form := range []string{"contact", "signup", "feedback"} {
			sim := apisim.New(apisim.Options{Seed: 11, Variant: v, Forms: []string{form}, SubmissionsPerForm: 60, TieEvery: 7})
			for page := 1; page <= 2; page++ {
				w := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/forms/%s/submissions?page=%d&limit=20", form, page), nil)
				req.Header.Set("Authorization", "Bearer "+sim.Token())
				sim.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					t.Fatalf("%s %s page %d: %d", v, form, page, w.Code)
				}
				name := fmt.Sprintf("%s-%s-%d.json", v, form, page)
				if err := os.WriteFile(filepath.Join(goldenPages, name), w.Body.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for name, body := range map[string]string{
		"odds.json": goldenOddsPage, "older.json": olderPage, "newer.json": newerPage, "live-example.json": liveExample,
	} {
		if err := os.WriteFile(filepath.Join(goldenPages, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goldenRows decodes every page in testdata/pages and describes the row
// each submission becomes, one line each.
func goldenRows(t *testing.T) (lines []string) {
	names, err := filepath.Glob(filepath.Join(goldenPages, "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no pages in %s: %v", goldenPages, err)
	}
	for _, name := range names {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := decodePage("golden", 0, body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, s := range p.Submissions {
			r, err := sink.NewRow("golden", s.ID, s.CreatedAt, s.IsSpam, s.Fields, s.Files)
			if err != nil {
				t.Fatalf("%s submission %d: %v", name, i, err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(r.Fields), &fields); err != nil {
				t.Fatalf("%s submission %d: stored fields: %v", name, i, err)
			}
			names := slices.Sorted(maps.Keys(fields))
			raw := sha256.Sum256(s.Raw)
			lines = append(lines, strings.Join([]string{
				filepath.Base(name), strconv.Itoa(i), r.SubmissionKey, r.ContentKey, r.CreatedAt.Format(sink.TimeLayout),
				strconv.FormatBool(r.IsSpam), strconv.Quote(r.Fields), strconv.Quote(r.Files),
				strconv.Quote(strings.Join(names, "\x00")), hex.EncodeToString(raw[:]),
			}, "\t"))
		}
	}
	return lines
}

func TestContentKeysGolden(t *testing.T) {
	if *update {
		writeGoldenPages(t)
		out := "# page\tindex\tsubmission key\tcontent key\tcreated_at\tis_spam\tfields\tfiles\tnames\tsha256(raw)\n" +
			strings.Join(goldenRows(t), "\n") + "\n"
		if err := os.WriteFile(goldenKeysFile, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenKeysFile)
	if err != nil {
		t.Fatal(err)
	}
	wantLines := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")[1:]
	got := goldenRows(t)
	if len(got) != len(wantLines) {
		t.Fatalf("%d rows, want %d", len(got), len(wantLines))
	}
	older := 0
	for i := range got {
		if got[i] != wantLines[i] {
			t.Errorf("row differs:\n got  %s\n want %s", got[i], wantLines[i])
		}
		if cols := strings.Split(got[i], "\t"); cols[2] == cols[3] {
			older++ // keyed by content
		}
	}
	if older == 0 || older == len(got) {
		t.Fatalf("%d of %d rows keyed by content: the corpus must hold both response forms", older, len(got))
	}
}
