package apisim

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsync/formsync/internal/loopback"
)

// Stats counts what the server answered since New or ResetStats.
type Stats struct {
	Requests int
	ByStatus map[int]int
	// PerForm counts requests by the formId in their path, whatever the answer.
	PerForm map[string]int
	// Faults counts injected misbehaviour: "429" (every 429, rate limited or
	// random), "429-random" (the RateLimitFaults ones), "5xx", "truncate",
	// "stall", and "canceled" (the client went away during latency or stall).
	Faults map[string]int
	// Added and Deleted count submissions added or deleted after New, by
	// mutation or through Add, AddAt and Delete.
	Added, Deleted int
	// WebhooksSent and WebhooksFailed count the webhooks (Options.Webhook)
	// answered 2xx, and those answered otherwise or not at all.
	WebhooksSent, WebhooksFailed int
	// FileRequests counts the requests under FilesPath, FileByStatus
	// them by status, and FileBytes the bytes of the 200 bodies answered
	// to them; none of them is in Requests, ByStatus or PerForm.
	FileRequests int
	FileByStatus map[int]int
	FileBytes    int64
}

// Server is the simulated API; it implements http.Handler and is safe for
// concurrent use.
type Server struct {
	opts Options // defaults applied; immutable after New
	mux  *http.ServeMux

	mu      sync.Mutex
	faults  Faults
	variant Variant
	perForm map[string]Variant // overrides variant
	order   Order
	mutate  mutation
	forms   map[string]*form
	formIDs []string
	nextID  int64
	seq     uint64 // request sequence number, keys each request's fault draws
	bucket  bucket
	plan    window
	stats   Stats
	// served counts the 200s, for Options.RevokeAfter; revoked is set
	// once the token is revoked (Revoke).
	served  int
	revoked bool
	fileLog []FileRequest

	// origin is the files origin once known (FileOptions.Origin, the
	// first listener, SetFilesOrigin); fileFaults the explicit faults
	// (SetFileFault), replaced whole on every change.
	origin     atomic.Pointer[string]
	fileFaults atomic.Pointer[map[FileRef]FileFault]

	// hooks counts the webhooks in flight; hookSlots bounds them.
	hooks      sync.WaitGroup
	hookSlots  chan struct{}
	hookClient *http.Client
}

// New builds a server and generates its forms' initial submissions.
func New(opts Options) *Server {
	o := opts.withDefaults()
	s := &Server{
		opts:    o,
		faults:  o.Faults(),
		variant: o.Variant,
		perForm: o.FormVariants,
		order:   o.Order,
		mutate:  mutation{o.MutateEvery, o.AddPerMutation, o.DeletePerMutation},
		forms:   make(map[string]*form, len(o.Forms)),
		nextID:  o.FirstID - 1,
	}
	if o.Webhook != "" {
		if err := CheckWebhook(o.Webhook); err != nil {
			panic("apisim.New: " + err.Error())
		}
		s.hookSlots = make(chan struct{}, webhookConcurrency)
		s.hookClient = &http.Client{
			Timeout: WebhookTimeout,
			// Only to loopback, whatever a name resolves to, and no proxy.
			Transport: &http.Transport{DialContext: loopback.Dial},
			// A redirect could lead off loopback: the answer is the 3xx.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.Files.Origin != "" {
		if err := s.SetFilesOrigin(o.Files.Origin); err != nil {
			panic("apisim.New: " + err.Error())
		}
	}
	s.fileFaults.Store(&map[FileRef]FileFault{})
	s.resetStatsLocked()
	for _, id := range o.Forms {
		if s.forms[id] == nil {
			s.newForm(id, o.SubmissionsPerForm)
		}
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/api/forms/{formId}/submissions", s.serveSubmissions)
	s.mux.HandleFunc(FilesPath+"{form}/{id}/{name}", s.serveFile)
	s.mux.HandleFunc(FilesPath+"moved/{form}/{id}/{name}", s.serveFile)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.recordLocked("", http.StatusNotFound)
		s.mu.Unlock()
		writeBody(w, http.StatusNotFound, "text/plain; charset=utf-8", []byte("404 page not found\n"))
	})
	return s
}

// Token returns the bearer token the server accepts.
func (s *Server) Token() string { return s.opts.Token }

// Revoke revokes the token: every later request is answered 401, as the
// service answers a token its account owner deleted.
func (s *Server) Revoke() {
	s.mu.Lock()
	s.revoked = true
	s.mu.Unlock()
}

// PlanLimit returns the plan limit in effect (0 when none) and its window,
// rounded up to whole seconds.
func (s *Server) PlanLimit() (int, time.Duration) { return s.opts.PlanLimit, s.opts.PlanWindow }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.learnOrigin(r)
	s.mux.ServeHTTP(w, r)
}

// SetVariant switches the response form for subsequent requests of the
// forms that have no variant of their own (Options.FormVariants,
// SetFormVariant).
func (s *Server) SetVariant(v Variant) {
	s.mu.Lock()
	s.variant = v
	s.mu.Unlock()
}

// SetFormVariant switches the response form of one form for subsequent
// requests.
func (s *Server) SetFormVariant(formID string, v Variant) {
	s.mu.Lock()
	if s.perForm == nil {
		s.perForm = map[string]Variant{}
	}
	s.perForm[formID] = v
	s.mu.Unlock()
}

func (s *Server) variantLocked(formID string) Variant {
	if v, ok := s.perForm[formID]; ok {
		return v
	}
	return s.variant
}

// SetOrder switches the sort order for subsequent requests.
func (s *Server) SetOrder(o Order) {
	s.mu.Lock()
	s.order = o
	s.mu.Unlock()
}

// mutation is Options.MutateEvery, AddPerMutation and DeletePerMutation.
type mutation struct{ every, add, del int }

// SetMutation changes the mutation settings (see Options.MutateEvery);
// every 0 stops mutating. Pages already served keep counting towards the next one.
func (s *Server) SetMutation(every, add, del int) {
	s.mu.Lock()
	s.mutate = mutation{every, add, del}
	s.mu.Unlock()
}

// SetFormStatus makes formID answer 400 (API access disabled) or 404
// (deleted); 0 restores normal answers. An unknown form is created empty.
func (s *Server) SetFormStatus(formID string, status int) {
	s.mu.Lock()
	s.formLocked(formID).status = status
	s.mu.Unlock()
}

// SetFaults replaces the fault settings (StallFor 0 means the default 30s);
// a change of RateLimit refills the bucket.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.StallFor = cmp.Or(f.StallFor, 30*time.Second)
	if f.RateLimit != s.faults.RateLimit {
		s.bucket = bucket{}
	}
	s.faults = f
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByStatus = maps.Clone(st.ByStatus)
	st.PerForm = maps.Clone(st.PerForm)
	st.Faults = maps.Clone(st.Faults)
	st.FileByStatus = maps.Clone(st.FileByStatus)
	return st
}

// ResetStats zeroes the counters.
func (s *Server) ResetStats() {
	s.mu.Lock()
	s.resetStatsLocked()
	s.mu.Unlock()
}

func (s *Server) resetStatsLocked() {
	s.stats = Stats{ByStatus: map[int]int{}, PerForm: map[string]int{}, Faults: map[string]int{}, FileByStatus: map[int]int{}}
	s.fileLog = nil
}

// recordLocked counts a response before it is written, so a client that has
// read the response always sees it in Stats.
func (s *Server) recordLocked(formID string, status int) {
	s.stats.Requests++
	s.stats.ByStatus[status]++
	if formID != "" {
		s.stats.PerForm[formID]++
	}
}

// bucket is the server-side token bucket; its burst is one second's worth.
type bucket struct {
	tokens float64
	last   time.Time
	primed bool
}

// take reports whether a request may pass and, if not, how long until a
// token is back.
func (b *bucket) take(now time.Time, rate float64) (bool, time.Duration) {
	if rate <= 0 {
		return true, 0
	}
	burst := math.Max(1, rate)
	if !b.primed {
		b.tokens, b.last, b.primed = burst, now, true
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(burst, b.tokens+el.Seconds()*rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// window is the plan limit as Laravel's RateLimiter counts it: hits in a
// fixed window whose timer is set, in whole unix seconds, by the first hit
// after the previous window closed. A refused request is not counted.
type window struct {
	hits  int
	reset int64 // unix second at which the window closes
}

// hit reports whether a request at now may pass, the requests left in the
// window after it, and when the window closes.
func (w *window) hit(now time.Time, limit int, length time.Duration) (ok bool, remaining int, reset int64) {
	sec := now.Unix()
	if sec >= w.reset {
		w.hits, w.reset = 0, sec+int64(length/time.Second)
	}
	if w.hits >= limit {
		return false, 0, w.reset
	}
	w.hits++
	return true, limit - w.hits, w.reset
}

type reply struct {
	status      int
	contentType string
	body        []byte
	header      map[string]string
}

func (rep *reply) write(w http.ResponseWriter) {
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	writeBody(w, rep.status, rep.contentType, rep.body)
}

var (
	jsonType = "application/json"
	htmlType = "text/html; charset=UTF-8"
)

func (s *Server) serveSubmissions(w http.ResponseWriter, r *http.Request) {
	formID := r.PathValue("formId")
	ctx := r.Context()

	s.mu.Lock()
	s.seq++
	seq := s.seq
	rng := rand.New(rand.NewPCG(uint64(s.opts.Seed), seq))
	early, limits := s.gateLocked(r, formID, rng)
	faults := s.faults
	for k, v := range limits {
		w.Header().Set(k, v)
	}
	if early != nil {
		s.recordLocked(formID, early.status)
		s.mu.Unlock()
		early.write(w)
		return
	}
	s.mu.Unlock()

	if !sleep(ctx, faults.Latency) {
		s.countFault("canceled")
		return
	}

	page, perPage := pageParams(r)
	s.mu.Lock()
	f := s.forms[formID]
	if rep := formStatusReply(f); rep != nil {
		// The form went away during the latency.
		s.recordLocked(formID, rep.status)
		s.mu.Unlock()
		rep.write(w)
		return
	}
	variant, order := s.variantLocked(formID), s.order
	if variant == Older {
		perPage = 25
	}
	total := len(f.live)
	live := f.live
	if s.opts.ShuffleTies {
		// A generator of its own, so that shuffling leaves the request's
		// fault draws as they are without it.
		// A tie is what the form served cannot tell apart: the same
		// microsecond in the older form, the same millisecond in the others.
		width := int64(1000)
		if variant == Older {
			width = 1
		}
		live = shuffleTies(live, width, rand.New(rand.NewPCG(uint64(s.opts.Seed)^tieSalt, seq)))
	}
	recs := pageRecs(live, order, page, perPage)
	custom := f.custom
	f.served++
	var mutated []rec
	if m := s.mutate; m.every > 0 && f.served%m.every == 0 {
		mutated = s.addLocked(f, max(m.add, 0))
		s.deleteLocked(f, m.del)
	}
	mode := "" // fault chosen for the body
	switch {
	case rng.Float64() < faults.Truncate:
		mode = "truncate"
	case rng.Float64() < faults.Stall:
		mode = "stall"
	}
	if mode != "" {
		s.stats.Faults[mode]++
	}
	s.recordLocked(formID, http.StatusOK)
	if s.served++; s.opts.RevokeAfter > 0 && s.served >= s.opts.RevokeAfter {
		s.revoked = true
	}
	s.mu.Unlock()
	if len(mutated) > 0 && s.opts.Webhook != "" {
		s.notify(formID, s.render(f, custom, mutated))
	}

	body := s.envelope(r, f, custom, variant, recs, total, page, perPage)
	w.Header().Set("Content-Type", jsonType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	cut := len(body) / 2
	if len(body) > 2 {
		cut = 1 + rng.IntN(len(body)-1)
	}
	switch mode {
	case "truncate":
		// Fewer bytes than Content-Length: net/http closes the connection
		// after the handler returns, so the client sees an unexpected EOF.
		w.Write(body[:cut])
	case "stall":
		w.Write(body[:cut])
		http.NewResponseController(w).Flush()
		if !sleep(ctx, faults.StallFor) {
			s.countFault("canceled")
			return
		}
		w.Write(body[cut:])
	default:
		w.Write(body)
	}
}

func (s *Server) countFault(name string) {
	s.mu.Lock()
	s.stats.Faults[name]++
	s.mu.Unlock()
}

// gateLocked applies, in order, method, auth, plan limit, form status, rate
// limit and server errors; it returns the reply for the first that refuses,
// or nil, and the X-RateLimit headers every later reply carries too.
func (s *Server) gateLocked(r *http.Request, formID string, rng *rand.Rand) (*reply, map[string]string) {
	if r.Method != http.MethodGet {
		return &reply{status: http.StatusMethodNotAllowed, contentType: jsonType,
			body:   []byte(`{"message":"The ` + r.Method + ` method is not supported for this route. Supported methods: GET."}`),
			header: map[string]string{"Allow": "GET"}}, nil
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok != s.opts.Token || s.revoked {
		return &reply{status: http.StatusUnauthorized, contentType: jsonType, body: []byte(`{"message":"Unauthenticated."}`)}, nil
	}
	now := s.opts.Now()
	var limits map[string]string
	if s.opts.PlanLimit > 0 {
		ok, remaining, reset := s.plan.hit(now, s.opts.PlanLimit, s.opts.PlanWindow)
		limits = map[string]string{
			"X-RateLimit-Limit":     strconv.Itoa(s.opts.PlanLimit),
			"X-RateLimit-Remaining": strconv.Itoa(remaining),
		}
		if !ok {
			s.stats.Faults["429"]++
			s.stats.Faults["429-plan"]++
			return &reply{status: http.StatusTooManyRequests, contentType: jsonType,
				body: []byte(`{"message":"Too Many Attempts."}`),
				header: map[string]string{
					"Retry-After":       strconv.FormatInt(reset-now.Unix(), 10),
					"X-RateLimit-Reset": strconv.FormatInt(reset, 10),
				}}, limits
		}
	}
	rep := s.faultLocked(formID, now, rng)
	return rep, limits
}

// faultLocked applies form status, rate limit and server errors.
func (s *Server) faultLocked(formID string, now time.Time, rng *rand.Rand) *reply {
	if rep := formStatusReply(s.forms[formID]); rep != nil {
		return rep
	}
	passed, wait := s.bucket.take(now, s.faults.RateLimit)
	random := passed && rng.Float64() < s.faults.RateLimitFaults
	if !passed || random {
		s.stats.Faults["429"]++
		if random {
			s.stats.Faults["429-random"]++
		}
		rep := &reply{status: http.StatusTooManyRequests, contentType: jsonType,
			body: []byte(`{"message":"Too Many Attempts."}`), header: map[string]string{}}
		secs := max(1, int64(math.Ceil(wait.Seconds())))
		mode := s.faults.RetryAfter
		if mode == RetryAfterMixed {
			mode = RetryAfterMode(rng.IntN(4))
		}
		switch mode {
		case RetryAfterSeconds:
			rep.header["Retry-After"] = strconv.FormatInt(secs, 10)
		case RetryAfterDate:
			rep.header["Retry-After"] = now.Add(time.Duration(secs) * time.Second).UTC().Format(http.TimeFormat)
		case RetryAfterZero:
			rep.header["Retry-After"] = "0"
		}
		return rep
	}
	if rng.Float64() < s.faults.ServerErrors {
		s.stats.Faults["5xx"]++
		switch rng.IntN(3) {
		case 0:
			return &reply{status: http.StatusInternalServerError, contentType: jsonType, body: []byte(`{"message":"Server Error"}`)}
		case 1:
			return &reply{status: http.StatusBadGateway, contentType: htmlType,
				body: []byte("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n")}
		default:
			return &reply{status: http.StatusServiceUnavailable, contentType: "text/plain; charset=utf-8", body: []byte("Service Unavailable")}
		}
	}
	return nil
}

// formStatusReply is the answer for a form that is unknown, deleted or has
// API access disabled; nil for a form that serves pages.
func formStatusReply(f *form) *reply {
	switch {
	case f == nil || f.status == http.StatusNotFound:
		return &reply{status: http.StatusNotFound, contentType: htmlType,
			body: []byte("<!DOCTYPE html>\n<html><head><title>Not Found</title></head><body><h1>404</h1><p>Not Found</p></body></html>\n")}
	case f.status == http.StatusBadRequest:
		return &reply{status: http.StatusBadRequest, contentType: jsonType,
			body: []byte(`{"error":"HTTP API access is not enabled for this form"}`)}
	case f.status != 0:
		return &reply{status: f.status, contentType: jsonType, body: []byte(`{"message":"` + http.StatusText(f.status) + `"}`)}
	}
	return nil
}

// pageParams reads page (missing, invalid or < 1 means 1) and limit
// (missing, invalid or < 1 means 10; above 100 means 100).
func pageParams(r *http.Request) (page, limit int) {
	q := r.URL.Query()
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	limit, err = strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 {
		limit = 10
	}
	return page, min(limit, 100)
}

// tieSalt keys the generator that shuffles a request's ties apart from
// the one that draws its faults.
const tieSalt = 0x7469657321

// shuffleTies returns a copy of live (sorted ascending) with every run of
// records sharing created_at/width (width in microseconds) in an order
// drawn from rng.
func shuffleTies(live []rec, width int64, rng *rand.Rand) []rec {
	out := slices.Clone(live)
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].at/width == out[i].at/width {
			j++
		}
		g := out[i:j]
		rng.Shuffle(len(g), func(a, b int) { g[a], g[b] = g[b], g[a] })
		i = j
	}
	return out
}

// pageRecs copies one page out of live (sorted ascending), in O(page size).
func pageRecs(live []rec, order Order, page, perPage int) []rec {
	n := len(live)
	if page-1 >= (n+perPage-1)/perPage {
		return nil
	}
	start := (page - 1) * perPage
	end := min(start+perPage, n)
	out := make([]rec, end-start)
	for i := range out {
		if order == NewestFirst {
			out[i] = live[n-1-(start+i)]
		} else {
			out[i] = live[start+i]
		}
	}
	return out
}

const (
	layoutOlder = "2006-01-02T15:04:05.000000Z"
	layoutNewer = "2006-01-02T15:04:05.000Z" // Format truncates, never rounds
)

func (s *Server) envelope(r *http.Request, f *form, custom map[int64]Submission, v Variant, recs []rec, total, page, perPage int) []byte {
	b := make([]byte, 0, 512+400*len(recs))
	b = append(b, `{"data":[`...)
	layout := layoutOlder
	if v != Older {
		layout = layoutNewer
	}
	spec := s.spec()
	for i, rc := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		fields, files := s.contentOf(f, custom, rc, spec)
		b = append(b, '{')
		if v != Older {
			b = append(b, `"id":`...)
			b = strconv.AppendInt(b, rc.id, 10)
			b = append(b, ',')
		}
		// A nil fields or files (SetSubmissions) is a member left out.
		if v == Live {
			// The live reference: values under data, no files or is_spam.
			if fields != nil {
				b = append(b, `"data":`...)
				b = append(b, fields...)
				b = append(b, ',')
			}
		} else {
			if fields != nil {
				b = append(b, `"fields":`...)
				b = append(b, fields...)
				b = append(b, ',')
			}
			if files != nil {
				b = append(b, `"files":`...)
				b = append(b, files...)
				b = append(b, ',')
			}
			b = append(b, `"is_spam":`...)
			b = strconv.AppendBool(b, rc.spam)
			b = append(b, ',')
		}
		b = append(b, `"created_at":"`...)
		b = time.UnixMicro(rc.at).UTC().AppendFormat(b, layout)
		b = append(b, `"}`...)
	}
	totalPages := (total + perPage - 1) / perPage
	if v == Live {
		// Laravel's paginator: an empty form still has one (empty) page.
		totalPages = max(totalPages, 1)
	}
	b = append(b, `],"meta":{"pagination":{"total":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(len(recs)), 10)
	b = append(b, `,"per_page":`...)
	b = strconv.AppendInt(b, int64(perPage), 10)
	b = append(b, `,"current_page":`...)
	b = strconv.AppendInt(b, int64(page), 10)
	b = append(b, `,"total_pages":`...)
	b = strconv.AppendInt(b, int64(totalPages), 10)
	link := func(p int) []byte {
		return appendJSONString(nil, "http://"+r.Host+r.URL.EscapedPath()+"?page="+strconv.Itoa(p)+"&limit="+strconv.Itoa(perPage))
	}
	switch v {
	case Older:
		b = append(b, `,"links":{}`...)
	case Newer:
		b = append(b, `,"links":{"previous":`...)
		if page > 1 {
			b = append(b, link(page-1)...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"next":`...)
		if page < totalPages {
			b = append(b, link(page+1)...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	case Live:
		// A PHP serialiser writes an empty links array as [], and leaves
		// out the neighbours that do not exist.
		var members [][]byte
		if page > 1 {
			members = append(members, append([]byte(`"previous":`), link(page-1)...))
		}
		if page < totalPages {
			members = append(members, append([]byte(`"next":`), link(page+1)...))
		}
		if len(members) == 0 {
			b = append(b, `,"links":[]`...)
		} else {
			b = append(b, `,"links":{`...)
			b = append(b, bytes.Join(members, []byte(","))...)
			b = append(b, '}')
		}
	}
	return append(b, "}}}"...)
}

func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// sleep waits d or until ctx ends; false means ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
