package apisim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// wireFile is one entry of a served files array.
type wireFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Type string `json:"type"`
	URL  string `json:"url"`
}

func servedFiles(t *testing.T, p wirePage) []wireFile {
	t.Helper()
	var out []wireFile
	for _, d := range p.Data {
		var fs []wireFile
		if err := json.Unmarshal(d.Files, &fs); err != nil {
			t.Fatalf("files %s: %v", d.Files, err)
		}
		out = append(out, fs...)
	}
	return out
}

// noRedirect is a client that returns a redirect as it is.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func fetch(t *testing.T, c *http.Client, u, auth string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp, body
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Every file a page names is served by the server the page came from,
// with the entry's type and size and bytes a test computes alone; file
// requests count apart from the API's, with the token each carried.
func TestFilesServedByTheSimulator(t *testing.T) {
	t.Parallel()
	const seed = 3
	b := setup(t, Options{Seed: seed, Variant: Newer, Forms: []string{"contact"}, SubmissionsPerForm: 20,
		Files: FileOptions{Every: 1, PerSubmission: 2}})
	p := b.page(t, "contact", 1, 20)
	files := servedFiles(t, p)
	if len(files) != 40 {
		t.Fatalf("%d files on a page of 20 submissions with two each", len(files))
	}
	st := b.sim.Stats()
	var bytesWant int64
	for i, f := range files {
		if !strings.HasPrefix(f.URL, b.base+FilesPath+"contact/") {
			t.Fatalf("file URL %s: want it on %s", f.URL, b.base)
		}
		if f.Size < 1024 || f.Size >= 8<<10 {
			t.Errorf("%s declares %d bytes, want 1 to 8 KiB", f.Name, f.Size)
		}
		auth := ""
		if i%2 == 0 {
			auth = "Bearer " + DefaultToken
		}
		resp, body := fetch(t, http.DefaultClient, f.URL, auth)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != f.Type || int64(len(body)) != f.Size {
			t.Fatalf("GET %s: %d %q %d bytes; want 200 %q %d", f.URL, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), f.Type, f.Size)
		}
		id := *p.Data[i/2].ID
		if want := FileBytes(seed, "contact", id, i%2+1, f.Size); !bytes.Equal(body, want) {
			t.Fatalf("GET %s: the bytes are not FileBytes(%d, contact, %d, %d, %d)", f.URL, seed, id, i%2+1, f.Size)
		}
		bytesWant += f.Size
	}
	got := b.sim.Stats()
	if got.Requests != st.Requests || got.FileRequests != 40 || got.FileBytes != bytesWant || got.FileByStatus[200] != 40 {
		t.Errorf("stats: %d requests (%d before), %d file requests, %d bytes, by status %v; want the API's unchanged, 40, %d, 40 200s",
			got.Requests, st.Requests, got.FileRequests, got.FileBytes, got.FileByStatus, bytesWant)
	}
	log := b.sim.FileRequests()
	if len(log) != 40 {
		t.Fatalf("%d file requests logged", len(log))
	}
	for i, r := range log {
		want := ""
		if i%2 == 0 {
			want = "Bearer " + DefaultToken
		}
		if r.Method != http.MethodGet || r.Status != 200 || r.Authorization != want || !strings.HasSuffix(files[i].URL, r.Path) {
			t.Errorf("logged %+v for %s, want GET 200 with Authorization %q", r, files[i].URL, want)
		}
	}

	// Files tells the same, for every live submission.
	all := b.sim.Files("contact")
	if len(all) != 40 {
		t.Fatalf("Files: %d", len(all))
	}
	for _, f := range all {
		if i := slices.IndexFunc(files, func(w wireFile) bool { return w.URL == f.URL }); i < 0 ||
			files[i].Name != f.Name || files[i].Size != f.Size || f.Served != f.Size || f.Fault != FileOK ||
			f.SHA256 != sum(FileBytes(seed, "contact", f.ID, f.Position, f.Size)) {
			t.Fatalf("Files gave %+v", f)
		}
	}

	b.sim.ResetStats()
	if st := b.sim.Stats(); st.FileRequests != 0 || st.FileBytes != 0 || len(b.sim.FileRequests()) != 0 {
		t.Errorf("after ResetStats: %+v, %d logged", st, len(b.sim.FileRequests()))
	}
}

// The URLs name the listener the first request came to, whatever Host
// header it carried, and keep naming it.
func TestFilesOriginIsTheListener(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Variant: Newer, Forms: []string{"contact"}, SubmissionsPerForm: 5, Files: FileOptions{Every: 1, PerSubmission: 1}})
	before := b.sim.Submissions("contact")
	if !strings.Contains(string(before[0].Files), `"url":"http://127.0.0.1:0/files/`) {
		t.Fatalf("before any request: %s, want the fallback origin", before[0].Files)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.base+"/api/forms/contact/submissions", nil)
	req.Host = "files.example.com"
	req.Header.Set("Authorization", "Bearer "+DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "example.com/") || !strings.Contains(string(body), b.base+FilesPath) {
		t.Fatalf("page names %.300s; want the listener %s", body, b.base)
	}
	if got := b.sim.FilesOrigin(); got != b.base {
		t.Errorf("FilesOrigin %s, want %s", got, b.base)
	}
	// A second listener of the same server changes nothing.
	other := httptest.NewServer(b.sim)
	defer other.Close()
	p := bundle{sim: b.sim, base: other.URL}.page(t, "contact", 1, 5)
	if fs := servedFiles(t, p); !strings.HasPrefix(fs[0].URL, b.base+FilesPath) {
		t.Errorf("through another listener: %s, want the first one's", fs[0].URL)
	}
	if err := b.sim.SetFilesOrigin("http://files.example.com:80"); err == nil {
		t.Error("SetFilesOrigin took a host that is not loopback")
	}
	if err := b.sim.SetFilesOrigin(other.URL); err != nil || !strings.HasPrefix(servedFiles(t, bundle{b.sim, other.URL}.page(t, "contact", 1, 5))[0].URL, other.URL+FilesPath) {
		t.Errorf("SetFilesOrigin(%s): %v", other.URL, err)
	}
}

func TestFilesOriginOption(t *testing.T) {
	t.Parallel()
	sim := New(Options{Forms: []string{"a"}, SubmissionsPerForm: 2, Files: FileOptions{Every: 1, Origin: "http://[::1]:9"}})
	if s := sim.Submissions("a"); !strings.Contains(string(s[0].Files), `"url":"http://[::1]:9/files/a/`) {
		t.Errorf("files %s, want the origin given", s[0].Files)
	}
	for _, bad := range []string{"https://127.0.0.1:9", "http://10.0.0.1:9", "http://127.0.0.1", "http://127.0.0.1:9/x", "http://localhost.example.com:9"} {
		if CheckFilesOrigin(bad) == nil {
			t.Errorf("CheckFilesOrigin(%q) accepted it", bad)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New took a files origin that is not loopback")
		}
	}()
	New(Options{Files: FileOptions{Origin: "http://files.example.com:80"}})
}

// Each fault, set explicitly, answers as documented, and Files says what
// a GET gets.
func TestFileFaults(t *testing.T) {
	t.Parallel()
	const seed = 5
	b := setup(t, Options{Seed: seed, Variant: Newer, Forms: []string{"f"}, SubmissionsPerForm: 10,
		Files: FileOptions{Every: 1, PerSubmission: 1, Size: 3000, LargeSize: 9000, SlowFor: time.Hour}})
	subs := b.sim.Submissions("f")
	faults := []FileFault{FileOK, FileNotFound, FileGone, FileSlow, FileTooLarge, FileRedirect, FileShort, FileLong}
	for i, f := range faults {
		b.sim.SetFileFault(FileRef{"f", subs[i].ID, 1}, f)
	}
	b.page(t, "f", 1, 10) // learns the origin
	files := b.sim.Files("f")
	for i, want := range faults {
		f := files[i]
		if f.Fault != want || f.ID != subs[i].ID {
			t.Fatalf("file %d: %+v, want fault %v", i, f, want)
		}
		wantSize, wantServed := int64(3000), int64(3000)
		switch want {
		case FileNotFound, FileGone:
			wantServed = 0
		case FileTooLarge:
			wantSize, wantServed = 9000, 9000
		case FileShort:
			wantServed = 1500
		case FileLong:
			wantServed = 6000
		}
		if f.Size != wantSize || f.Served != wantServed {
			t.Fatalf("%v: declared %d served %d, want %d %d", want, f.Size, f.Served, wantSize, wantServed)
		}
		if want == FileSlow {
			ctx, cancel := context.WithCancel(t.Context())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			// The headers come at once; the body waits (an hour).
			if resp.StatusCode != 200 || resp.ContentLength != 3000 {
				t.Fatalf("slow: %d, length %d", resp.StatusCode, resp.ContentLength)
			}
			cancel()
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Fatal("slow: the body came whole before the client gave up")
			}
			resp.Body.Close()
			continue
		}
		resp, body := fetch(t, noRedirect, f.URL, "")
		switch want {
		case FileNotFound, FileGone:
			if code := map[FileFault]int{FileNotFound: 404, FileGone: 410}[want]; resp.StatusCode != code {
				t.Errorf("%v: %d, want %d", want, resp.StatusCode, code)
			}
			continue
		case FileRedirect:
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, FilesPath+"moved/f/") {
				t.Fatalf("redirect: %d to %q", resp.StatusCode, loc)
			}
			resp, body = fetch(t, http.DefaultClient, f.URL, "")
			if resp.Request.URL.Path != loc {
				t.Errorf("redirect: the client ended at %s, want %s", resp.Request.URL, loc)
			}
		}
		if resp.StatusCode != 200 || int64(len(body)) != wantServed || sum(body) != f.SHA256 ||
			!bytes.Equal(body, FileBytes(seed, "f", f.ID, 1, wantServed)) {
			t.Errorf("%v: %d, %d bytes, sha256 %s; want 200, %d bytes, %s", want, resp.StatusCode, len(body), sum(body), wantServed, f.SHA256)
		}
	}
	var entry []wireFile
	json.Unmarshal(b.sim.Submissions("f")[4].Files, &entry)
	if entry[0].Size != 9000 {
		t.Errorf("too large: the entry declares %d, want 9000", entry[0].Size)
	}
	st := b.sim.Stats()
	if st.FileByStatus[404] != 1 || st.FileByStatus[410] != 1 || st.FileByStatus[302] != 2 {
		t.Errorf("file statuses %v", st.FileByStatus)
	}
}

// Shares of faults fall on files deterministically from the seed.
func TestFileFaultShares(t *testing.T) {
	t.Parallel()
	opts := Options{Seed: 8, Forms: []string{"f"}, SubmissionsPerForm: 1000, Files: FileOptions{
		Every: 1, PerSubmission: 3, Expired: 0.1, Slow: 0.05, TooLarge: 0.05, Redirect: 0.1, SizeMismatch: 0.1,
		// Files hashes every file's bytes: 150 files of the default 5 MiB
		// took 9 s (a minute and a half under -race).
		LargeSize: 64 << 10}}
	files := New(opts).Files("f")
	if len(files) != 3000 {
		t.Fatalf("%d files", len(files))
	}
	count := map[FileFault]int{}
	for _, f := range files {
		count[f.Fault]++
	}
	for f, share := range map[FileFault]float64{FileOK: 0.6, FileNotFound: 0.05, FileGone: 0.05, FileSlow: 0.05,
		FileTooLarge: 0.05, FileRedirect: 0.1, FileShort: 0.05, FileLong: 0.05} {
		if n := float64(count[f]) / 3000; n < share*0.6 || n > share*1.4 {
			t.Errorf("%v: %d of 3000, want about %.0f", f, count[f], share*3000)
		}
	}
	if again := New(opts).Files("f"); !slices.Equal(files, again) {
		t.Error("two servers with the same options fault other files")
	}
	opts.Seed = 9
	if other := New(opts).Files("f"); slices.Equal(files, other) {
		t.Error("another seed faults the same files")
	}
}

// FileOptions change the files alone: fields, and which submissions carry
// files by default, stay as they were.
func TestFileOptionsChangeOnlyFiles(t *testing.T) {
	t.Parallel()
	base := New(Options{Seed: 4, SubmissionsPerForm: 300})
	for _, fo := range []FileOptions{{Every: 1, PerSubmission: 3, Size: 50 << 10}, {Every: NoFiles}, {Every: 7}, {Expired: 1}} {
		sim := New(Options{Seed: 4, SubmissionsPerForm: 300, Files: fo})
		for _, form := range sim.FormIDs() {
			a, b := base.Submissions(form), sim.Submissions(form)
			for i := range a {
				if !bytes.Equal(a[i].Fields, b[i].Fields) || a[i].ID != b[i].ID || !a[i].CreatedAt.Equal(b[i].CreatedAt) {
					t.Fatalf("%+v: submission %d changed beyond its files", fo, i)
				}
				var files []wireFile
				json.Unmarshal(b[i].Files, &files)
				switch {
				case fo.Every == NoFiles && len(files) != 0,
					fo.Every == 1 && (len(files) != 3 || files[2].Size != 50<<10),
					fo.Every == 7 && (len(files) > 0) != (b[i].ID%7 == 0),
					fo.Every == 0 && (len(files) > 0) != (string(a[i].Files) != "[]"):
					t.Fatalf("%+v: submission %d files %s", fo, b[i].ID, b[i].Files)
				}
			}
		}
	}
}

// Only the files of a generated submission of the form are served: those
// of a deleted one too, none of SetSubmissions' or of another form.
func TestFilesNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Variant: Newer, Forms: []string{"a", "b"}, SubmissionsPerForm: 5, Files: FileOptions{Every: 1, PerSubmission: 1}})
	b.page(t, "a", 1, 5)
	files := b.sim.Files("a")
	gone := b.sim.Delete("a", 1)[0]
	for _, f := range files {
		resp, _ := fetch(t, http.DefaultClient, f.URL, "")
		if resp.StatusCode != 200 {
			t.Errorf("%s (deleted: %v): %d", f.URL, f.ID == gone.ID, resp.StatusCode)
		}
	}
	b.sim.SetSubmissions("c", Submission{ID: 1, CreatedAt: time.Now(), Fields: json.RawMessage(`{}`),
		Files: json.RawMessage(`[{"name":"x.pdf","url":"` + b.base + `/files/c/1/x.pdf"}]`)})
	u := files[0].URL
	for _, path := range []string{
		strings.Replace(u, "/files/a/", "/files/b/", 1), // another form's
		strings.Replace(u, "-1.", "-2.", 1),             // a position it has not
		strings.Replace(u, "/files/a/", "/files/nope/", 1),
		b.base + "/files/c/1/x.pdf",
		b.base + "/files/a/0" + u[strings.LastIndex(u, "/files/a/")+len("/files/a/"):], // the id with a leading zero
	} {
		if resp, _ := fetch(t, http.DefaultClient, path, ""); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
	if st := b.sim.Stats(); st.FileByStatus[404] != 5 {
		t.Errorf("file statuses %v", st.FileByStatus)
	}
}

// Accounts serve each account's files at the one address, and count a
// file fetched with another account's token as a crossing.
func TestAccountsServeFiles(t *testing.T) {
	t.Parallel()
	acc := NewAccounts(map[string]Options{
		"acme":   {Token: "t-acme", Forms: []string{"a1"}, Variant: Newer, SubmissionsPerForm: 3, Files: FileOptions{Every: 1, PerSubmission: 1}},
		"globex": {Token: "t-globex", Forms: []string{"g1"}, Variant: Newer, SubmissionsPerForm: 3, Files: FileOptions{Every: 1, PerSubmission: 1}},
	})
	ts := httptest.NewServer(acc)
	defer ts.Close()
	fetch(t, http.DefaultClient, ts.URL+"/api/forms/a1/submissions", "Bearer t-acme")
	for _, name := range []string{"acme", "globex"} {
		if got := acc.Server(name).FilesOrigin(); got != ts.URL {
			t.Fatalf("%s files origin %s, want %s", name, got, ts.URL)
		}
	}
	g := acc.Server("globex").Files("g1")[0]
	if resp, body := fetch(t, http.DefaultClient, g.URL, "Bearer t-acme"); resp.StatusCode != 200 || sum(body) != g.SHA256 {
		t.Fatalf("GET %s: %d", g.URL, resp.StatusCode)
	}
	if c := acc.Crossed(); len(c) != 1 || c[0] != (Crossing{FormID: "g1", FormAccount: "globex", TokenAccount: "acme"}) {
		t.Errorf("crossed %+v", c)
	}
	if st := acc.Server("globex").Stats(); st.FileRequests != 1 || st.Requests != 0 {
		t.Errorf("globex stats %+v", st)
	}
}

func TestFileBytes(t *testing.T) {
	t.Parallel()
	long := FileBytes(1, "contact", 1001, 1, 1000)
	if short := FileBytes(1, "contact", 1001, 1, 13); !bytes.Equal(short, long[:13]) {
		t.Error("a shorter file is not a prefix of a longer one")
	}
	for _, other := range [][]byte{FileBytes(2, "contact", 1001, 1, 1000), FileBytes(1, "signup", 1001, 1, 1000),
		FileBytes(1, "contact", 1002, 1, 1000), FileBytes(1, "contact", 1001, 2, 1000)} {
		if bytes.Equal(other, long) {
			t.Error("two files have the same bytes")
		}
	}
	if len(FileBytes(1, "x", 1, 1, 0)) != 0 {
		t.Error("an empty file has bytes")
	}
}

// FileAt describes the file of any URL the server rendered, its
// submission deleted or not.
func TestFileAt(t *testing.T) {
	t.Parallel()
	sim := New(Options{Seed: 2, Forms: []string{"a"}, SubmissionsPerForm: 4, Files: FileOptions{Every: 1, PerSubmission: 2}})
	files := sim.Files("a")
	sim.Delete("a", 4)
	for _, f := range files {
		if got, ok := sim.FileAt(f.URL); !ok || got != f {
			t.Errorf("FileAt(%s) = %+v, %v; want %+v", f.URL, got, ok, f)
		}
	}
	for _, u := range []string{"http://127.0.0.1:1/files/a/1/x.pdf", "http://127.0.0.1:1/api/forms/a/submissions", "%"} {
		if f, ok := sim.FileAt(u); ok {
			t.Errorf("FileAt(%s) = %+v", u, f)
		}
	}
}

// BenchmarkServeFile serves one 50 KB file, as a copying benchmark's
// simulator does for each.
func BenchmarkServeFile(b *testing.B) {
	sim := New(Options{Forms: []string{"a"}, SubmissionsPerForm: 1000, Files: FileOptions{Every: 1, PerSubmission: 1, Size: 50_000}})
	f := sim.Files("a")[500]
	b.SetBytes(f.Size)
	for b.Loop() {
		w := httptest.NewRecorder()
		sim.ServeHTTP(w, httptest.NewRequest(http.MethodGet, f.URL, nil))
		if w.Code != 200 || w.Body.Len() != 50_000 {
			b.Fatalf("%d, %d bytes", w.Code, w.Body.Len())
		}
	}
}
