package bqfake

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	bqv2 "google.golang.org/api/bigquery/v2"
	_ "modernc.org/sqlite" // the fake's tables live in an in-memory SQLite database
)

// Options tune a Server. The zero value is a working fake.
type Options struct {
	// PageRows is the most rows one page of query results carries when the
	// request does not ask for fewer. Default 10,000; set it low to make
	// clients page with pageToken.
	PageRows int
	// PendingPolls is how many jobs.get / getQueryResults calls report a
	// new job as still running before it is reported done (the work itself
	// is done at once). Default 0.
	PendingPolls int
	// Now is the clock used for job statistics and RowsPerSecond.
	// Default time.Now.
	Now func() time.Time
	// RowsPerSecond, when positive, is how fast a transaction script
	// reads: it runs (polls report it running, and it cancels the
	// transactions that overlap it) until the rows of the tables it reads
	// and does not change (a commit's staging table), divided by this,
	// have passed on Now, as a small reservation runs a large commit.
	// Default 0: at once (after PendingPolls).
	RowsPerSecond float64
	// AbortEarlier makes a conflict between two running transactions
	// (both update or delete rows of one table) cancel the one that
	// started first, when it finishes, as if mid-script ("Transaction is
	// aborted due to concurrent update against table p:d.t at [24:9]"),
	// and let the later one commit. By default the later one is cancelled
	// at once. BigQuery documents neither which one nor when.
	AbortEarlier bool
}

// Op names a place where a fault can be injected with FailNext.
type Op string

const (
	// OpUpload fails the next upload request (multipart, or the last
	// chunk of a resumable upload) with the given status before any job is
	// created.
	OpUpload Op = "upload"
	// OpUploadLost creates and runs the next uploaded load job, then
	// answers its upload request with the given status, as if the response
	// had been lost: a retry with the same job id gets 409 duplicate.
	OpUploadLost Op = "upload-lost"
	// OpLoadJob creates the next load job and ends it DONE with an
	// errorResult of the given reason; nothing is loaded.
	OpLoadJob Op = "load-job"
	// OpQuery answers the next query request (jobs.insert of a query or
	// jobs.query) with the given status and reason; nothing runs.
	OpQuery Op = "query"
	// OpScript fails the next multi-statement transaction after its first
	// DML statement: everything is rolled back and the job ends DONE with
	// an errorResult of the given reason.
	OpScript Op = "script"
	// OpScriptCommitted lets the next multi-statement transaction commit,
	// then ends its job DONE with an errorResult of the given reason, as
	// BigQuery does when a statement after COMMIT TRANSACTION fails: the
	// work is in, the job says it failed.
	OpScriptCommitted Op = "script-committed"
	// OpJobsGet answers the next jobs.get with the given status and reason.
	OpJobsGet Op = "jobs-get"
	// OpQueryResults answers the next jobs.getQueryResults with the given
	// status and reason: a job's results that cannot be read.
	OpQueryResults Op = "query-results"
	// OpQueryLost creates and starts the next query job inserted with
	// jobs.insert, then answers the request with the given status, as if
	// the response had been lost: a retried insert with the same job id
	// gets 409 duplicate.
	OpQueryLost Op = "query-lost"
	// OpConcurrent cancels the next transaction script as BigQuery does
	// when another transaction mutates the same table (the status and
	// reason given are ignored: the error is BigQuery's, reason
	// invalidQuery).
	OpConcurrent Op = "concurrent"
	// OpSerialize cancels the next transaction script the other way
	// BigQuery reports a conflict between concurrent mutating DML
	// statements on one table (its troubleshooting guide lists it as
	// "Could not serialize access to table due to concurrent update"):
	// "Could not serialize access to table p:d.t due to concurrent
	// update", reason invalidQuery. The status and reason given are
	// ignored; nothing is applied.
	OpSerialize Op = "serialize"
	// OpTableDelete answers the next tables.delete with the given status
	// and reason; the table stays.
	OpTableDelete Op = "table-delete"
)

type fault struct {
	status int
	reason string
}

// Stats counts what clients asked the fake to do.
type Stats struct {
	// LoadJobs and QueryJobs count jobs created (failed ones included, as
	// BigQuery's quotas do).
	LoadJobs, QueryJobs int
	// MultipartUploads and ResumableUploads count upload requests that
	// delivered a whole load job's data.
	MultipartUploads, ResumableUploads int
	// DML counts DML statements (each MERGE of a script counts once) per
	// table ("dataset.table"); DDL counts dataset and table creations
	// (datasets.insert, tables.insert, CREATE OR REPLACE VIEW) per
	// dataset or table.
	DML, DDL map[string]int
	// TableGets counts tables.get requests, per table ("dataset.table"),
	// those answered 404 included.
	TableGets map[string]int
	// Aborted counts transactions cancelled because another running
	// transaction mutated one of their tables.
	Aborted int
	// Cancelled counts jobs that jobs.cancel stopped while they ran.
	Cancelled int
	// MergePlan is SQLite's EXPLAIN QUERY PLAN of the last submissions
	// MERGE join, one step a line.
	MergePlan string
	// BytesProcessed is the sum of the query jobs' totalBytesProcessed
	// (the model in cost.go).
	BytesProcessed int64
	// MaxQueryRequest is the size in bytes of the largest query job
	// request (jobs.insert: the statement and its parameters), which
	// BigQuery bounds.
	MaxQueryRequest int
}

// Server is a BigQuery fake. New makes one that serves nothing by itself
// (serve its Handler); Start makes one listening on loopback for a test.
type Server struct {
	opts Options
	srv  *httptest.Server // nil unless made by Start

	mu       sync.Mutex
	db       *sql.DB
	datasets map[string]*bqv2.Dataset // "project.dataset"
	tables   map[string]*bqv2.Table   // "project.dataset.table"
	jobs     map[string]*job          // "project.jobID"
	running  map[string]*running      // transactions started, not finished
	uploads  map[string]*resumable
	faults   map[Op][]fault
	hooks    []func(kind string)
	stats    Stats
	seq      int
	// meter is what the statement being run has processed (cost.go),
	// nil between statements.
	meter *meter
	// dry, while a transaction is run at its start to learn what it
	// changes (snapshot.go), makes tx roll back and keep its inserts.
	dry *dryRun
	// viewReads is what a query of each view reads of its base table
	// (views.go).
	viewReads map[string]viewRead
}

// New makes an empty fake and opens no listener: serve Handler() where
// you want it, and Close the fake when done.
func New(opts Options) (*Server, error) {
	if opts.PageRows <= 0 {
		opts.PageRows = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("bqfake: opening its SQLite database: %w", err)
	}
	// One connection: an in-memory database (and its temp tables) lives
	// in the connection that made it.
	db.SetMaxOpenConns(1)
	// sql.Open connects lazily: make the connection now, so that a
	// failure is New's error rather than the first request's.
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("bqfake: opening its SQLite database: %w", err)
	}
	return &Server{
		opts:      opts,
		db:        db,
		datasets:  map[string]*bqv2.Dataset{},
		tables:    map[string]*bqv2.Table{},
		jobs:      map[string]*job{},
		running:   map[string]*running{},
		uploads:   map[string]*resumable{},
		faults:    map[Op][]fault{},
		viewReads: map[string]viewRead{},
		stats:     Stats{DML: map[string]int{}, DDL: map[string]int{}, TableGets: map[string]int{}},
	}, nil
}

// TB is the part of testing.TB that Start uses (the package does not
// import testing, so that cmd/bqfake does not link it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Start makes a fake served on a loopback port for the test tb, closed
// when the test ends; it fails the test if the fake cannot be made.
func Start(tb TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(s.Close)
	s.srv = httptest.NewServer(s.Handler())
	return s
}

// URL is the base URL of a fake made by Start, to give a client:
// option.WithEndpoint(URL()+"/bigquery/v2/"). A fake made by New has
// none: its URL is where its Handler is served.
func (s *Server) URL() string {
	if s.srv == nil {
		panic("bqfake: URL of a fake made by New, which serves nothing by itself (use Start, or the address you serve Handler() on)")
	}
	return s.srv.URL
}

// Close drops every table, after stopping the server if Start started
// one (waiting for the requests it is serving). Closing again does
// nothing.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
	s.db.Close()
}

// FailNext queues a fault for the next request at op. Faults at one op are
// used in the order queued.
func (s *Server) FailNext(op Op, status int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], fault{status: status, reason: reason})
}

// SetPendingPolls sets Options.PendingPolls for the jobs created from now
// on: how many polls each reports it running. 1<<30 makes a job that
// never finishes unless it is cancelled.
func (s *Server) SetPendingPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.PendingPolls = n
}

// Pending is how many faults queued at op have not fired yet.
func (s *Server) Pending(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.faults[op])
}

func (s *Server) takeFault(op Op) (fault, bool) {
	q := s.faults[op]
	if len(q) == 0 {
		return fault{}, false
	}
	s.faults[op] = q[1:]
	return q[0], true
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.DML = maps.Clone(s.stats.DML)
	out.DDL = maps.Clone(s.stats.DDL)
	out.TableGets = maps.Clone(s.stats.TableGets)
	return out
}

// JobRecord is what the fake keeps of a job's configuration.
type JobRecord struct {
	ID string
	// Kind is "query" or "load".
	Kind string
	// Query is a query job's SQL, and Params its parameters as the
	// request carried them (JSON): what BigQuery's job history shows.
	Query, Params string
	// Fast says that the job was made by jobs.query (the client's fast
	// path for a query without a job id), not jobs.insert or an upload.
	Fast bool
	// Timeout is the job's jobTimeoutMs; zero when it carried none.
	Timeout time.Duration
}

// Jobs lists every job created so far (jobs.insert, jobs.query and
// uploads), in creation order.
func (s *Server) Jobs() []JobRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := slices.SortedFunc(maps.Values(s.jobs), func(a, b *job) int { return a.seq - b.seq })
	out := make([]JobRecord, 0, len(js))
	for _, j := range js {
		r := JobRecord{ID: j.j.JobReference.JobId, Fast: j.fast}
		if c := j.j.Configuration; c != nil {
			r.Timeout = time.Duration(c.JobTimeoutMs) * time.Millisecond
			switch {
			case c.Query != nil:
				r.Kind, r.Query = "query", c.Query.Query
				if p, err := json.Marshal(c.Query.QueryParameters); err == nil {
					r.Params = string(p)
				}
			case c.Load != nil:
				r.Kind = "load"
			}
		}
		out = append(out, r)
	}
	return out
}

// ResetStats zeroes the counters.
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = Stats{DML: map[string]int{}, DDL: map[string]int{}, TableGets: map[string]int{}}
}

// Handler serves the BigQuery REST API v2 paths the Go client uses.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	const p = "/bigquery/v2/projects/{project}"
	mux.HandleFunc("POST "+p+"/datasets", s.lock(s.insertDataset))
	mux.HandleFunc("GET "+p+"/datasets/{dataset}", s.lock(s.getDataset))
	mux.HandleFunc("DELETE "+p+"/datasets/{dataset}", s.lock(s.deleteDataset))
	mux.HandleFunc("POST "+p+"/datasets/{dataset}/tables", s.lock(s.insertTable))
	mux.HandleFunc("GET "+p+"/datasets/{dataset}/tables", s.lock(s.listTables))
	mux.HandleFunc("GET "+p+"/datasets/{dataset}/tables/{table}", s.lock(s.getTable))
	mux.HandleFunc("DELETE "+p+"/datasets/{dataset}/tables/{table}", s.lock(s.deleteTable))
	mux.HandleFunc("PATCH "+p+"/datasets/{dataset}/tables/{table}", s.lock(s.patchTable))
	mux.HandleFunc("GET "+p+"/datasets/{dataset}/tables/{table}/data", s.lock(s.listTableData))
	mux.HandleFunc("POST "+p+"/jobs", s.lock(s.insertJob))
	mux.HandleFunc("GET "+p+"/jobs", s.lock(s.listJobs))
	mux.HandleFunc("GET "+p+"/jobs/{job}", s.lock(s.getJob))
	mux.HandleFunc("POST "+p+"/jobs/{job}/cancel", s.lock(s.cancelJob))
	mux.HandleFunc("POST "+p+"/queries", s.lock(s.runQuery))
	mux.HandleFunc("GET "+p+"/queries/{job}", s.lock(s.getQueryResults))
	mux.HandleFunc("POST /upload"+p+"/jobs", s.lock(s.upload))
	mux.HandleFunc("PUT /upload"+p+"/jobs", s.lock(s.upload))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, reason: "notFound", message: fmt.Sprintf("bqfake: unsupported request %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// The fake serialises every request: it is a test double, not a database.
func (s *Server) lock(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		err := h(w, r)
		s.mu.Unlock()
		if err != nil {
			writeError(w, err)
		}
	}
}

// apiError is an error as BigQuery answers it: an HTTP status, a reason
// and a message.
type apiError struct {
	status  int
	reason  string
	message string
	// details are the further entries of a failed job's status.errors,
	// after the errorResult: a failed load's errorResult only says to
	// look there, as BigQuery's does.
	details []string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.reason, e.message) }

func errorf(status int, reason, format string, args ...any) *apiError {
	return &apiError{status: status, reason: reason, message: fmt.Sprintf(format, args...)}
}

func invalidQuery(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "invalidQuery", format, args...)
}

var statusNames = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
}

func writeError(w http.ResponseWriter, err error) {
	e, ok := err.(*apiError)
	if !ok {
		e = &apiError{status: http.StatusInternalServerError, reason: "internalError", message: err.Error()}
	}
	body := map[string]any{"error": map[string]any{
		"code":    e.status,
		"message": e.message,
		"errors":  []map[string]string{{"message": e.message, "domain": "global", "reason": e.reason}},
		"status":  statusNames[e.status],
	}}
	writeJSON(w, e.status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func decodeBody(r *http.Request, v any) error {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: decoding request body: %v", err)
	}
	return nil
}

func (s *Server) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s_%d", prefix, s.seq)
}

func tableKey(project, dataset, table string) string { return project + "." + dataset + "." + table }

// splitRef splits "project.dataset.table" (the project may hold dots, as
// in "example.com:proj").
func splitRef(ref string) (project, dataset, table string, ok bool) {
	i := strings.LastIndex(ref, ".")
	if i < 0 {
		return "", "", "", false
	}
	j := strings.LastIndex(ref[:i], ".")
	if j < 0 {
		return "", "", "", false
	}
	return ref[:j], ref[j+1 : i], ref[i+1:], true
}
