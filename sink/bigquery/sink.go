package bigquery

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/cenkalti/backoff/v4"
	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state/fieldtype"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
)

const (
	submissionsTable = "submissions"
	stateTable       = "sync_state"
	lockTable        = "sync_lock"
	tombstonesTable  = "sync_tombstones"
)

// Config says where the sink writes. Zero fields take their defaults.
type Config struct {
	// Project is the Google Cloud project that holds the dataset and runs
	// the jobs. FORMSYNC_BQ_PROJECT, required.
	Project string
	// Dataset holds formsync's tables. FORMSYNC_BQ_DATASET, default
	// "formsync".
	Dataset string
	// Location is where the dataset is created and the jobs run.
	// FORMSYNC_BQ_LOCATION, default "US".
	Location string
	// Endpoint is the base URL of a BigQuery emulator or fake (e.g.
	// "http://127.0.0.1:9050", with or without the API's path
	// "/bigquery/v2/"); empty for Google's. The client does not read
	// BIGQUERY_EMULATOR_HOST. FORMSYNC_BQ_ENDPOINT, optional. Credentials
	// are sent to an https endpoint that is not on a loopback host (a
	// regional endpoint, Private Service Connect), and to no other.
	Endpoint string
	// StagingTable is the prefix of the staging tables: each commit loads
	// its rows into a table of its own, <StagingTable>_<commit id>, in
	// StagingDataset, created just before its load job with an expiration
	// of StagingExpiration and deleted once the commit is over, so that
	// nothing one process loads can be merged by another (a shard, a
	// backfill, a retried commit). Default "_formsync_staging". (It named one shared
	// table before; a value from that time still works as a prefix.)
	StagingTable string
	// StagingDataset holds the staging tables; Open creates it with a
	// default table expiration of StagingExpiration, so that a table left
	// behind by a crash disappears without any DDL from formsync. Default
	// "<Dataset>_staging". The service account needs
	// roles/bigquery.dataEditor on it too.
	StagingDataset string
	// StagingExpiration is how long a staging table outlives its
	// creation if its commit could not delete it (a crash): each table's
	// own expiration, whoever made the staging dataset, and the dataset's
	// default table expiration when Open creates it. Default 6 hours.
	StagingExpiration time.Duration
	// ClientOptions are passed to the BigQuery client after the endpoint
	// options when Endpoint is an emulator's (http, or a loopback host:
	// tests); otherwise they configure the credentials of the sink's own
	// transport (option.WithCredentialsFile
	// and the like; option.WithHTTPClient is refused, as it would drop the
	// bounds of Timeout).
	ClientOptions []option.ClientOption
	// UploadChunkSize, when positive, is the resumable upload chunk size;
	// uploads up to it go in one multipart request. Default 16 MiB (the
	// client's).
	UploadChunkSize int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// PollInterval is how often a running job is polled. Default 1s.
	PollInterval time.Duration
	// JobTimeout bounds the wait for one job (a load, a commit's
	// transaction); a job still running then is cancelled and its step
	// fails. A large read is committed in parts (PartRows) so that each
	// transaction fits in it. FORMSYNC_BQ_JOB_TIMEOUT, default 10 minutes.
	JobTimeout time.Duration
	// PartRows is how many rows of one form a sync stages before it
	// commits them as a part while it reads on (Sink.Tuning): a form that
	// reads fewer in a run is committed with the others, in the run's one
	// load job. FORMSYNC_BQ_PART_ROWS, default DefaultPartRows (100,000).
	PartRows int
	// Timeout bounds how long BigQuery may fail to answer: the dial and
	// the wait for a response's headers once a request is sent, and, for
	// each operation (Open, ReadState, Commit, ...), a run of failed
	// requests (refused or unanswered connections, 5xx, 429) with no
	// successful answer in between. Past it the operation fails with
	// ErrUnavailable, naming the endpoint. A job that runs long is not cut
	// off: its polls are answered. FORMSYNC_BQ_TIMEOUT, default 2 minutes.
	Timeout time.Duration
	// Observer, when set, is told of every failed request (Event), each
	// of which is tried again until Timeout is spent.
	Observer func(Event)
	// RetryInitial is the first pause before retrying a transient failure
	// (doubling, with jitter, up to RetryMaxInterval). Default 1s.
	RetryInitial time.Duration
	// MaxRetries bounds the retries of one step (upload, load, transaction).
	// Default 5.
	MaxRetries int
	// RetryMaxInterval is the longest pause between retries. Default 30s.
	RetryMaxInterval time.Duration
	// ConcurrentRetryTime bounds how long one commit's transaction is run
	// again after BigQuery cancelled it for a concurrent update of the
	// same tables (another shard or a backfill committing at the same
	// time): a time, not a count, so that a long transaction that loses
	// to short ones again and again is not given up on before they are
	// done. Default 30 minutes.
	ConcurrentRetryTime time.Duration
	// Logger is told what works but costs more than it should (a table
	// clustered otherwise than formsync clusters it). Default: discarded.
	Logger *slog.Logger
}

var (
	projectRE = regexp.MustCompile(`^[a-z0-9][a-z0-9\-:.]{0,127}$`)
	datasetRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	// locationRE is a multi-region (US, EU) or a region (us-central1).
	locationRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,62}[A-Za-z0-9]$`)
	tableRE    = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 2 * time.Minute

// DefaultJobTimeout is Config.JobTimeout's default.
const DefaultJobTimeout = 10 * time.Minute

func (c Config) withDefaults() Config {
	c.Dataset = cmp.Or(c.Dataset, "formsync")
	c.Location = cmp.Or(c.Location, "US")
	c.StagingTable = cmp.Or(c.StagingTable, "_formsync_staging")
	c.StagingDataset = cmp.Or(c.StagingDataset, c.Dataset+"_staging")
	c.StagingExpiration = cmp.Or(c.StagingExpiration, 6*time.Hour)
	c.ConcurrentRetryTime = cmp.Or(c.ConcurrentRetryTime, 30*time.Minute)
	c.RetryMaxInterval = cmp.Or(c.RetryMaxInterval, 30*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultJobTimeout)
	c.PartRows = cmp.Or(c.PartRows, DefaultPartRows)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.RetryInitial = cmp.Or(c.RetryInitial, time.Second)
	c.MaxRetries = cmp.Or(c.MaxRetries, 5)
	return c
}

// Validate reports every problem of c at once (errors.Join of
// *config.FieldError, naming the fields of Config, wrapped), its zero
// fields standing for their defaults: what Open refuses, for a caller to
// check settings before it connects. Identifiers are checked strictly
// because they are spliced into SQL text.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, config.Errorf(field, format, args...))
	}
	if c.Project == "" {
		bad("Project", "is required")
	} else if !projectRE.MatchString(c.Project) {
		bad("Project", "%q is not a project id (lower-case letters, digits, '-', ':' and '.')", c.Project)
	}
	if !datasetRE.MatchString(c.Dataset) {
		bad("Dataset", "%q is not a dataset name (letters, digits and '_')", c.Dataset)
	}
	if !tableRE.MatchString(c.StagingTable) || c.StagingTable == submissionsTable || c.StagingTable == stateTable {
		bad("StagingTable", "%q must be letters, digits and '_', and not %s or %s", c.StagingTable, submissionsTable, stateTable)
	}
	// A staging dataset named after a bad dataset is the same problem.
	if datasetRE.MatchString(c.Dataset) && (!datasetRE.MatchString(c.StagingDataset) || c.StagingDataset == c.Dataset) {
		bad("StagingDataset", "%q must be letters, digits and '_', and not the dataset itself", c.StagingDataset)
	}
	if c.StagingExpiration < time.Hour {
		bad("StagingExpiration", "%v must be at least an hour (a commit's table must outlive its retries)", c.StagingExpiration)
	}
	if !locationRE.MatchString(c.Location) {
		bad("Location", "%q is not a location (a multi-region such as US or EU, or a region such as us-central1)", c.Location)
	}
	if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
		bad("Endpoint", "%q must be an http(s) URL", c.Endpoint)
	}
	if c.MaxRetries < 0 {
		bad("MaxRetries", "must not be negative")
	}
	if c.Timeout < 0 {
		bad("Timeout", "must not be negative")
	}
	if c.ConcurrentRetryTime < 0 {
		bad("ConcurrentRetryTime", "must not be negative")
	}
	if c.RetryMaxInterval < 0 {
		bad("RetryMaxInterval", "must not be negative")
	}
	if c.JobTimeout < 0 {
		bad("JobTimeout", "must not be negative")
	}
	if c.PartRows < 0 {
		bad("PartRows", "must not be negative")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bigquery: invalid configuration: %w", err)
	}
	return nil
}

var _ sink.Sink = (*Sink)(nil)

// Sink is the BigQuery destination. It is safe for concurrent use: each
// commit has a staging table of its own, and BigQuery itself refuses (and
// the sink retries) transactions that would overlap.
type Sink struct {
	cfg    Config
	client *bq.Client
	scope  errorScope
	t      tables
	// aborted counts transactions BigQuery cancelled for a concurrent
	// update, rerun counts the transactions run again after one; tests
	// and logs read them.
	aborted, rerun atomic.Int64
	// views holds, per form, the view this Sink knows to be in place: one
	// it made for a commit that then succeeded, or one it read back. A
	// form missing here, or known for longer than viewRecheck, has its
	// view's metadata read before a commit trusts it (Sink.viewInPlace).
	viewsMu sync.Mutex
	views   map[string]knownView
	// scrub are the rows forgotten by this Sink's commits that Purge has
	// not yet removed from the staging tables.
	scrubMu sync.Mutex
	scrub   []forgetParam
	// stateWithoutCopies: a read-only Sink (OpenReadOnly) found sync_state
	// without one of readOnlyNullColumns, which ReadState then reads as
	// NULL.
	stateWithoutCopies bool
	// withoutTombstones: a read-only Sink found no sync_tombstones table
	// (no sync of this formsync has run yet); the tombstones are all in
	// sync_state.forgotten then.
	withoutTombstones bool
	// withoutFileCopies: a read-only Sink found no
	// submission_file_copies table (no sync of this formsync has run
	// yet): FileRows reads every file pending, NamedDigests names none.
	withoutFileCopies bool
}

// Open connects to BigQuery and creates what is missing: the dataset (in
// Location), the submissions, sync_state, sync_lock and sync_tombstones
// tables, the staging dataset, the submission_files view (made again when
// its definition changed), and the columns added since a table was
// created (with, once, the forms' views recreated to leave out rows
// deleted upstream, and the tombstones moved out of sync_state). When all exist it only
// reads their metadata: no DDL in the steady state.
func Open(ctx context.Context, cfg Config) (*Sink, error) {
	s, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.guard(ctx, s.ensureSchema); err != nil {
		s.client.Close()
		return nil, err
	}
	return s, nil
}

// OpenReadOnly connects to a dataset formsync has written, to read its
// state: it creates and migrates nothing, so a mistyped dataset or project
// is an error (ErrNotFound) rather than a new, empty dataset that looks
// like nothing was synced yet. A sync_state table that lacks only the
// columns added last (readOnlyNullColumns: copies, max_submission_id,
// field_types; no sync of this formsync has migrated it yet) is read with
// them as NULL, so that
// `formsync status` works right after an upgrade, as it does on SQLite;
// one that lacks more is refused with ErrOlderSchema. A dataset without
// submission_file_copies yet reads every file pending (FileRows).
func OpenReadOnly(ctx context.Context, cfg Config) (*Sink, error) {
	s, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	tbl := s.dataset().Table(stateTable)
	res := "table " + s.cfg.Project + "." + s.cfg.Dataset + "." + stateTable
	if err := s.guard(ctx, func(ctx context.Context) error {
		return s.retry(ctx, func() error {
			meta, err := tbl.Metadata(ctx)
			if err != nil {
				return s.scope.classify("reading table metadata", res, err)
			}
			// A table is where its dataset is.
			if err := s.checkLocation("dataset "+s.cfg.Project+"."+s.cfg.Dataset, meta.Location); err != nil {
				return err
			}
			lacks := func(c string) bool { return lacksAny(meta.Schema, []string{c}) }
			for _, c := range addedStateColumns {
				if !slices.Contains(readOnlyNullColumns, c) && lacks(c) {
					return backoff.Permanent(fmt.Errorf("bigquery: %s lacks columns this formsync reads: %w; a sync (which adds them) must run first", res, ErrOlderSchema))
				}
			}
			s.stateWithoutCopies = lacksAny(meta.Schema, readOnlyNullColumns)
			_, err = s.dataset().Table(tombstonesTable).Metadata(ctx)
			if isNotFound(err) {
				s.withoutTombstones, err = true, nil
			}
			if err != nil {
				return s.scope.classify("reading table metadata", "table "+s.cfg.Project+"."+s.cfg.Dataset+"."+tombstonesTable, err)
			}
			_, err = s.dataset().Table(sink.FilesTable).Metadata(ctx)
			if isNotFound(err) {
				s.withoutFileCopies, err = true, nil
			}
			return s.scope.classify("reading table metadata", "table "+s.cfg.Project+"."+s.cfg.Dataset+"."+sink.FilesTable, err)
		})
	}); err != nil {
		s.client.Close()
		if errors.Is(err, ErrNotFound) {
			// The hint of a missing table, that a sync creates it, is
			// for a sync; this message says what to check instead.
			var be *Error
			if errors.As(err, &be) {
				be.Hint = ""
			}
			return nil, fmt.Errorf("bigquery: %s does not exist: formsync has not synced into dataset %s of project %s (check FORMSYNC_BQ_PROJECT and FORMSYNC_BQ_DATASET%s): %w", res, s.cfg.Dataset, s.cfg.Project, s.scope.endpointNamed(), err)
		}
		return nil, err
	}
	return s, nil
}

// checkLocation refuses a dataset that is not in Config.Location: every
// job runs there, and BigQuery answers a job that reads or writes a
// dataset elsewhere with "Not found: Dataset ... was not found in
// location ...", after the pages were read, on every run.
func (s *Sink) checkLocation(res, location string) error {
	if location == "" || strings.EqualFold(location, s.cfg.Location) {
		return nil
	}
	return &Error{
		Op: "checking the dataset's location", Resource: res, Kind: ErrInvalid,
		Err:  fmt.Errorf("the dataset is in %s, but jobs run in %s and cannot use it", location, s.cfg.Location),
		Hint: fmt.Sprintf("set FORMSYNC_BQ_LOCATION=%s (formsync's datasets, the staging one included, must share one location)", location),
	}
}

// apiRoot is the server an Endpoint names, without the API's path: the
// endpoint may be given bare ("http://127.0.0.1:9050") or as the Go
// client's own option takes it (".../bigquery/v2/").
func apiRoot(endpoint string) string {
	e := strings.TrimSuffix(endpoint, "/")
	return strings.TrimSuffix(strings.TrimSuffix(e, "/bigquery/v2"), "/")
}

// connect validates cfg and creates the client.
func connect(ctx context.Context, cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Sink{cfg: cfg}
	rt, err := transport(ctx, cfg, s.endpointName())
	if err != nil {
		return nil, err
	}
	// The client's own transport would leave requests unbounded; this one
	// carries the credentials when they are needed (transport).
	opts := []option.ClientOption{option.WithHTTPClient(&http.Client{Transport: rt})}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(apiRoot(cfg.Endpoint)+"/bigquery/v2/"))
		if !sendsCredentials(cfg.Endpoint) {
			opts = append(opts, cfg.ClientOptions...)
		}
	}
	client, err := bq.NewClient(ctx, cfg.Project, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigquery: creating client for project %s: %w", cfg.Project, err)
	}
	client.Location = cfg.Location
	s.client = client
	s.scope = errorScope{Project: cfg.Project, Dataset: cfg.Dataset, StagingDataset: cfg.StagingDataset, Endpoint: cfg.Endpoint}
	s.t = tables{
		Submissions: ref(cfg.Project, cfg.Dataset, submissionsTable),
		State:       ref(cfg.Project, cfg.Dataset, stateTable),
		Lock:        ref(cfg.Project, cfg.Dataset, lockTable),
		Tombstones:  ref(cfg.Project, cfg.Dataset, tombstonesTable),
		Copies:      ref(cfg.Project, cfg.Dataset, sink.FilesTable),
	}
	return s, nil
}

// Close releases the client.
func (s *Sink) Close() error {
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("bigquery: closing client: %w", err)
	}
	return nil
}

func (s *Sink) dataset() *bq.Dataset { return s.client.Dataset(s.cfg.Dataset) }

func submissionsSchema() bq.Schema {
	return bq.Schema{
		{Name: "form_id", Type: bq.StringFieldType, Required: true},
		{Name: "submission_id", Type: bq.IntegerFieldType},
		{Name: "submission_key", Type: bq.StringFieldType, Required: true},
		{Name: "created_at", Type: bq.TimestampFieldType, Required: true},
		{Name: "is_spam", Type: bq.BooleanFieldType, Required: true},
		{Name: "fields", Type: bq.JSONFieldType},
		{Name: "files", Type: bq.JSONFieldType},
		{Name: "synced_at", Type: bq.TimestampFieldType, Required: true},
		// Added after the first release: nullable, appended by migrate.
		{Name: "raw", Type: bq.StringFieldType, Description: "the submission object exactly as the API sent it (NULL for rows stored before it was kept)"},
		{Name: "fields_text", Type: bq.StringFieldType, Description: "fields as exact JSON text when the JSON column had to round a number (NULL otherwise)"},
		{Name: "files_text", Type: bq.StringFieldType, Description: "files as exact JSON text when the JSON column had to round a number (NULL otherwise)"},
		{Name: "deleted_at", Type: bq.TimestampFieldType, Description: "when a reconcile found the submission no longer served upstream (NULL while it is)"},
	}
}

// addedSubmissionColumns are the columns migrate appends to a submissions
// table created before them.
var addedSubmissionColumns = []string{"raw", "fields_text", "files_text", "deleted_at"}

func stateSchema() bq.Schema {
	return bq.Schema{
		{Name: "form_id", Type: bq.StringFieldType, Required: true},
		{Name: "wm_created_at", Type: bq.TimestampFieldType},
		{Name: "wm_id", Type: bq.IntegerFieldType},
		{Name: "boundary", Type: bq.JSONFieldType, Description: "watermark boundary keys (JSON array of strings)"},
		{Name: "sort_order", Type: bq.StringFieldType},
		{Name: "last_total", Type: bq.IntegerFieldType},
		{Name: "row_count", Type: bq.IntegerFieldType, Description: "rows stored for the form and not marked deleted upstream"},
		{Name: "field_names", Type: bq.JSONFieldType},
		{Name: "last_success_at", Type: bq.TimestampFieldType},
		{Name: "last_error_at", Type: bq.TimestampFieldType},
		{Name: "last_error", Type: bq.StringFieldType},
		{Name: "backfill", Type: bq.JSONFieldType},
		{Name: "updated_at", Type: bq.TimestampFieldType, Required: true},
		{Name: "revision", Type: bq.IntegerFieldType, Description: "commits that wrote this state (NULL, from before it was kept, reads as 0)"},
		{Name: "deleted_count", Type: bq.IntegerFieldType, Description: "rows marked deleted upstream (NULL, from before it was kept, reads as 0)"},
		{Name: "last_reconcile_at", Type: bq.TimestampFieldType, Description: "when a reconcile of the form last committed"},
		{Name: "field_policy", Type: bq.StringFieldType, Description: "identity of the field policy the form's rows were stored under"},
		{Name: "forgotten", Type: bq.JSONFieldType, Description: "tombstones of submissions forgotten on request (salt, keyed hashes, count)"},
		{Name: "last_commit", Type: bq.JSONFieldType, Description: "the last commit that wrote this state: its id (the prefix of its job ids) and what it did to the form's rows"},
		{Name: "copies", Type: bq.JSONFieldType, Description: "submissions served more than once with nothing to tell them apart (no id, same created_at and content): content key to how many more times a page held it"},
		{Name: "max_submission_id", Type: bq.IntegerFieldType, Description: "no stored row of the form has a larger submission_id (NULL: not known yet); a commit whose ids are all larger need not look for them outside its created_at range"},
		{Name: "field_types", Type: bq.JSONFieldType, Description: "the type of each field's view column: the types seen, which only widen, and the types pinned ({\"seen\": {...}, \"pinned\": {...}}; NULL: every column is a STRING)"},
	}
}

var addedStateColumns = []string{"revision", "deleted_count", "last_reconcile_at", "field_policy", "forgotten", "last_commit", "copies", "max_submission_id", "field_types"}

// readOnlyNullColumns are the sync_state columns a read-only Sink reads
// as NULL when a sync of this formsync has not added them yet.
var readOnlyNullColumns = []string{"copies", "max_submission_id", "field_types"}

// deletionStateColumns are the sync_state columns added with deleted_at. A
// sync_state table without them belongs to a dataset whose views were
// created before the views left out rows deleted upstream: Open recreates
// every form's view before adding them, so that their presence says the
// views were recreated (an Open interrupted in between does it again).
var deletionStateColumns = []string{"deleted_count", "last_reconcile_at", "field_policy", "forgotten"}

// stagingSchema is one NDJSON line of a sink.Spool, numbered (seq) as it
// is uploaded.
func stagingSchema() bq.Schema {
	return bq.Schema{
		{Name: "seq", Type: bq.IntegerFieldType, Required: true},
		{Name: "form_id", Type: bq.StringFieldType, Required: true},
		{Name: "submission_id", Type: bq.IntegerFieldType},
		{Name: "submission_key", Type: bq.StringFieldType, Required: true},
		{Name: "content_key", Type: bq.StringFieldType, Required: true},
		{Name: "created_at", Type: bq.TimestampFieldType, Required: true},
		{Name: "is_spam", Type: bq.BooleanFieldType, Required: true},
		{Name: "fields", Type: bq.StringFieldType, Required: true},
		{Name: "files", Type: bq.StringFieldType, Required: true},
		{Name: "raw", Type: bq.StringFieldType},
	}
}

// ensureDatasets makes the dataset and the staging dataset where they are
// missing, in Config.Location. Both are looked at before either is made:
// one that exists elsewhere is refused (jobs run in Config.Location and
// cannot use it) before the other is made in the wrong place.
func (s *Sink) ensureDatasets(ctx context.Context) error {
	type dataset struct {
		name string
		meta *bq.DatasetMetadata
	}
	var missing []dataset
	for _, d := range []dataset{
		{s.cfg.Dataset, &bq.DatasetMetadata{Location: s.cfg.Location, Description: "formsync: form submissions and sync state"}},
		{s.cfg.StagingDataset, &bq.DatasetMetadata{
			Location:               s.cfg.Location,
			DefaultTableExpiration: s.cfg.StagingExpiration,
			Description:            "formsync: one staging table per commit, expiring on their own",
		}},
	} {
		res := "dataset " + s.cfg.Project + "." + d.name
		err := s.retry(ctx, func() error {
			meta, err := s.client.Dataset(d.name).Metadata(ctx)
			switch {
			case err == nil:
				return s.checkLocation(res, meta.Location)
			case isNotFound(err):
				missing = append(missing, d)
				return nil
			}
			return s.scope.classify("reading the dataset", res, err)
		})
		if err != nil {
			return err
		}
	}
	for _, d := range missing {
		res := "dataset " + s.cfg.Project + "." + d.name
		err := s.retry(ctx, func() error {
			err := s.client.Dataset(d.name).Create(ctx, d.meta)
			if isDuplicate(err) { // created concurrently by another pod
				err = nil
			}
			return s.scope.classify("creating the dataset", res, err)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Sink) ensureSchema(ctx context.Context) error {
	if err := s.ensureDatasets(ctx); err != nil {
		return err
	}
	// Tombstones are moved out of a sync_state that existed before this
	// Open (with its forgotten column): a new one holds none.
	var stateHadForgotten bool
	for _, t := range []struct {
		name  string
		meta  *bq.TableMetadata
		added []string
	}{
		{submissionsTable, &bq.TableMetadata{
			Schema:           submissionsSchema(),
			TimePartitioning: &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"},
			Clustering:       &bq.Clustering{Fields: []string{"form_id"}},
			Description:      "formsync: one row per form submission",
		}, addedSubmissionColumns},
		{stateTable, &bq.TableMetadata{Schema: stateSchema(), Description: "formsync: sync state, one row per form"}, addedStateColumns},
		{lockTable, &bq.TableMetadata{Schema: lockSchema(), Description: "formsync: one row every commit updates first, so that two commits running at once conflict"}, nil},
		{tombstonesTable, &bq.TableMetadata{
			Schema:      tombstonesSchema(),
			Clustering:  &bq.Clustering{Fields: []string{"form_id"}},
			Description: "formsync: tombstones of submissions forgotten on request, one row each (keyed hashes, never the keys)",
		}, nil},
		// Before the submission_files view, which reads it.
		{sink.FilesTable, &bq.TableMetadata{
			Schema:      fileCopiesSchema(),
			Clustering:  &bq.Clustering{Fields: []string{"form_id", "submission_key"}},
			Description: fileCopiesDescription,
		}, nil},
	} {
		tbl := s.dataset().Table(t.name)
		res := "table " + s.cfg.Project + "." + s.cfg.Dataset + "." + t.name
		err := s.retry(ctx, func() error {
			meta, err := tbl.Metadata(ctx)
			if isNotFound(err) {
				err = tbl.Create(ctx, t.meta)
				if isDuplicate(err) {
					err = nil
				}
				if err == nil && t.name == lockTable {
					return s.seedLock(ctx)
				}
				if err == nil && t.name == tombstonesTable && stateHadForgotten {
					return s.moveTombstones(ctx)
				}
				return s.scope.classify("creating the table", res, err)
			}
			if err != nil {
				return s.scope.classify("reading the table's schema", res, err)
			}
			warnings, err := checkLayout(res, s.cfg.Project+"."+s.cfg.Dataset+"."+t.name, meta, t.meta)
			if err != nil {
				return backoff.Permanent(err)
			}
			for _, w := range warnings {
				s.cfg.Logger.Warn("BigQuery table laid out to cost more", "table", s.cfg.Project+"."+s.cfg.Dataset+"."+t.name, "warning", w)
			}
			if t.name == stateTable {
				stateHadForgotten = !lacksAny(meta.Schema, []string{"forgotten"})
			}
			if t.name == stateTable && lacksAny(meta.Schema, deletionStateColumns) {
				// submissions, migrated before, has deleted_at now.
				if err := s.recreateViews(ctx); err != nil {
					return backoff.Permanent(err) // retried by its own steps
				}
			}
			if t.name == lockTable && meta.NumRows == 0 {
				return s.seedLock(ctx)
			}
			return s.scope.classify("adding columns to the table", res, s.migrate(ctx, tbl, meta, t.meta.Schema, t.added))
		})
		if err != nil {
			return err
		}
	}
	return s.ensureFilesView(ctx)
}

// tombstonesSchema is sync_tombstones': one row per tombstone of a
// form (state.Forgotten's Keys; pending: also in its Pending). They were
// a list in sync_state.forgotten, which every commit sent whole in its
// @states parameter: a list that grows with every forget, toward
// BigQuery's request size limit. Now a commit sends only the tombstones
// it changes, and forgotten keeps the salt and the count.
func tombstonesSchema() bq.Schema {
	return bq.Schema{
		{Name: "form_id", Type: bq.StringFieldType, Required: true},
		{Name: "tombstone", Type: bq.StringFieldType, Required: true, Description: "keyed hash of a forgotten submission key or content key (state.Forgotten.Tombstone)"},
		{Name: "pending", Type: bq.BooleanFieldType, Description: "forgotten while no stored row had the key, and not met by a read since: not counted yet"},
		{Name: "forgotten_at", Type: bq.TimestampFieldType, Description: "when the commit that added it ran"},
	}
}

// moveTombstones moves the tombstones sync_state.forgotten lists (a
// dataset of a formsync that kept them there) into sync_tombstones, which
// Open has just created, in one transaction that takes sync_lock and moves
// each changed form's revision, so that a commit that read the state
// before is refused and reads it again. Should it fail, the tombstones
// stay where they were, are read from there too (readTombstones), and
// move with the next commit of their form.
func (s *Sink) moveTombstones(ctx context.Context) error {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fmt.Errorf("bigquery: moving tombstones: job id: %w", err)
	}
	id := "formsync_tombstones_" + hex.EncodeToString(nonce[:])
	params := []bq.QueryParameter{{Name: "commit_id", Value: id}, {Name: "synced_at", Value: s.cfg.Now().UTC().Truncate(time.Microsecond)}}
	_, err := s.transact(ctx, id, "moving tombstones from sync_state to "+tombstonesTable, render("moveTombstones", s.t), params, nil, nil)
	return err
}

// lockSchema is sync_lock's: the commit that last took it, and when.
func lockSchema() bq.Schema {
	return bq.Schema{
		{Name: "commit_id", Type: bq.StringFieldType},
		{Name: "locked_at", Type: bq.TimestampFieldType},
	}
}

// seedLock puts sync_lock's one row in, unless one is there. Every commit
// transaction first updates it: BigQuery runs transactions that only
// insert side by side, so two first commits of a new form would both pass
// the revision check at 0 and both insert; an UPDATE of one shared row
// makes any two commits conflict, and at the script's first statement,
// before it has read anything.
func (s *Sink) seedLock(ctx context.Context) error {
	// Idempotent (it inserts only into an empty table), so it needs no
	// job id of its own: a retry may simply run it again.
	_, err := s.query(render("seedLock", s.t)).Read(ctx)
	return s.scope.classify("putting its row in", "table "+s.cfg.Project+"."+s.cfg.Dataset+"."+lockTable, err)
}

func lacksAny(schema bq.Schema, names []string) bool {
	for _, n := range names {
		if !slices.ContainsFunc(schema, func(f *bq.FieldSchema) bool { return f.Name == n }) {
			return true
		}
	}
	return false
}

// recreateViews replaces the view of every form in sync_state by its
// current definition (which leaves out rows deleted upstream). It reads
// only the columns sync_state has had from the start.
func (s *Sink) recreateViews(ctx context.Context) error {
	type form struct {
		id     string
		fields []string
	}
	var forms []form
	q := s.query(render("viewForms", s.t))
	err := s.readAll(ctx, "reading the forms whose views are recreated", "table "+s.t.State, q.Read, func() { forms = nil }, func(v []bq.Value) error {
		if len(v) != 2 {
			return fmt.Errorf("bigquery: reading forms: got %d columns, want 2", len(v))
		}
		f := form{id: vString(v[0])}
		if err := unmarshalNullable(v[1], &f.fields); err != nil {
			return fmt.Errorf("bigquery: reading field names of form %s: %w", f.id, err)
		}
		forms = append(forms, f)
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range forms {
		// The types are not read here: the view is made with every column
		// a STRING, and the next commit of the form, whose description
		// then differs, makes it with its types.
		ddl, desc := viewDDL(s.cfg.Project, s.cfg.Dataset, f.id, f.fields, fieldtype.Columns{})
		if err := s.createView(ctx, f.id, ddl); err != nil {
			var long *viewTooLongError
			if !errors.As(err, &long) {
				return err
			}
			// The form's commits report it too.
			s.cfg.Logger.Warn("a form's view cannot be made", "form", f.id, "view", s.viewRef(f.id), "error", (&viewError{view: s.viewRef(f.id), err: err}).Error())
			continue
		}
		s.knowView(f.id, desc) // made from the stored field names
	}
	return nil
}

// createView runs ddl, the view of form formID as viewDDL makes it; a
// view beyond BigQuery's limits on its text is not sent (viewTooLong).
func (s *Sink) createView(ctx context.Context, formID, ddl string) error {
	if err := viewTooLong(ddl); err != nil {
		return &viewTooLongError{form: formID, err: err}
	}
	return s.runDDL(ctx, "creating the view of form "+formID, "view "+s.viewRef(formID), ddl)
}

// viewMeta reads the metadata of the view (or what else holds its name)
// name of the dataset, with retries; nil when nothing holds it.
func (s *Sink) viewMeta(ctx context.Context, name string) (*bq.TableMetadata, error) {
	var meta *bq.TableMetadata
	err := s.retry(ctx, func() error {
		var err error
		meta, err = s.dataset().Table(name).Metadata(ctx)
		if isNotFound(err) {
			meta = nil
			return nil
		}
		return s.scope.classify("reading the view's metadata", "view "+s.cfg.Project+"."+s.cfg.Dataset+"."+name, err)
	})
	return meta, err
}

// viewRef is the view of form formID as project.dataset.view.
func (s *Sink) viewRef(formID string) string {
	return s.cfg.Project + "." + s.cfg.Dataset + "." + sqlname.ViewName(formID)
}

// knownView is a view's description and when this Sink last made or read
// it.
type knownView struct {
	description string
	at          time.Time
}

// viewRecheck is how long a Sink trusts what it knows of a view: a
// long-running scheduler reads each form's view metadata about once an
// hour, a CronJob once a run.
const viewRecheck = time.Hour

// viewInPlace reports whether form's view has description want (viewDDL's).
// What this Sink made or read within viewRecheck answers at no cost;
// otherwise the view's metadata is read (one tables.get) and its
// description compared. That read is what repairs a view left behind by
// another process: views are DDL and run before a commit's transaction, so
// a process whose commit then failed (and that exited without retrying)
// may have replaced the view of names another process committed. A view
// without that description (made before formsync described its views, or
// replaced by hand) is made again; only the description is compared, so a
// hand-made change that keeps it is not seen.
func (s *Sink) viewInPlace(ctx context.Context, formID, want string) (bool, error) {
	s.viewsMu.Lock()
	known, ok := s.views[formID]
	s.viewsMu.Unlock()
	if ok && known.description == want && s.cfg.Now().Sub(known.at) < viewRecheck {
		return true, nil
	}
	meta, err := s.viewMeta(ctx, sqlname.ViewName(formID))
	if err != nil {
		return false, err
	}
	if meta == nil || meta.Type != bq.ViewTable || meta.Description != want {
		return false, nil
	}
	s.knowView(formID, want)
	return true, nil
}

// knowView records that form's view has description desc.
func (s *Sink) knowView(formID, desc string) {
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	if s.views == nil {
		s.views = map[string]knownView{}
	}
	s.views[formID] = knownView{desc, s.cfg.Now()}
}

// forgetView records that form's view may not be what this Sink last knew.
func (s *Sink) forgetView(formID string) {
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	delete(s.views, formID)
}

// migrate appends to a table created by an earlier formsync the nullable
// columns added since (old rows read them as NULL). It is one metadata
// update, made only while a column is missing: none in the steady state.
// The etag makes a concurrent migration by another pod fail (412) rather
// than be overwritten; the retry then finds the columns present.
func (s *Sink) migrate(ctx context.Context, tbl *bq.Table, meta *bq.TableMetadata, want bq.Schema, added []string) error {
	have := map[string]bool{}
	for _, f := range meta.Schema {
		have[f.Name] = true
	}
	schema := append(bq.Schema{}, meta.Schema...)
	for _, f := range want {
		if have[f.Name] {
			continue
		}
		if !slices.Contains(added, f.Name) || f.Required {
			return fmt.Errorf("column %s is missing and formsync does not add it: the table was changed by hand", f.Name)
		}
		schema = append(schema, f)
	}
	if len(schema) == len(meta.Schema) {
		return nil
	}
	_, err := tbl.Update(ctx, bq.TableMetadataToUpdate{Schema: schema}, meta.ETag)
	var gerr *googleapi.Error
	if errors.As(err, &gerr) && gerr.Code == http.StatusPreconditionFailed {
		return &googleapi.Error{Code: http.StatusServiceUnavailable, Message: "table changed while adding columns: " + gerr.Message}
	}
	return err
}

// retry runs op until it succeeds, fails with an error that is not
// Retryable, or has been retried MaxRetries times, pausing between
// attempts as backOff says.
func (s *Sink) retry(ctx context.Context, op func() error) error {
	return s.retryWith(ctx, backoff.WithMaxRetries(s.backOff(), uint64(s.cfg.MaxRetries)), func(int) error {
		err := op()
		if err != nil && !Retryable(err) {
			return backoff.Permanent(err)
		}
		return err
	})
}

// backOff is the sink's pause between attempts: exponential from
// Config.RetryInitial up to RetryMaxInterval, with no bound of its own
// (each caller bounds it: a number of retries, or a time measured on
// Config.Now).
func (s *Sink) backOff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = s.cfg.RetryInitial
	b.MaxInterval = max(s.cfg.RetryMaxInterval, s.cfg.RetryInitial)
	b.MaxElapsedTime = 0
	return b
}

// retryWith is the sink's one retry loop: it runs op (attempt 1, 2, ...)
// until it returns nil or a backoff.Permanent error (returned unwrapped),
// or b says stop, pausing b.NextBackOff() between attempts; ctx ending
// stops it during a pause.
func (s *Sink) retryWith(ctx context.Context, b backoff.BackOff, op func(attempt int) error) error {
	attempt := 0
	return backoff.Retry(func() error {
		attempt++
		return op(attempt)
	}, backoff.WithContext(b, ctx))
}
