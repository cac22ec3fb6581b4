package apisim

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// rec is the compact ground truth of one submission; its fields and files
// are rendered on demand from (server seed, form, id).
type rec struct {
	at   int64 // created_at, unix microseconds UTC
	id   int64
	spam bool
	// copyOf, when not 0, is the id of the submission whose content this
	// one repeats (AddCopy).
	copyOf int64
}

// contentID is the id a submission's fields and files are rendered from.
func (r rec) contentID() int64 {
	if r.copyOf != 0 {
		return r.copyOf
	}
	return r.id
}

type form struct {
	id     string
	hash   uint64
	schema schema
	live   []rec // sorted by (at, id) ascending
	gone   []rec // deleted, in order of deletion
	status int   // 0, 400 or 404
	served int   // 200 pages served, for Options.MutateEvery
	newest int64 // largest created_at ever held, deleted or not
	// custom holds the submissions SetSubmissions gave, by id; replaced
	// whole, never changed in place, so that a response rendered after the
	// lock is released may read it.
	custom map[int64]Submission
	rng    *rand.Rand
}

// Submission is the ground truth of one submission. ID exists in both
// variants (only the Newer one renders it); CreatedAt is UTC with
// microsecond precision.
type Submission struct {
	ID        int64
	CreatedAt time.Time
	IsSpam    bool
	Fields    json.RawMessage // JSON object
	Files     json.RawMessage // JSON array
}

const spamPercent = 5

// newForm creates a form with n initial submissions starting at s.opts.Start
// (or ending at s.opts.End).
// Called with s.mu held (or before the server is shared).
func (s *Server) newForm(id string, n int) *form {
	h := hashString(id)
	f := &form{
		id:     id,
		hash:   h,
		schema: schemaFor(id),
		rng:    rand.New(rand.NewPCG(uint64(s.opts.Seed), h)),
		live:   make([]rec, n),
	}
	at := s.opts.Start.UnixMicro()
	spacing := s.opts.Spacing.Microseconds()
	for i := range n {
		if i > 0 {
			tie := s.opts.TieEvery > 0 && (i+1)%s.opts.TieEvery == 0
			if !tie {
				at += gap(f.rng, spacing)
			}
		}
		s.nextID++
		f.live[i] = rec{at: at, id: s.nextID, spam: f.rng.IntN(100) < spamPercent}
	}
	if !s.opts.End.IsZero() && n > 0 {
		// Dated back from End: the newest lands on it.
		shift := s.opts.End.UnixMicro() - at
		for i := range f.live {
			f.live[i].at += shift
		}
		at += shift
	}
	f.newest = at
	if n == 0 {
		f.newest = -1 << 62
	}
	s.forms[id] = f
	s.formIDs = append(s.formIDs, id)
	return f
}

// gap is uniform on [1, 2*mean-1] microseconds: mean about mean, never 0
// (ties are only made on purpose).
func gap(rng *rand.Rand, mean int64) int64 {
	if mean <= 1 {
		return 1
	}
	return 1 + rng.Int64N(2*mean-1)
}

func (s *Server) formLocked(id string) *form {
	if f := s.forms[id]; f != nil {
		return f
	}
	return s.newForm(id, 0)
}

func (s *Server) submission(f *form, custom map[int64]Submission, r rec, spec *fileSpec) Submission {
	fields, files := s.contentOf(f, custom, r, spec)
	return Submission{ID: r.id, CreatedAt: time.UnixMicro(r.at).UTC(), IsSpam: r.spam, Fields: fields, Files: files}
}

// contentOf is the fields and files of r: those SetSubmissions gave
// (custom is the form's custom, read under the lock), or generated, with
// files rendered by spec (Server.spec).
func (s *Server) contentOf(f *form, custom map[int64]Submission, r rec, spec *fileSpec) (fields, files json.RawMessage) {
	if c, ok := custom[r.contentID()]; ok {
		return c.Fields, c.Files
	}
	return content(s.contentSeed(f, r.contentID()), f.id, f.schema, r.contentID(), spec)
}

func (s *Server) contentSeed(f *form, id int64) uint64 {
	return uint64(s.opts.Seed)*0x9e3779b97f4a7c15 ^ f.hash ^ uint64(id)*0xd1b54a32d192ed03
}

func (s *Server) render(f *form, custom map[int64]Submission, rs []rec) []Submission {
	out := make([]Submission, len(rs))
	spec := s.spec()
	for i, r := range rs {
		out[i] = s.submission(f, custom, r, spec)
	}
	return out
}

// addLocked appends n submissions, each strictly after the newest one and
// no earlier than Now.
func (s *Server) addLocked(f *form, n int) []rec {
	now := s.opts.Now().UnixMicro()
	// Start after the newest ever held, deleted or not, as a real service would.
	prev := f.newest
	added := make([]rec, n)
	for i := range n {
		at := max(now, prev+1)
		s.nextID++
		added[i] = rec{at: at, id: s.nextID, spam: f.rng.IntN(100) < spamPercent}
		prev = at
	}
	f.newest = prev
	f.live = append(f.live, added...)
	s.stats.Added += n
	return added
}

// addAtLocked inserts n submissions sharing createdAt at their sorted place.
func (s *Server) addAtLocked(f *form, createdAt time.Time, n int) []rec {
	at := createdAt.UnixMicro()
	// New ids are the largest, so the place is after every rec with at <= createdAt.
	pos := sort.Search(len(f.live), func(i int) bool { return f.live[i].at > at })
	added := make([]rec, n)
	for i := range n {
		s.nextID++
		added[i] = rec{at: at, id: s.nextID, spam: f.rng.IntN(100) < spamPercent}
	}
	f.live = append(f.live[:pos], append(added, f.live[pos:]...)...)
	f.newest = max(f.newest, at)
	s.stats.Added += n
	return added
}

// deleteLocked removes n pseudo-random live submissions in one pass.
func (s *Server) deleteLocked(f *form, n int) []rec {
	n = min(n, len(f.live))
	if n <= 0 {
		return nil
	}
	pick := make(map[int]bool, n)
	for len(pick) < n {
		pick[f.rng.IntN(len(f.live))] = true
	}
	removed := make([]rec, 0, n)
	kept := f.live[:0]
	for i, r := range f.live {
		if pick[i] {
			removed = append(removed, r)
			continue
		}
		kept = append(kept, r)
	}
	clear(f.live[len(kept):])
	f.live = kept
	f.gone = append(f.gone, removed...)
	s.stats.Deleted += n
	return removed
}

// SetSubmissions makes subs the live submissions of formID (creating the
// form), served as given rather than generated: what no generated form
// holds (a created_at in the year 9999, fields nested deeper than a sink
// takes, 2,000 field names, the same id at another time than before). A
// nil Fields or Files is served without that member. The ids are the
// caller's; submissions added later take ids above every id given. The
// submissions it replaces are not counted as deleted.
func (s *Server) SetSubmissions(formID string, subs ...Submission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.formLocked(formID)
	custom := make(map[int64]Submission, len(subs))
	live := make([]rec, 0, len(subs))
	for _, sub := range subs {
		at := sub.CreatedAt.UTC().UnixMicro()
		live = append(live, rec{at: at, id: sub.ID, spam: sub.IsSpam})
		custom[sub.ID] = sub
		f.newest = max(f.newest, at)
		s.nextID = max(s.nextID, sub.ID) // ids added later are new ones
	}
	slices.SortFunc(live, func(a, b rec) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id)) })
	f.live, f.custom = live, custom
}

// Add appends n new submissions to formID, created strictly after the newest
// (and not before Now), creating the form if unknown.
func (s *Server) Add(formID string, n int) []Submission {
	s.mu.Lock()
	f := s.formLocked(formID)
	added := s.render(f, f.custom, s.addLocked(f, max(n, 0)))
	s.mu.Unlock()
	s.notify(formID, added)
	return added
}

// AddAt inserts n submissions that all have createdAt: ties with existing
// submissions, or backdated inserts that land in the middle of the pages.
func (s *Server) AddAt(formID string, createdAt time.Time, n int) []Submission {
	s.mu.Lock()
	f := s.formLocked(formID)
	added := s.render(f, f.custom, s.addAtLocked(f, createdAt, max(n, 0)))
	s.mu.Unlock()
	s.notify(formID, added)
	return added
}

// AddCopy serves submission id of formID a second time under a new id:
// same created_at, is_spam, fields and files, as when a form is posted
// twice at once. In the older response form, which has no ids, the two
// cannot be told apart. It returns the copy; false if id is no live
// submission of formID.
func (s *Server) AddCopy(formID string, id int64) (Submission, bool) {
	c, ok := s.addCopy(formID, id)
	if ok {
		s.notify(formID, []Submission{c})
	}
	return c, ok
}

func (s *Server) addCopy(formID string, id int64) (Submission, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.forms[formID]
	if f == nil {
		return Submission{}, false
	}
	i := slices.IndexFunc(f.live, func(r rec) bool { return r.id == id })
	if i < 0 {
		return Submission{}, false
	}
	orig := f.live[i]
	s.nextID++
	c := rec{at: orig.at, id: s.nextID, spam: orig.spam, copyOf: orig.contentID()}
	// Its id is the largest: its place is after every rec sharing its created_at.
	pos := sort.Search(len(f.live), func(j int) bool { return f.live[j].at > c.at })
	f.live = slices.Insert(f.live, pos, c)
	s.stats.Added++
	return s.submission(f, f.custom, c, s.spec()), true
}

// Delete deletes n pseudo-random live submissions of formID and returns them.
func (s *Server) Delete(formID string, n int) []Submission {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.forms[formID]
	if f == nil {
		return nil
	}
	return s.render(f, f.custom, s.deleteLocked(f, n))
}

// Restore serves a deleted submission of formID again (an undelete: same
// id, created_at and content); false if no deleted submission has id.
func (s *Server) Restore(formID string, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.forms[formID]
	if f == nil {
		return false
	}
	for i, r := range f.gone {
		if r.id != id {
			continue
		}
		f.gone = append(f.gone[:i], f.gone[i+1:]...)
		at := sort.Search(len(f.live), func(j int) bool {
			l := f.live[j]
			return l.at > r.at || l.at == r.at && l.id > r.id
		})
		f.live = append(f.live, rec{})
		copy(f.live[at+1:], f.live[at:])
		f.live[at] = r
		return true
	}
	return false
}

// SetSpam sets the spam flag of submission id; false if there is no such
// live submission.
func (s *Server) SetSpam(formID string, id int64, spam bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.forms[formID]
	if f == nil {
		return false
	}
	for i := range f.live {
		if f.live[i].id == id {
			f.live[i].spam = spam
			return true
		}
	}
	return false
}

// liveOf returns form formID (nil when there is none), a copy of its live
// records and its submissions set by hand, under the lock.
func (s *Server) liveOf(formID string) (*form, []rec, map[int64]Submission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.forms[formID]
	if f == nil {
		return nil, nil, nil
	}
	return f, append([]rec(nil), f.live...), f.custom
}

// Submissions returns the live submissions of formID, oldest first.
func (s *Server) Submissions(formID string) []Submission {
	f, rs, custom := s.liveOf(formID)
	if f == nil {
		return nil
	}
	return s.render(f, custom, rs)
}

// Deleted returns every submission of formID ever deleted, in deletion order.
func (s *Server) Deleted(formID string) []Submission {
	s.mu.Lock()
	f := s.forms[formID]
	var rs []rec
	var custom map[int64]Submission
	if f != nil {
		rs, custom = append(rs, f.gone...), f.custom
	}
	s.mu.Unlock()
	if f == nil {
		return nil
	}
	return s.render(f, custom, rs)
}

// Len returns the number of live submissions of formID without rendering them.
func (s *Server) Len(formID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.forms[formID]; f != nil {
		return len(f.live)
	}
	return 0
}

// FormIDs returns the known form ids in creation order.
func (s *Server) FormIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.formIDs...)
}
