package files

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func str(s string) *string { return &s }
func i64(n int64) *int64   { return &n }

// TestEntries: the entries of every shape of files are the rows the
// submission_files views give (the cases of TestSubmissionFiles in
// sink/sqlite and sink/bigquery), in input order.
func TestEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, files string
		want        []Entry
	}{
		{
			name:  "array",
			files: `[{"name":"a.pdf","url":"https://x/a","size":1200,"type":"application/pdf"},{"name":"b.png","url":"https://x/b"}]`,
			want: []Entry{
				{Position: 0, Name: str("a.pdf"), URL: str("https://x/a"), Size: i64(1200), Type: str("application/pdf")},
				{Position: 1, Name: str("b.png"), URL: str("https://x/b")},
			},
		},
		{
			name:  "keyed by input, one file or an array of files",
			files: `{"photo":{"name":"p.jpg","url":"https://x/p","size":"12"},"docs":[{"name":"d1","url":"https://x/d1"},{"name":"d2","url":"https://x/d2","size":1.5}],"empty":[],"none":null}`,
			want: []Entry{
				{Input: str("docs"), Position: 0, Name: str("d1"), URL: str("https://x/d1")},
				{Input: str("docs"), Position: 1, Name: str("d2"), URL: str("https://x/d2")},
				{Input: str("photo"), Position: 0, Name: str("p.jpg"), URL: str("https://x/p"), Size: i64(12)},
			},
		},
		{
			name:  "odd input names, nested members ignored",
			files: `{"we\"ird: input":{"name":"w","url":"https://x/w"},"name":{"name":"n","url":"https://x/n","meta":{"url":"nested"}}}`,
			want: []Entry{
				{Input: str("name"), Position: 0, Name: str("n"), URL: str("https://x/n")},
				{Input: str(`we"ird: input`), Position: 0, Name: str("w"), URL: str("https://x/w")},
			},
		},
		{name: "empty array", files: `[]`},
		{name: "empty object", files: `{}`},
		{name: "null", files: `null`},
		{name: "nothing", files: ``},
		{
			name:  "not objects keep their place; members not scalars are nil",
			files: `["https://x/not-an-object",{"name":7,"url":{"href":"x"}}]`,
			want:  []Entry{{Position: 1, Name: str("7")}},
		},
		{
			name:  "sizes: integers only",
			files: `[{"size":"007"},{"size":"-0"},{"size":1e3},{"size":"5.0"},{"size":99999999999999999999},{"size":-3},{"size":true},{"size":" 5"}]`,
			want: []Entry{
				{Position: 0}, {Position: 1, Size: i64(0)}, {Position: 2}, {Position: 3},
				{Position: 4}, {Position: 5, Size: i64(-3)}, {Position: 6}, {Position: 7},
			},
		},
		{
			name:  "numbers and other scalars as text",
			files: `[{"name":1.50,"type":true,"url":null}]`,
			want:  []Entry{{Position: 0, Name: str("1.5")}},
		},
		{
			name:  "a key twice: the last value",
			files: `{"a":{"name":"first"},"a":{"name":"second"}}`,
			want:  []Entry{{Input: str("a"), Position: 0, Name: str("second")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Entries(json.RawMessage(tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Entries(%s) (-want +got):\n%s", tc.files, diff)
			}
		})
	}
}

func TestEntriesNotJSON(t *testing.T) {
	t.Parallel()
	for _, files := range []string{`[{"name":`, `{"a":}`, `nope`, `{"a":[1,}`} {
		if got, err := Entries(json.RawMessage(files)); err == nil {
			t.Errorf("Entries(%s) = %v, want an error", files, got)
		}
	}
}
