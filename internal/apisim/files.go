package apisim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/formsync/formsync/internal/loopback"
)

// NoFiles as FileOptions.Every makes no generated submission carry files.
const NoFiles = -1

// DefaultLargeSize is the size of a FileTooLarge file when
// FileOptions.LargeSize is 0: one byte over the service's 5 MB a file.
const DefaultLargeSize = 5<<20 + 1

// fileRequestLog bounds the requests FileRequests keeps.
const fileRequestLog = 100_000

// FilesPath is where the server serves the files its submissions name:
// FilesPath + {form}/{id}/{name}, id being the submission whose content
// names the file. A FileRedirect answers with a redirect to
// FilesPath + "moved/{form}/{id}/{name}", which serves the bytes.
const FilesPath = "/files/"

// FileOptions shape the files generated submissions carry and how the
// server serves them. The zero value keeps the simulator's long-standing
// content: about one submission in ten carries one or two files.
type FileOptions struct {
	// Every, when > 0, gives files to the submissions whose id is a
	// multiple of Every, and to no other (1: every submission). NoFiles
	// (any negative value) gives none. 0 keeps the default, about one in
	// ten drawn from the seed.
	Every int
	// PerSubmission is the number of files of a submission that carries
	// files, 1 to 3. 0 keeps the default, 1 or 2 drawn from the seed.
	PerSubmission int
	// Size, when > 0, is every file's declared and served size in bytes
	// (except a fault's). 0 keeps the default, drawn from 1 KiB to 8 KiB.
	Size int64
	// Origin is the scheme, host and port the file URLs name, e.g.
	// http://127.0.0.1:8080: http on a loopback host (New panics on
	// another). Empty (the default) means the address of the listener the
	// server's first request arrived on (never a Host header), which is
	// kept from then on (SetFilesOrigin changes it).
	Origin string
	// Expired, Slow, TooLarge, Redirect and SizeMismatch are the shares
	// of files (0 to 1, drawn per file from Seed, form, id and position,
	// at most one fault a file, in this order) served with that fault:
	// FileNotFound or FileGone (half each), FileSlow, FileTooLarge,
	// FileRedirect, FileShort or FileLong (half each). SetFileFault sets
	// one file's fault explicitly. The API's faults (RateLimit,
	// ServerErrors, Latency and the like) never apply to files.
	Expired, Slow, TooLarge, Redirect, SizeMismatch float64
	// SlowFor is how long a FileSlow body waits after the headers (or
	// until the request's context ends), in real time as Options.StallFor
	// does: Options.Now is a clock to read, not to wait on. Defaults to 30s.
	SlowFor time.Duration
	// LargeSize is the declared and served size of a FileTooLarge file.
	// Defaults to DefaultLargeSize.
	LargeSize int64
}

func (o FileOptions) withDefaults() FileOptions {
	if o.SlowFor <= 0 {
		o.SlowFor = 30 * time.Second
	}
	if o.LargeSize <= 0 {
		o.LargeSize = DefaultLargeSize
	}
	if o.PerSubmission > 3 {
		o.PerSubmission = 3
	}
	return o
}

// FileFault is how the server serves one file.
type FileFault int

const (
	FileOK       FileFault = iota // 200 with the declared bytes
	FileNotFound                  // 404: expired at the service
	FileGone                      // 410: expired at the service
	FileSlow                      // 200, the body after FileOptions.SlowFor
	FileTooLarge                  // declared and served at FileOptions.LargeSize
	FileRedirect                  // 302 to FilesPath+"moved/...", which serves the bytes
	FileShort                     // 200 with half the declared size
	FileLong                      // 200 with twice the declared size
)

func (f FileFault) String() string {
	switch f {
	case FileOK:
		return "ok"
	case FileNotFound:
		return "not-found"
	case FileGone:
		return "gone"
	case FileSlow:
		return "slow"
	case FileTooLarge:
		return "too-large"
	case FileRedirect:
		return "redirect"
	case FileShort:
		return "short"
	case FileLong:
		return "long"
	}
	return "FileFault(" + strconv.Itoa(int(f)) + ")"
}

// FileRef names one file of a generated submission: its form, the id of
// the submission whose content names it (a copy's files are its
// original's, AddCopy), and its position among the submission's files,
// from 1 (the N of attachment-ID-N.ext).
type FileRef struct {
	FormID   string
	ID       int64
	Position int
}

// File is one file a generated submission names, as the server serves it.
type File struct {
	FileRef
	Name, Type, URL string
	// Size is the size the submission's entry declares; Served the bytes
	// a GET answers with 200 (after the redirect of a FileRedirect), 0
	// for an expired file.
	Size, Served int64
	Fault        FileFault
	// SHA256 is the hex SHA-256 of the Served bytes; "" for an expired file.
	SHA256 string
}

// FileRequest is one request the server answered under FilesPath.
type FileRequest struct {
	Method, Path string
	// Authorization is the header the request carried ("" for none).
	Authorization string
	Status        int
}

// FileBytes returns the first size bytes of the file at position pos
// (from 1) of submission id of formID, for a server of Options.Seed seed:
// what a file of that size serves, so that a test can compute a file's
// SHA-256 without the server. A longer size extends a shorter one.
func FileBytes(seed int64, formID string, id int64, pos int, size int64) []byte {
	b := make([]byte, max(size, 0))
	m := fileStream(seed, formID, id, pos)
	m.fill(b)
	return b
}

func fileStream(seed int64, formID string, id int64, pos int) *mix {
	return &mix{s: uint64(seed)*0xa0761d6478bd642f ^ hashString(formID)*0xe7037ed1a0b428db ^
		uint64(id)*0x8ebc6af09c88c6e3 ^ uint64(pos)*0x589965cc75374cc3}
}

// fill writes the stream's next len(b) bytes; a stream filled in pieces
// of multiples of 8 bytes gives what one fill gives.
func (m *mix) fill(b []byte) {
	for len(b) >= 8 {
		v := m.next()
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		b = b[8:]
	}
	if len(b) > 0 {
		v := m.next()
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
	}
}

// fileSpec is what content needs to render a submission's files.
type fileSpec struct {
	opts   FileOptions
	seed   int64
	origin string
	// faults are the explicit faults (SetFileFault); read-only.
	faults map[FileRef]FileFault
}

// fileEntry is one generated file.
type fileEntry struct {
	pos             int
	name, typ, url  string
	declared, serve int64
	fault           FileFault
}

// faultOf is the fault of one file: SetFileFault's, else drawn.
func (fs *fileSpec) faultOf(ref FileRef) FileFault {
	if f, ok := fs.faults[ref]; ok {
		return f
	}
	o := &fs.opts
	if o.Expired+o.Slow+o.TooLarge+o.Redirect+o.SizeMismatch <= 0 {
		return FileOK
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d\x00%d", fs.seed, ref.FormID, ref.ID, ref.Position)
	m := mix{s: h.Sum64()}
	u := float64(m.next()>>11) / (1 << 53)
	half := m.next()&1 == 0
	for _, c := range []struct {
		share     float64
		even, odd FileFault
	}{
		{o.Expired, FileNotFound, FileGone},
		{o.Slow, FileSlow, FileSlow},
		{o.TooLarge, FileTooLarge, FileTooLarge},
		{o.Redirect, FileRedirect, FileRedirect},
		{o.SizeMismatch, FileShort, FileLong},
	} {
		if u < c.share {
			if half {
				return c.even
			}
			return c.odd
		}
		u -= c.share
	}
	return FileOK
}

// entry completes a drawn file: its URL, its sizes and its fault.
func (fs *fileSpec) entry(formID string, id int64, pos int, name, typ string, drawn int64) fileEntry {
	e := fileEntry{pos: pos, name: name, typ: typ, declared: drawn}
	if fs.opts.Size > 0 {
		e.declared = fs.opts.Size
	}
	e.fault = fs.faultOf(FileRef{formID, id, pos})
	e.serve = e.declared
	switch e.fault {
	case FileNotFound, FileGone:
		e.serve = 0
	case FileTooLarge:
		e.declared, e.serve = fs.opts.LargeSize, fs.opts.LargeSize
	case FileShort:
		e.serve = e.declared / 2
	case FileLong:
		e.serve = e.declared * 2
	}
	e.url = fs.origin + FilesPath + url.PathEscape(formID) + "/" + strconv.FormatInt(id, 10) + "/" + url.PathEscape(name)
	return e
}

// fallbackOrigin is the origin file URLs name before the server knows its
// listener (no request yet, or only requests served without one, as
// httptest.NewRecorder's): loopback, a port nothing listens on.
const fallbackOrigin = "http://127.0.0.1:0"

// CheckFilesOrigin reports whether origin may be FileOptions.Origin: http,
// a loopback host, a port, and nothing else.
func CheckFilesOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil {
		return fmt.Errorf("files origin %q: %w", origin, err)
	}
	if u.Scheme != "http" || !loopback.Host(u.Hostname()) || u.Port() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("files origin %q: want http://127.0.0.1:PORT (http, a loopback host, a port, no path)", origin)
	}
	return nil
}

// SetFilesOrigin makes the file URLs rendered from now on name origin
// (CheckFilesOrigin), e.g. an httptest.Server's URL. Content served before
// keeps the URLs it had: a client that stored it sees other content.
func (s *Server) SetFilesOrigin(origin string) error {
	if err := CheckFilesOrigin(origin); err != nil {
		return err
	}
	o := strings.TrimSuffix(origin, "/")
	s.origin.Store(&o)
	return nil
}

// FilesOrigin returns the origin the file URLs name now.
func (s *Server) FilesOrigin() string {
	if o := s.origin.Load(); o != nil {
		return *o
	}
	return fallbackOrigin
}

// learnOrigin keeps the address of the listener r arrived on as the files
// origin, if none is known yet and it is a loopback address.
func (s *Server) learnOrigin(r *http.Request) {
	if s.origin.Load() != nil {
		return
	}
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil || !loopback.Host(host) {
		return
	}
	o := "http://" + a.String()
	s.origin.CompareAndSwap(nil, &o)
}

// spec is the fileSpec content is rendered with now.
func (s *Server) spec() *fileSpec {
	return &fileSpec{opts: s.opts.Files, seed: s.opts.Seed, origin: s.FilesOrigin(), faults: *s.fileFaults.Load()}
}

// SetFileFault makes one file served with fault (FileOK: without one),
// whatever the shares of FileOptions draw. A FileTooLarge changes the
// size the submission's entry declares, hence its content: set it before
// the submission is served.
func (s *Server) SetFileFault(ref FileRef, fault FileFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[FileRef]FileFault, len(*s.fileFaults.Load())+1)
	for k, v := range *s.fileFaults.Load() {
		m[k] = v
	}
	m[ref] = fault
	s.fileFaults.Store(&m)
}

// Files returns the files of formID's live generated submissions (those
// SetSubmissions gave are not served), oldest submission first, each
// with the fault it is served with and the SHA-256 of its bytes. The
// Live response form leaves files out of its pages; they are served all
// the same.
func (s *Server) Files(formID string) []File {
	f, rs, custom := s.liveOf(formID)
	var out []File
	spec := s.spec()
	for _, r := range rs {
		if _, ok := custom[r.contentID()]; ok {
			continue
		}
		for _, e := range s.entries(f, r.contentID(), spec) {
			out = append(out, s.fileOf(f.id, r.contentID(), e))
		}
	}
	return out
}

func (s *Server) fileOf(formID string, id int64, e fileEntry) File {
	fl := File{FileRef: FileRef{formID, id, e.pos}, Name: e.name, Type: e.typ, URL: e.url,
		Size: e.declared, Served: e.serve, Fault: e.fault}
	if e.fault != FileNotFound && e.fault != FileGone {
		sum := sha256.New()
		m := fileStream(s.opts.Seed, formID, id, e.pos)
		buf := make([]byte, 32<<10)
		for left := e.serve; left > 0; {
			n := min(left, int64(len(buf)))
			m.fill(buf[:n])
			sum.Write(buf[:n])
			left -= n
		}
		fl.SHA256 = hex.EncodeToString(sum.Sum(nil))
	}
	return fl
}

// entries are the files of the generated submission id of f.
func (s *Server) entries(f *form, id int64, spec *fileSpec) []fileEntry {
	_, entries := generate(s.contentSeed(f, id), f.id, f.schema, id, spec)
	return entries
}

// FileRequests returns the requests answered under FilesPath since New or
// ResetStats, in order, with the Authorization header each carried (the
// first 100,000; Stats.FileRequests counts them all).
func (s *Server) FileRequests() []FileRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fileLog)
}

var errNoFile = errors.New("no such file")

// FileAt returns the file a URL of the server's files names, as Files
// describes it, whether its submission is live or deleted; false for a
// URL that names none. Only the URL's path is read, so a URL rendered
// with another origin (SetFilesOrigin) names the same file.
func (s *Server) FileAt(rawURL string) (File, bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return File{}, false
	}
	rest, ok := strings.CutPrefix(u.Path, FilesPath)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 {
		return File{}, false
	}
	id, e, err := s.lookupFile(parts[0], parts[1], parts[2])
	if err != nil {
		return File{}, false
	}
	return s.fileOf(parts[0], id, e), true
}

// lookupFile finds the file a path under FilesPath names: one of a
// generated submission of the form (live or deleted) whose content names
// it.
func (s *Server) lookupFile(formID, idText, name string) (int64, fileEntry, error) {
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || strconv.FormatInt(id, 10) != idText {
		return 0, fileEntry{}, errNoFile
	}
	s.mu.Lock()
	f := s.forms[formID]
	found := false
	if f != nil {
		if _, custom := f.custom[id]; !custom {
			has := func(r rec) bool { return r.contentID() == id }
			found = slices.ContainsFunc(f.live, has) || slices.ContainsFunc(f.gone, has)
		}
	}
	s.mu.Unlock()
	if !found {
		return 0, fileEntry{}, errNoFile
	}
	for _, e := range s.entries(f, id, s.spec()) {
		if e.name == name {
			return id, e, nil
		}
	}
	return 0, fileEntry{}, errNoFile
}

// serveFile answers GET or HEAD FilesPath{form}/{id}/{name} and, for the
// target of a FileRedirect, FilesPath moved/{form}/{id}/{name}. It takes
// no token and counts in Stats.FileRequests, never in Requests.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	formID, idText, name := r.PathValue("form"), r.PathValue("id"), r.PathValue("name")
	moved := strings.HasPrefix(r.URL.Path, FilesPath+"moved/")
	status, ctype := http.StatusOK, ""
	var body int64
	id, e, err := s.lookupFile(formID, idText, name)
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		status = http.StatusMethodNotAllowed
	case err != nil:
		status = http.StatusNotFound
	case e.fault == FileNotFound:
		status = http.StatusNotFound
	case e.fault == FileGone:
		status = http.StatusGone
	case e.fault == FileRedirect && !moved:
		status = http.StatusFound
	default:
		ctype, body = e.typ, e.serve
	}
	if r.Method == http.MethodHead {
		body = 0
	}
	s.mu.Lock()
	s.stats.FileRequests++
	s.stats.FileByStatus[status]++
	if status == http.StatusOK {
		s.stats.FileBytes += body
	}
	if len(s.fileLog) < fileRequestLog {
		s.fileLog = append(s.fileLog, FileRequest{Method: r.Method, Path: r.URL.EscapedPath(),
			Authorization: r.Header.Get("Authorization"), Status: status})
	}
	s.mu.Unlock()

	switch status {
	case http.StatusOK:
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", "GET, HEAD")
		writeBody(w, status, "text/plain; charset=utf-8", []byte("method not allowed\n"))
		return
	case http.StatusFound:
		w.Header().Set("Location", FilesPath+"moved/"+url.PathEscape(formID)+"/"+idText+"/"+url.PathEscape(name))
		writeBody(w, status, "text/plain; charset=utf-8", nil)
		return
	default:
		writeBody(w, status, "text/plain; charset=utf-8", []byte(http.StatusText(status)+"\n"))
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.FormatInt(e.serve, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if e.fault == FileSlow {
		http.NewResponseController(w).Flush()
		if !sleep(r.Context(), s.opts.Files.SlowFor) {
			return
		}
	}
	m := fileStream(s.opts.Seed, formID, id, e.pos)
	buf := make([]byte, min(e.serve, 32<<10))
	for left := e.serve; left > 0; {
		n := min(left, int64(len(buf)))
		m.fill(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			return
		}
		left -= n
	}
}
