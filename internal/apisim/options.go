package apisim

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Variant is the response form the simulator speaks.
type Variant int

const (
	// Older: no id, created_at with 6 fractional digits, per_page fixed at 25
	// whatever limit asks, links {}.
	Older Variant = iota
	// Newer: id present, created_at with 3 fractional digits (truncated),
	// limit default 10 clamped to 1..100, links previous/next as full URLs or null.
	Newer
	// Live: what the live service sends, per its API reference: Newer's
	// paging, but the values under "data" (not "fields"), no files or
	// is_spam members, and a PHP pagination serialiser's links: [] for a
	// form of one page, previous/next absent (not null) on the first and
	// last pages.
	Live
)

// Order is the sort order of pages, which the API does not document.
type Order int

const (
	// NewestFirst serves (created_at, id) descending.
	NewestFirst Order = iota
	// OldestFirst serves (created_at, id) ascending.
	OldestFirst
)

// RetryAfterMode is the shape of the Retry-After header on a 429.
type RetryAfterMode int

const (
	RetryAfterSeconds RetryAfterMode = iota // delta seconds, at least 1
	RetryAfterDate                          // HTTP-date (http.TimeFormat)
	RetryAfterNone                          // header absent
	RetryAfterZero                          // "0"
	RetryAfterMixed                         // one of the four above, chosen per response
)

// NoSubmissions as Options.SubmissionsPerForm creates the forms empty (0
// means the default, 100).
const NoSubmissions = -1

// Options configure a Server. The zero value is usable: every field says its
// default.
type Options struct {
	// Seed drives all generated data, faults and mutations. Defaults to 0.
	Seed int64
	// Token is the bearer token clients must send. Defaults to "sim-token".
	Token string
	// Variant is the response form. Defaults to Older.
	Variant Variant
	// FormVariants overrides Variant per form id.
	FormVariants map[string]Variant
	// Order is the sort order. Defaults to NewestFirst.
	Order Order
	// Forms are the form ids created at start. Defaults to contact, signup, feedback.
	Forms []string
	// SubmissionsPerForm is the number of initial submissions per form.
	// Defaults to 100; NoSubmissions (any negative value) means none.
	SubmissionsPerForm int
	// FirstID is the id of the first submission created; each later one
	// gets the next. Defaults to 1001: ids start high, as they would on a
	// service with other customers. A form's ids crossing a power of ten
	// (1001 to 1,001,000 for a million) is what a sink keyed by the id as
	// text sees then.
	FirstID int64
	// Start is the created_at of the oldest initial submission. Defaults to
	// 2026-01-01T00:00:00Z, unless End is set.
	Start time.Time
	// End, when Start is zero, is the created_at of each form's newest
	// initial submission instead: its data ends there, so that it can be
	// dated near now (the simulate command does) whatever its size.
	End time.Time
	// Spacing is the mean gap between consecutive initial created_at values
	// (uniformly random, microsecond resolution). Defaults to 37s.
	Spacing time.Duration
	// TieEvery makes every Nth initial submission reuse the previous
	// created_at exactly. 0 means no forced ties.
	TieEvery int
	// ShuffleTies serves submissions that share a created_at as served
	// (the millisecond in the newer and live forms, the microsecond in the
	// older one) in another order on every request, as an ORDER BY
	// created_at with LIMIT and OFFSET may: a group split across two pages
	// can show some members on both and others on neither.
	ShuffleTies bool
	// RateLimit is the server-side requests per second (burst of one second's
	// worth, at least 1); excess requests get 429. 0 means unlimited.
	RateLimit float64
	// PlanLimit is the account plan's undisclosed limit: at most PlanLimit
	// requests per PlanWindow, counted the way Laravel's throttle middleware
	// counts them (a fixed window that opens at the first request and
	// closes PlanWindow later, in whole seconds). When it is set, every
	// authenticated response carries X-RateLimit-Limit and
	// X-RateLimit-Remaining, and a refused one Retry-After (seconds until
	// the window closes) and X-RateLimit-Reset (its unix time). 0 means no
	// plan limit. It applies on top of RateLimit.
	PlanLimit int
	// PlanWindow defaults to one minute (Laravel's throttle:60,1); it is
	// rounded up to whole seconds.
	PlanWindow time.Duration
	// RetryAfter is the Retry-After shape on 429s. Defaults to RetryAfterSeconds.
	RetryAfter RetryAfterMode
	// RateLimitFaults is the probability of a 429 whatever the rate.
	RateLimitFaults float64
	// Latency is added to every response that gets past auth, rate limit
	// and server errors; it ends early when the request's context does.
	Latency time.Duration
	// ServerErrors is the probability of a 500, 502 or 503.
	ServerErrors float64
	// Truncate is the probability of a body cut short: Content-Length
	// announces the whole body, part is sent, then the connection closes.
	Truncate float64
	// Stall is the probability of sending part of the body, then waiting
	// StallFor (or until the request's context ends) before the rest.
	Stall float64
	// StallFor defaults to 30s.
	StallFor time.Duration
	// MutateEvery mutates a form after every N pages of it served with 200:
	// AddPerMutation new submissions (newer than all) and DeletePerMutation
	// random existing ones deleted. 0 means never.
	MutateEvery       int
	AddPerMutation    int
	DeletePerMutation int
	// RevokeAfter revokes the token (Server.Revoke) once this many pages
	// have been served with 200: every later request is answered 401, as
	// when the account owner deletes the token during a run. 0 means never.
	RevokeAfter int
	// Now is the clock for rate limiting, Retry-After dates and the
	// created_at of added submissions. Defaults to time.Now.
	Now func() time.Time
	// Webhook, when set, is the form service's per-form webhook: a URL
	// with {form} where the form id goes (CheckWebhook: http, a loopback
	// host). Every submission added after New (Add, AddAt, AddCopy, a
	// mutation) is followed, once it is served, by one POST of the
	// service's body, {"payload": {fields}, "files": {}}, with no
	// signature and no form id in it. Sends are asynchronous and never
	// block the add; each is bounded by WebhookTimeout, and a failure is
	// counted (Stats.WebhooksFailed), never retried. New panics on a URL
	// CheckWebhook refuses.
	Webhook string
	// Files shapes the files generated submissions carry, which the
	// server serves itself under FilesPath (see FileOptions).
	Files FileOptions
}

// Faults are the fault settings that can change while the server runs
// (Server.SetFaults); each field means what the Options field of that name does.
type Faults struct {
	RateLimit       float64
	RetryAfter      RetryAfterMode
	RateLimitFaults float64
	Latency         time.Duration
	ServerErrors    float64
	Truncate        float64
	Stall           float64
	StallFor        time.Duration
}

// DefaultForms are the form ids used when Options.Forms is empty.
var DefaultForms = []string{"contact", "signup", "feedback"}

// DefaultToken is the bearer token used when Options.Token is empty.
const DefaultToken = "sim-token"

var defaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (o Options) withDefaults() Options {
	o.Token = cmp.Or(o.Token, DefaultToken)
	if len(o.Forms) == 0 {
		o.Forms = DefaultForms
	}
	o.Forms = append([]string(nil), o.Forms...)
	switch {
	case o.SubmissionsPerForm == 0:
		o.SubmissionsPerForm = 100
	case o.SubmissionsPerForm < 0:
		o.SubmissionsPerForm = 0
	}
	if o.FirstID <= 0 {
		o.FirstID = 1001
	}
	if o.Start.IsZero() && o.End.IsZero() {
		o.Start = defaultStart
	}
	if !o.Start.IsZero() {
		o.Start, o.End = o.Start.UTC().Truncate(time.Microsecond), time.Time{}
	}
	o.End = o.End.UTC().Truncate(time.Microsecond)
	o.Spacing = cmp.Or(o.Spacing, 37*time.Second)
	o.StallFor = cmp.Or(o.StallFor, 30*time.Second)
	o.PlanWindow = max(time.Second, cmp.Or(o.PlanWindow, time.Minute))
	if o.PlanWindow%time.Second != 0 {
		o.PlanWindow += time.Second - o.PlanWindow%time.Second
	}
	o.FormVariants = maps.Clone(o.FormVariants)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Files = o.Files.withDefaults()
	return o
}

// Faults returns the fault settings of o.
func (o Options) Faults() Faults {
	return Faults{
		RateLimit:       o.RateLimit,
		RetryAfter:      o.RetryAfter,
		RateLimitFaults: o.RateLimitFaults,
		Latency:         o.Latency,
		ServerErrors:    o.ServerErrors,
		Truncate:        o.Truncate,
		Stall:           o.Stall,
		StallFor:        cmp.Or(o.StallFor, 30*time.Second),
	}
}

func (v Variant) String() string {
	switch v {
	case Older:
		return "older"
	case Newer:
		return "newer"
	case Live:
		return "live"
	}
	return "Variant(" + strconv.Itoa(int(v)) + ")"
}

// MarshalText and UnmarshalText let Variant be a flag.TextVar.
func (v Variant) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

func (v *Variant) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "older", "old":
		*v = Older
	case "newer", "new":
		*v = Newer
	case "live":
		*v = Live
	default:
		return fmt.Errorf("variant %q: want older, newer or live", b)
	}
	return nil
}

func (o Order) String() string {
	switch o {
	case NewestFirst:
		return "newest"
	case OldestFirst:
		return "oldest"
	}
	return "Order(" + strconv.Itoa(int(o)) + ")"
}

func (o Order) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

func (o *Order) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "newest", "newest-first", "desc":
		*o = NewestFirst
	case "oldest", "oldest-first", "asc":
		*o = OldestFirst
	default:
		return fmt.Errorf("order %q: want newest or oldest", b)
	}
	return nil
}

func (m RetryAfterMode) String() string {
	switch m {
	case RetryAfterSeconds:
		return "seconds"
	case RetryAfterDate:
		return "date"
	case RetryAfterNone:
		return "none"
	case RetryAfterZero:
		return "zero"
	case RetryAfterMixed:
		return "mixed"
	}
	return "RetryAfterMode(" + strconv.Itoa(int(m)) + ")"
}

func (m RetryAfterMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

func (m *RetryAfterMode) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "seconds":
		*m = RetryAfterSeconds
	case "date":
		*m = RetryAfterDate
	case "none":
		*m = RetryAfterNone
	case "zero":
		*m = RetryAfterZero
	case "mixed":
		*m = RetryAfterMixed
	default:
		return fmt.Errorf("retry-after %q: want seconds, date, none, zero or mixed", b)
	}
	return nil
}

// formList is the -forms flag: comma-separated form ids.
type formList struct{ forms *[]string }

func (f formList) String() string {
	if f.forms == nil {
		return ""
	}
	return strings.Join(*f.forms, ",")
}

func (f formList) Set(s string) error {
	var ids []string
	for id := range strings.SplitSeq(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("forms %q: want at least one form id", s)
	}
	*f.forms = ids
	return nil
}

// formVariants is the -form-variant flag: comma-separated form=variant
// pairs, repeatable.
type formVariants struct{ m *map[string]Variant }

func (f formVariants) String() string {
	if f.m == nil || len(*f.m) == 0 {
		return ""
	}
	var pairs []string
	for _, id := range slices.Sorted(maps.Keys(*f.m)) {
		pairs = append(pairs, id+"="+(*f.m)[id].String())
	}
	return strings.Join(pairs, ",")
}

func (f formVariants) Set(s string) error {
	for pair := range strings.SplitSeq(s, ",") {
		id, name, ok := strings.Cut(strings.TrimSpace(pair), "=")
		var v Variant
		if !ok || id == "" {
			return fmt.Errorf("form variant %q: want form=older|newer|live", pair)
		}
		if err := v.UnmarshalText([]byte(name)); err != nil {
			return fmt.Errorf("form variant %q: %w", pair, err)
		}
		if *f.m == nil {
			*f.m = map[string]Variant{}
		}
		(*f.m)[id] = v
	}
	return nil
}

// secretString is a string flag whose value --help never prints.
type secretString struct{ s *string }

func (secretString) String() string { return "" }

func (v secretString) Set(s string) error {
	*v.s = s
	return nil
}

// submissionCount is the -submissions flag: 0 means none (unlike the
// Options field, where 0 means the default).
type submissionCount struct{ n *int }

func (c submissionCount) String() string {
	if c.n == nil {
		return "0"
	}
	return strconv.Itoa(max(*c.n, 0))
}

func (c submissionCount) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("submissions %q: want a whole number >= 0", s)
	}
	if n == 0 {
		n = NoSubmissions
	}
	*c.n = n
	return nil
}

// RegisterFlags registers the simulator's flags on fs, writing into o. The
// defaults shown are o's current values with the documented defaults filled
// in (Now is not a flag). -submissions 0 means no submissions.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	d := o.withDefaults()
	o.Token, o.Forms, o.SubmissionsPerForm = d.Token, d.Forms, cmp.Or(d.SubmissionsPerForm, NoSubmissions)
	o.Spacing, o.StallFor, o.PlanWindow, o.FirstID = d.Spacing, d.StallFor, d.PlanWindow, d.FirstID
	o.Files.SlowFor, o.Files.LargeSize = d.Files.SlowFor, d.Files.LargeSize
	if o.Start.IsZero() && o.End.IsZero() {
		// Unless -start says otherwise, the data ends a minute before
		// the simulator starts: a sync's lag then reads as it would
		// against a form in use, not as months.
		o.End = time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	}

	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed for generated submissions, faults and mutations")
	// Secrets never appear in --help, even a simulator's token.
	fs.Var(secretString{&o.Token}, "token", "bearer token clients must send (default "+DefaultToken+" when unset)")
	fs.TextVar(&o.Variant, "variant", o.Variant, "response form: older|newer|live")
	fs.Var(formVariants{&o.FormVariants}, "form-variant", "per-form response form, e.g. contact=live,signup=older (repeatable)")
	fs.TextVar(&o.Order, "order", o.Order, "sort order: newest|oldest")
	fs.Var(formList{&o.Forms}, "forms", "comma-separated form ids")
	fs.Var(submissionCount{&o.SubmissionsPerForm}, "submissions", "initial submissions per form")
	fs.Int64Var(&o.FirstID, "first-id", o.FirstID, "id of the first submission created (later ones count up from it)")
	fs.TextVar(&o.Start, "start", o.Start, "created_at of the oldest initial submission (RFC 3339; default: each form's newest a minute before the simulator starts)")
	fs.DurationVar(&o.Spacing, "spacing", o.Spacing, "mean gap between initial created_at values")
	fs.IntVar(&o.TieEvery, "tie-every", o.TieEvery, "every Nth submission shares the previous created_at (0 = none)")
	fs.BoolVar(&o.ShuffleTies, "shuffle-ties", o.ShuffleTies, "serve submissions sharing a created_at (as served) in another order on every request")
	fs.Float64Var(&o.RateLimit, "rate-limit", o.RateLimit, "requests per second before 429 (0 = unlimited)")
	fs.IntVar(&o.PlanLimit, "plan-limit", o.PlanLimit, "undisclosed plan limit: requests per -plan-window, with X-RateLimit-* headers (0 = none)")
	fs.DurationVar(&o.PlanWindow, "plan-window", o.PlanWindow, "the plan limit's fixed window (whole seconds)")
	fs.TextVar(&o.RetryAfter, "retry-after", o.RetryAfter, "Retry-After on 429: seconds|date|none|zero|mixed")
	fs.Float64Var(&o.RateLimitFaults, "rate-limit-faults", o.RateLimitFaults, "probability of a 429 whatever the rate")
	fs.DurationVar(&o.Latency, "latency", o.Latency, "latency added to every response")
	fs.Float64Var(&o.ServerErrors, "server-errors", o.ServerErrors, "probability of a 500/502/503")
	fs.Float64Var(&o.Truncate, "truncate", o.Truncate, "probability of a truncated body")
	fs.Float64Var(&o.Stall, "stall", o.Stall, "probability of a body that stalls midway")
	fs.DurationVar(&o.StallFor, "stall-for", o.StallFor, "how long a stalled body stalls")
	fs.IntVar(&o.MutateEvery, "mutate-every", o.MutateEvery, "mutate a form after every N pages served (0 = never)")
	fs.IntVar(&o.AddPerMutation, "add", o.AddPerMutation, "submissions added per mutation")
	fs.IntVar(&o.DeletePerMutation, "delete", o.DeletePerMutation, "submissions deleted per mutation")
	fs.IntVar(&o.Files.Every, "files-every", o.Files.Every, "give files to the submissions whose id is a multiple of N (1 = all, -1 = none, 0 = about one in ten)")
	fs.IntVar(&o.Files.PerSubmission, "files-per-submission", o.Files.PerSubmission, "files of a submission that has files, 1 to 3 (0 = one or two)")
	fs.Int64Var(&o.Files.Size, "file-size", o.Files.Size, "every file's size in bytes (0 = 1 to 8 KiB each)")
	fs.Float64Var(&o.Files.Expired, "file-expired", o.Files.Expired, "share of files answered 404 or 410, as expired at the service")
	fs.Float64Var(&o.Files.Slow, "file-slow", o.Files.Slow, "share of files whose body waits -file-slow-for after the headers")
	fs.DurationVar(&o.Files.SlowFor, "file-slow-for", o.Files.SlowFor, "how long a slow file's body waits")
	fs.Float64Var(&o.Files.TooLarge, "file-too-large", o.Files.TooLarge, "share of files declared and served at -file-large-size")
	fs.Int64Var(&o.Files.LargeSize, "file-large-size", o.Files.LargeSize, "size in bytes of a too-large file")
	fs.Float64Var(&o.Files.Redirect, "file-redirect", o.Files.Redirect, "share of files answered with a redirect to another path of the simulator")
	fs.Float64Var(&o.Files.SizeMismatch, "file-size-mismatch", o.Files.SizeMismatch, "share of files served at half or twice their declared size")
	fs.Func("webhook", "POST the service's webhook for every submission added, to this URL with {form} for the form id (http, loopback only), e.g. http://127.0.0.1:8081/hooks/SECRET/{form}", func(v string) error {
		if err := CheckWebhook(v); err != nil {
			return err
		}
		o.Webhook = v
		return nil
	})
}
