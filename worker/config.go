package worker

import (
	"cmp"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker/formsapi"
)

// Defaults of Config, applied to its zero fields.
const (
	DefaultPageSize      = formsapi.MaxLimit
	DefaultConcurrency   = 4
	DefaultFormTimeout   = 10 * time.Minute
	DefaultShutdownGrace = 20 * time.Second
	// FutureTolerance is how far in the future a created_at may lie and
	// still move the watermark.
	FutureTolerance = 24 * time.Hour
)

// Config tunes the engine. The zero value of each field means its default.
type Config struct {
	// Forms are the form ids to sync.
	Forms []string
	// PageSize is the limit asked per page, 1 to 100. Defaults to 100.
	PageSize int
	// Concurrency is how many forms are read at once; of each account,
	// when the Source reads forms through several ([Accounts]). Defaults
	// to 4.
	Concurrency int
	// FormTimeout bounds everything one form waits on in a run: requests,
	// retries, the rate limiter. A form past it fails for this run and
	// keeps its watermark; the others commit. Defaults to 10m.
	FormTimeout time.Duration
	// Lookback makes every sync re-read submissions newer than the watermark
	// minus Lookback, so that later changes (is_spam) are picked up.
	Lookback time.Duration
	// TmpDir is where rows are staged; "" is the system temporary directory.
	TmpDir string
	// ShutdownGrace is how long, once ctx is cancelled (SIGTERM), the
	// commits of what was read may still take: the parts queued and the
	// final commit of the forms read to their end, whether the signal came
	// before or during them. Defaults to 20s.
	ShutdownGrace time.Duration
	// Logger receives the per-form and per-run summaries. Defaults to a
	// logger that discards.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// ReconcileEvery makes a sync reconcile a form (read every page and
	// mark the stored rows no longer served as deleted) once that long has
	// passed since its last reconcile. 0, the default, never does: a
	// reconcile runs only when asked (Reconcile).
	ReconcileEvery time.Duration
	// FieldPolicy rewrites personal fields before anything is staged; nil
	// keeps every field as served.
	FieldPolicy FieldPolicy
	// PartRows makes a sync commit a form's rows in parts of this
	// many while it goes on reading the form, so that the sink writes
	// while the API is read rather than after; the form's last rows and
	// its new watermark are committed at the end of the run, only once
	// every part is. A run stopped half-way leaves the parts committed:
	// rows the next run reads again and finds unchanged. 0, the default,
	// commits every form's rows at the end of the run, in one commit. A
	// reconcile never commits in parts.
	PartRows int
	// SortContentKeys stages rows keyed by content (the older response
	// form) sorted by key, a MiB at a time (sink.Spool.SortContentKeys),
	// for a sink that inserts them faster in key order: SQLite.
	SortContentKeys bool
	// PartsByContent commits rows keyed by content in parts as well
	// (PartRows), for a sink that needs every transaction bounded:
	// BigQuery. Otherwise they are committed once, at the end of the run.
	PartsByContent bool
	// PartDays, when set, also ends a part (PartRows) and a backfill's
	// checkpoint once its rows span this many distinct days
	// (sink.Tuning.PartDays; see reading.partDue).
	PartDays int
	// CommitDays, when set, bounds the distinct days of the rows of the
	// run's final commit, every form's together (counted per form, a bound
	// on their union): the forms read to their end whose rows would take
	// it past are committed as parts first, largest spread first
	// (sink.Tuning.CommitDays; see spillDays). Needs PartRows.
	CommitDays int
	// StartJitter is the longest random wait before a sync or reconcile
	// reads anything, so that the pods of a sharded run started on one
	// tick do not all commit at the same moment (BigQuery cancels one of
	// two transactions on the same tables). 0, the default, starts at
	// once.
	StartJitter time.Duration
	// Jitter draws a wait in [0, max); default uniform (math/rand/v2).
	Jitter func(max time.Duration) time.Duration
	// Progress, when set, is told after every page a sync or a reconcile
	// reads how far that form got; it is called from the goroutines that
	// read the forms, concurrently. A backfill reports its own progress
	// (BackfillOptions.Progress).
	Progress func(Progress)
	// FieldTypes pins the type of fields' view columns, by form id and
	// field name, whatever type their values have (docs/types.md): every
	// commit of a form stores its pins as state.Form.FieldTypes.Pinned,
	// so a pin removed here is gone from the view at the form's next
	// commit. nil pins nothing.
	FieldTypes map[string]fieldtype.Set
	// Files, when set, keeps the files stored submissions name in a store
	// the user owns, after each run's commit (see Files). Nil: no file is
	// fetched.
	Files *Files
}

func (c Config) withDefaults() Config {
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.FormTimeout = cmp.Or(c.FormTimeout, DefaultFormTimeout)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, DefaultShutdownGrace)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Jitter == nil {
		c.Jitter = func(max time.Duration) time.Duration { return rand.N(max) }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every problem of the configuration at once (errors.Join
// of *config.FieldError, naming the fields of Config); zero fields stand
// for their defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, config.Errorf(field, format, args...))
	}
	if len(c.Forms) == 0 {
		bad("Forms", "no forms to sync")
	}
	if c.PageSize < 1 || c.PageSize > formsapi.MaxLimit {
		bad("PageSize", "%d is outside 1..%d", c.PageSize, formsapi.MaxLimit)
	}
	if c.Concurrency < 1 {
		bad("Concurrency", "%d is below 1", c.Concurrency)
	}
	if c.FormTimeout < 0 {
		bad("FormTimeout", "%s is negative", c.FormTimeout)
	}
	if c.Lookback < 0 {
		bad("Lookback", "%s is negative", c.Lookback)
	}
	if c.ShutdownGrace < 0 {
		bad("ShutdownGrace", "%s is negative", c.ShutdownGrace)
	}
	if c.ReconcileEvery < 0 {
		bad("ReconcileEvery", "%s is negative", c.ReconcileEvery)
	}
	if c.PartRows < 0 {
		bad("PartRows", "%d is negative", c.PartRows)
	}
	if c.StartJitter < 0 {
		bad("StartJitter", "%s is negative", c.StartJitter)
	}
	if f := c.Files; f != nil && (f.Store == nil || f.Workers < 0) {
		bad("Files", "needs a store and a worker count of 0 or more")
	}
	for _, form := range slices.Sorted(maps.Keys(c.FieldTypes)) {
		for _, field := range slices.Sorted(maps.Keys(c.FieldTypes[form])) {
			if _, err := fieldtype.Parse(string(c.FieldTypes[form][field])); err != nil {
				bad("FieldTypes", "form %s, field %q: %v", form, field, err)
			}
		}
	}
	return errors.Join(errs...)
}
