package bqfake

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	bqv2 "google.golang.org/api/bigquery/v2"
)

// job is a job the fake ran. Work is done when the job is created; polls
// may still report it running (Options.PendingPolls).
type job struct {
	j       *bqv2.Job
	res     *result
	err     *apiError // a failed job's error, as getQueryResults answers it
	pending int
	// until, when set, is when the job stops looking running on now
	// (Options.RowsPerSecond).
	until time.Time
	now   func() time.Time
	seq   int  // creation order
	fast  bool // made by jobs.query
	// finish, when set, is a transaction's work: it runs when the job
	// stops looking running (after pending polls), so that transactions
	// overlap other jobs as they do in BigQuery.
	finish func()
}

// poll is one look at the job: it reports whether the job is still
// running, and runs a transaction's work when its time has come.
func (j *job) poll() bool {
	if j.pending > 0 {
		j.pending--
		return true
	}
	if !j.until.IsZero() && j.now().Before(j.until) {
		return true
	}
	if f := j.finish; f != nil {
		j.finish = nil
		f()
	}
	return false
}

func (s *Server) newJob(project string, in *bqv2.Job, prefix string) (*job, error) {
	ref := in.JobReference
	if ref == nil {
		ref = &bqv2.JobReference{}
	}
	if ref.JobId == "" {
		ref.JobId = s.nextID(prefix)
	}
	ref.ProjectId = project
	if ref.Location == "" {
		ref.Location = "US"
	}
	key := project + "." + ref.JobId
	if _, ok := s.jobs[key]; ok {
		return nil, errorf(http.StatusConflict, "duplicate", "Already Exists: Job %s:%s.%s", project, ref.Location, ref.JobId)
	}
	now := s.opts.Now().UnixMilli()
	j := &job{
		j: &bqv2.Job{
			Kind: "bigquery#job", Id: project + ":" + ref.Location + "." + ref.JobId,
			JobReference: ref, Configuration: in.Configuration,
			Statistics: &bqv2.JobStatistics{CreationTime: now, StartTime: now, EndTime: now},
			Status:     &bqv2.JobStatus{State: "DONE"},
		},
		pending: s.opts.PendingPolls,
		now:     s.opts.Now,
		seq:     len(s.jobs),
	}
	s.jobs[key] = j
	return j, nil
}

// fail ends a job DONE with an error.
func (j *job) fail(e *apiError) {
	j.err = e
	ep := &bqv2.ErrorProto{Reason: e.reason, Message: e.message}
	j.j.Status.ErrorResult = ep
	j.j.Status.Errors = []*bqv2.ErrorProto{ep}
	for _, d := range e.details {
		j.j.Status.Errors = append(j.j.Status.Errors, &bqv2.ErrorProto{Reason: e.reason, Message: d})
	}
}

// view is the job as jobs.get shows it now.
func (j *job) view() *bqv2.Job { return j.show(j.poll()) }

// peek is the job as it is, without counting a poll: jobs.list does not
// move a job along.
func (j *job) peek() *bqv2.Job { return j.show(j.pending > 0 || j.finish != nil) }

func (j *job) show(running bool) *bqv2.Job {
	out := *j.j
	st := *j.j.Status
	if running {
		st = bqv2.JobStatus{State: "RUNNING"}
	}
	out.Status = &st
	return &out
}

func (s *Server) insertJob(w http.ResponseWriter, r *http.Request) error {
	var in bqv2.Job
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: reading body: %v", err)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: decoding job: %v", err)
	}
	s.stats.MaxQueryRequest = max(s.stats.MaxQueryRequest, len(raw))
	if in.Configuration == nil || in.Configuration.Query == nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: jobs.insert without an upload supports query jobs only")
	}
	if f, ok := s.takeFault(OpQuery); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected query fault"}
	}
	params, err := decodeParams(raw, "configuration", "query")
	if err != nil {
		return err
	}
	stmt, err := s.recognise(in.Configuration.Query.Query)
	if err != nil {
		return err
	}
	j, err := s.newJob(r.PathValue("project"), &in, "job")
	if err != nil {
		return err
	}
	s.stats.QueryJobs++
	s.start(j, stmt, params)
	if f, ok := s.takeFault(OpQueryLost); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected lost jobs.insert response"}
	}
	if hooks := s.hooks; len(hooks) > 0 {
		// Outside the lock, so that a hook may call the fake; the
		// caller's job stays as it is until the hook returns.
		s.mu.Unlock()
		for _, h := range hooks {
			if h != nil {
				h(stmt.kind)
			}
		}
		s.mu.Lock()
	}
	writeJSON(w, http.StatusOK, j.view())
	return nil
}

// OnStatement calls fn with the statement type of every query job
// inserted from now on, after the job ran and before its creation is
// answered: tests use it to act "between" two steps of a client. The
// returned func removes the hook.
func (s *Server) OnStatement(fn func(kind string)) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.hooks)
	s.hooks = append(s.hooks, fn)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hooks[i] = nil
	}
}

// start runs a statement for a query job. A transaction script is first
// run on the data as it is (snapshot.go) to learn which tables it
// updates or deletes rows of; it is cancelled at once when another
// running transaction does so to one of them (BigQuery cancels the later
// of two such transactions; with Options.AbortEarlier, the earlier is
// cancelled when it finishes). Otherwise it is registered as running and
// does its work when it finishes, after Options.PendingPolls polls,
// while other jobs come and go.
func (s *Server) start(j *job, stmt *statement, params map[string]param) {
	if len(stmt.mutates) == 0 {
		s.runStatement(j, stmt, params)
		return
	}
	// An injected conflict between concurrent mutating DML on one table,
	// in either of BigQuery's wordings: the job fails with reason
	// invalidQuery (HTTP 400) and its transaction is rolled back.
	for _, c := range []struct {
		op     Op
		format string
	}{
		{OpConcurrent, "Transaction is aborted due to concurrent update against table %s:%s.%s. Transaction ID: injected"},
		{OpSerialize, "Could not serialize access to table %s:%s.%s due to concurrent update"},
	} {
		if _, ok := s.takeFault(c.op); ok {
			p, d, t, _ := splitRef(stmt.mutates[0])
			j.j.Statistics.Query = &bqv2.JobStatistics2{StatementType: stmt.kind}
			j.fail(invalidQuery(c.format, p, d, t))
			s.stats.Aborted++
			return
		}
	}
	// With a fault queued inside scripts, the dry run would take it:
	// such a transaction is taken to change every table it may.
	mutates := stmt.mutates
	var dry *dryRun
	if len(s.faults[OpScript]) == 0 && len(s.faults[OpScriptCommitted]) == 0 {
		if dry = s.dryRun(stmt, params); dry != nil {
			mutates = dry.mutated()
		}
	}
	for _, other := range s.running {
		for _, a := range mutates {
			if slices.Contains(other.mutates, a) && s.opts.AbortEarlier {
				if other.aborted == "" {
					other.aborted = a
				}
				continue
			}
			if slices.Contains(other.mutates, a) {
				p, d, t, _ := splitRef(a)
				j.j.Statistics.Query = &bqv2.JobStatistics2{StatementType: stmt.kind}
				j.fail(invalidQuery("Transaction is aborted due to concurrent update against table %s:%s.%s. Transaction ID: %s", p, d, t, other.j.j.JobReference.JobId))
				s.stats.Aborted++
				return
			}
		}
	}
	key := j.j.Id
	r := &running{j: j, mutates: mutates}
	s.running[key] = r
	if rate := s.opts.RowsPerSecond; rate > 0 {
		n := s.rowsRead(stmt)
		j.until = s.opts.Now().Add(time.Duration(float64(n) / rate * float64(time.Second)))
	}
	j.finish = func() {
		delete(s.running, key)
		switch {
		case r.aborted != "":
			// Cancelled mid-script: what it read so far is billed.
			p, d, t, _ := splitRef(r.aborted)
			j.j.Statistics.Query = &bqv2.JobStatistics2{StatementType: stmt.kind}
			if dry != nil {
				j.j.Statistics.Query.TotalBytesProcessed, j.j.Statistics.TotalBytesProcessed = dry.meter.bytes, dry.meter.bytes
				s.stats.BytesProcessed += dry.meter.bytes
			}
			j.fail(invalidQuery("Transaction is aborted due to concurrent update against table %s:%s.%s at [24:9]", p, d, t))
			s.stats.Aborted++
		case dry != nil && len(mutates) == 0:
			s.applyInserts(j, stmt, dry)
		default:
			s.runStatement(j, stmt, params)
		}
	}
	if j.pending == 0 {
		j.poll()
	}
}

// rowsRead counts the rows of the tables stmt reads and does not change.
func (s *Server) rowsRead(stmt *statement) int64 {
	var total int64
	seen := map[string]bool{}
	for _, r := range stmt.refs {
		if seen[r] || slices.Contains(stmt.mutates, r) {
			continue
		}
		seen[r] = true
		var n int64
		if err := s.db.QueryRow("SELECT count(*) FROM " + quoteIdent(r)).Scan(&n); err == nil {
			total += n
		}
	}
	return total
}

// running is a transaction in flight.
type running struct {
	j       *job
	mutates []string
	// aborted, with Options.AbortEarlier, is the table a later
	// transaction updates too: this one fails when it finishes.
	aborted string
}

// runStatement executes a recognised statement for a query job.
func (s *Server) runStatement(j *job, stmt *statement, params map[string]param) {
	s.meter = newMeter()
	res, err := stmt.run(s, params)
	m := s.meter
	s.meter = nil
	s.endJob(j, stmt, res, m, err)
}

// endJob ends a query job with the result of its statement.
func (s *Server) endJob(j *job, stmt *statement, res *result, m *meter, err error) {
	qs := &bqv2.JobStatistics2{StatementType: stmt.kind}
	j.j.Statistics.Query = qs
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{status: http.StatusBadRequest, reason: "invalidQuery", message: err.Error()}
		}
		j.fail(ae)
		return
	}
	if stmt.kind == "SCRIPT" {
		if f, ok := s.takeFault(OpScriptCommitted); ok {
			j.fail(&apiError{status: f.status, reason: f.reason, message: "bqfake: injected failure after the transaction committed"})
			return
		}
	}
	j.res = res
	if res != nil {
		qs.NumDmlAffectedRows = res.dml
	}
	qs.TotalBytesProcessed, j.j.Statistics.TotalBytesProcessed = m.bytes, m.bytes
	s.stats.BytesProcessed += m.bytes
}

// listJobs serves jobs.list: the project's jobs, newest first as BigQuery
// lists them, in one page, each with its statistics
// (totalBytesProcessed); stateFilter is honoured, other options are not.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	project := r.PathValue("project")
	states := r.URL.Query()["stateFilter"]
	var all []*job
	for k, j := range s.jobs {
		if strings.HasPrefix(k, project+".") {
			all = append(all, j)
		}
	}
	// Newest first; jobs created in one millisecond by creation order.
	slices.SortFunc(all, func(a, b *job) int {
		if c := cmp.Compare(b.j.Statistics.CreationTime, a.j.Statistics.CreationTime); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	})
	list := &bqv2.JobList{Kind: "bigquery#jobList"}
	for _, j := range all {
		v := j.peek()
		state := strings.ToLower(v.Status.State)
		if len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, state) }) {
			continue
		}
		list.Jobs = append(list.Jobs, &bqv2.JobListJobs{
			Kind: "bigquery#job", Id: v.Id, JobReference: v.JobReference, State: v.Status.State,
			Configuration: v.Configuration, Statistics: v.Statistics, Status: v.Status, ErrorResult: v.Status.ErrorResult,
		})
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	if f, ok := s.takeFault(OpJobsGet); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected jobs.get fault"}
	}
	j, ok := s.jobs[r.PathValue("project")+"."+r.PathValue("job")]
	if !ok {
		return errorf(http.StatusNotFound, "notFound", "Not found: Job %s:%s", r.PathValue("project"), r.PathValue("job"))
	}
	writeJSON(w, http.StatusOK, j.view())
	return nil
}

// cancelJob serves jobs.cancel. A job still running stops with reason
// "stopped", as BigQuery reports a cancelled job; a transaction's work is
// not done (rolled back), and it no longer cancels later transactions on
// its tables. A finished job is left as it is. Work other than a
// transaction's was done when the job was created (a load's rows stay).
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	j, ok := s.jobs[r.PathValue("project")+"."+r.PathValue("job")]
	if !ok {
		return errorf(http.StatusNotFound, "notFound", "Not found: Job %s:%s", r.PathValue("project"), r.PathValue("job"))
	}
	if j.pending > 0 || j.finish != nil {
		j.pending, j.finish, j.until = 0, nil, time.Time{}
		delete(s.running, j.j.Id)
		j.res = nil
		j.fail(&apiError{status: http.StatusBadRequest, reason: "stopped", message: "Job execution was cancelled: User requested cancellation"})
		s.stats.Cancelled++
	}
	writeJSON(w, http.StatusOK, &bqv2.JobCancelResponse{Kind: "bigquery#jobCancelResponse", Job: j.view()})
	return nil
}

// runQuery serves jobs.query: the statement runs at once and the first page
// of its result comes back in the response.
func (s *Server) runQuery(w http.ResponseWriter, r *http.Request) error {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: reading body: %v", err)
	}
	var req bqv2.QueryRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: decoding query request: %v", err)
	}
	if req.UseLegacySql != nil && *req.UseLegacySql {
		return invalidQuery("bqfake: legacy SQL is not supported")
	}
	if f, ok := s.takeFault(OpQuery); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected query fault"}
	}
	params, err := decodeParams(raw)
	if err != nil {
		return err
	}
	stmt, err := s.recognise(req.Query)
	if err != nil {
		return err
	}
	j, err := s.newJob(r.PathValue("project"), &bqv2.Job{
		JobReference: &bqv2.JobReference{Location: req.Location},
		Configuration: &bqv2.JobConfiguration{Query: &bqv2.JobConfigurationQuery{Query: req.Query, QueryParameters: req.QueryParameters},
			JobTimeoutMs: req.JobTimeoutMs},
	}, "query")
	if err != nil {
		return err
	}
	s.stats.QueryJobs++
	j.pending = 0
	j.fast = true
	s.start(j, stmt, params)
	if j.err != nil {
		return j.err
	}
	int64TS := req.FormatOptions != nil && req.FormatOptions.UseInt64Timestamp
	resp := &bqv2.QueryResponse{Kind: "bigquery#queryResponse", JobReference: j.j.JobReference, JobComplete: true,
		TotalBytesProcessed: j.j.Statistics.TotalBytesProcessed}
	if j.res != nil {
		n := len(j.res.rows)
		size := min(n, s.opts.PageRows)
		if req.MaxResults > 0 {
			size = min(size, int(req.MaxResults))
		}
		resp.Schema = j.res.schema()
		resp.Rows = j.res.wireRows(0, size, int64TS)
		resp.TotalRows = uint64(n)
		if size < n {
			resp.PageToken = pageToken(size)
		}
		resp.NumDmlAffectedRows = j.res.dml
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) getQueryResults(w http.ResponseWriter, r *http.Request) error {
	if f, ok := s.takeFault(OpQueryResults); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected jobs.getQueryResults fault"}
	}
	j, ok := s.jobs[r.PathValue("project")+"."+r.PathValue("job")]
	if !ok {
		return errorf(http.StatusNotFound, "notFound", "Not found: Job %s:%s", r.PathValue("project"), r.PathValue("job"))
	}
	if j.j.Configuration == nil || j.j.Configuration.Query == nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: job %s is not a query job", j.j.JobReference.JobId)
	}
	resp := &bqv2.GetQueryResultsResponse{Kind: "bigquery#getQueryResultsResponse", JobReference: j.j.JobReference}
	if j.poll() {
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	if j.err != nil {
		return j.err
	}
	resp.JobComplete = true
	resp.TotalBytesProcessed = j.j.Statistics.TotalBytesProcessed
	if j.res != nil {
		n := len(j.res.rows)
		start, size, err := pageBounds(r, n, s.opts.PageRows)
		if err != nil {
			return err
		}
		resp.Schema = j.res.schema()
		resp.TotalRows = uint64(n)
		resp.Rows = j.res.wireRows(start, start+size, useInt64(r))
		if start+size < n && size > 0 {
			resp.PageToken = pageToken(start + size)
		}
		resp.NumDmlAffectedRows = j.res.dml
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// resumable is an upload session.
type resumable struct {
	project string
	job     []byte
	data    bytes.Buffer
}

// upload serves the media upload of a load job, multipart or resumable.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) error {
	project := r.PathValue("project")
	q := r.URL.Query()
	switch {
	case q.Get("upload_id") != "":
		return s.resumeUpload(w, r, q.Get("upload_id"))
	case q.Get("uploadType") == "multipart":
		mt, mp, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || !strings.HasPrefix(mt, "multipart/") {
			return errorf(http.StatusBadRequest, "invalid", "bqfake: multipart upload without a multipart body")
		}
		mr := multipart.NewReader(r.Body, mp["boundary"])
		var parts [][]byte
		for range 2 {
			p, err := mr.NextPart()
			if err != nil {
				return errorf(http.StatusBadRequest, "invalid", "bqfake: reading multipart upload: %v", err)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return errorf(http.StatusBadRequest, "invalid", "bqfake: reading multipart upload: %v", err)
			}
			parts = append(parts, b)
		}
		s.stats.MultipartUploads++
		return s.finishUpload(w, project, parts[0], parts[1])
	case q.Get("uploadType") == "resumable":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid", "bqfake: reading upload: %v", err)
		}
		id := s.nextID("upload")
		s.uploads[id] = &resumable{project: project, job: body}
		w.Header().Set("Location", fmt.Sprintf("http://%s/upload/bigquery/v2/projects/%s/jobs?uploadType=resumable&upload_id=%s", r.Host, project, id))
		w.WriteHeader(http.StatusOK)
		return nil
	}
	return errorf(http.StatusBadRequest, "invalid", "bqfake: unsupported uploadType %q", q.Get("uploadType"))
}

func (s *Server) resumeUpload(w http.ResponseWriter, r *http.Request, id string) error {
	up, ok := s.uploads[id]
	if !ok {
		return errorf(http.StatusNotFound, "notFound", "bqfake: no upload session %s", id)
	}
	// Content-Range: "bytes a-b/total", "bytes a-b/*" or "bytes */total".
	cr := strings.TrimPrefix(r.Header.Get("Content-Range"), "bytes ")
	rng, totalS, ok := strings.Cut(cr, "/")
	if !ok {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: bad Content-Range %q", r.Header.Get("Content-Range"))
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: reading chunk: %v", err)
	}
	if rng != "*" {
		a, _, _ := strings.Cut(rng, "-")
		off, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid", "bqfake: bad Content-Range %q", cr)
		}
		switch {
		case off == int64(up.data.Len()):
			up.data.Write(body)
		case off+int64(len(body)) <= int64(up.data.Len()):
			// A chunk sent again after a lost response: already stored.
		default:
			return errorf(http.StatusBadRequest, "invalid", "bqfake: chunk at %d, have %d bytes", off, up.data.Len())
		}
	}
	if totalS == "*" || strconv.Itoa(up.data.Len()) != totalS {
		w.Header().Set("X-Http-Status-Code-Override", "308")
		if up.data.Len() > 0 {
			w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", up.data.Len()-1))
		}
		w.WriteHeader(http.StatusOK)
		return nil
	}
	s.stats.ResumableUploads++
	err = s.finishUpload(w, up.project, up.job, up.data.Bytes())
	var ae *apiError
	if err == nil || errors.As(err, &ae) && ae.reason == "duplicate" {
		delete(s.uploads, id)
	}
	return err
}

// finishUpload creates and runs the load job of a complete upload.
func (s *Server) finishUpload(w http.ResponseWriter, project string, jobJSON, data []byte) error {
	if f, ok := s.takeFault(OpUpload); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected upload fault"}
	}
	var in bqv2.Job
	if err := json.Unmarshal(jobJSON, &in); err != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: decoding job: %v", err)
	}
	if in.Configuration == nil || in.Configuration.Load == nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: an upload must carry a load job")
	}
	j, err := s.newJob(project, &in, "load")
	if err != nil {
		return err
	}
	s.stats.LoadJobs++
	if f, ok := s.takeFault(OpLoadJob); ok {
		j.fail(&apiError{status: f.status, reason: f.reason, message: "bqfake: injected load job failure"})
	} else if n, err := s.load(in.Configuration.Load, data); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{status: http.StatusInternalServerError, reason: "internalError", message: err.Error()}
		}
		j.fail(ae)
	} else {
		j.j.Statistics.Load = &bqv2.JobStatistics3{OutputRows: n, InputFiles: 1, InputFileBytes: int64(len(data))}
	}
	if f, ok := s.takeFault(OpUploadLost); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected lost upload response"}
	}
	writeJSON(w, http.StatusOK, j.view())
	return nil
}
