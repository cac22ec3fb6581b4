package bigquery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/cenkalti/backoff/v4"
	"google.golang.org/api/option"
)

const (
	submissionsTable = "submissions"
	stateTable       = "sync_state"
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
	// "http://127.0.0.1:9050"); empty for Google's. The client does not
	// read BIGQUERY_EMULATOR_HOST. FORMSYNC_BQ_ENDPOINT, optional; when set
	// no credentials are sent.
	Endpoint string
	// StagingTable is the table each commit's rows are loaded into before
	// the MERGE. Sharded runs give each shard its own so that pods never
	// overwrite each other's staged rows. Default "_formsync_staging".
	StagingTable string
	// TempDir is unused by the sink itself (spools come from the worker);
	// kept so all sinks share one configuration shape.
	TempDir string
	// ClientOptions are passed to the BigQuery client after the endpoint
	// options (tests, custom credentials).
	ClientOptions []option.ClientOption
	// UploadChunkSize, when positive, is the resumable upload chunk size;
	// uploads up to it go in one multipart request. Default 16 MiB (the
	// client's).
	UploadChunkSize int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// PollInterval is how often a running job is polled. Default 1s.
	PollInterval time.Duration
	// JobTimeout bounds the wait for one job. Default 10 minutes.
	JobTimeout time.Duration
	// RetryInitial is the first pause before retrying a transient failure
	// (doubling, with jitter, up to 30 s). Default 1s.
	RetryInitial time.Duration
	// MaxRetries bounds the retries of one step (upload, load, transaction).
	// Default 5.
	MaxRetries int
}

var (
	projectRE = regexp.MustCompile(`^[a-z0-9][a-z0-9\-:.]{0,127}$`)
	datasetRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	tableRE   = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

func (c Config) withDefaults() Config {
	c.Dataset = cmp.Or(c.Dataset, "formsync")
	c.Location = cmp.Or(c.Location, "US")
	c.StagingTable = cmp.Or(c.StagingTable, "_formsync_staging")
	if c.Now == nil {
		c.Now = time.Now
	}
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.JobTimeout = cmp.Or(c.JobTimeout, 10*time.Minute)
	c.RetryInitial = cmp.Or(c.RetryInitial, time.Second)
	c.MaxRetries = cmp.Or(c.MaxRetries, 5)
	return c
}

// validate returns every problem at once. Identifiers are checked strictly
// because they are spliced into SQL text.
func (c Config) validate() error {
	var errs []error
	if c.Project == "" {
		errs = append(errs, errors.New("FORMSYNC_BQ_PROJECT is required"))
	} else if !projectRE.MatchString(c.Project) {
		errs = append(errs, fmt.Errorf("FORMSYNC_BQ_PROJECT %q is not a project id (lower-case letters, digits, '-', ':' and '.')", c.Project))
	}
	if !datasetRE.MatchString(c.Dataset) {
		errs = append(errs, fmt.Errorf("FORMSYNC_BQ_DATASET %q is not a dataset name (letters, digits and '_')", c.Dataset))
	}
	if !tableRE.MatchString(c.StagingTable) || c.StagingTable == submissionsTable || c.StagingTable == stateTable {
		errs = append(errs, fmt.Errorf("staging table %q must be letters, digits and '_', and not %s or %s", c.StagingTable, submissionsTable, stateTable))
	}
	if strings.TrimSpace(c.Location) == "" || strings.ContainsAny(c.Location, "`'\"\\\n") {
		errs = append(errs, fmt.Errorf("FORMSYNC_BQ_LOCATION %q is not a location", c.Location))
	}
	if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
		errs = append(errs, fmt.Errorf("FORMSYNC_BQ_ENDPOINT %q must be an http(s) URL", c.Endpoint))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, errors.New("MaxRetries must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bigquery: invalid configuration: %w", err)
	}
	return nil
}

// Sink is the BigQuery destination. It is safe for concurrent use; commits
// are serialised, as they share the staging table.
type Sink struct {
	cfg    Config
	client *bq.Client
	scope  errorScope
	t      tables
	// commitMu serialises Commit: each commit truncates the staging table.
	commitMu sync.Mutex
}

// Open connects to BigQuery and creates what is missing: the dataset (in
// Location), the submissions, sync_state and staging tables. When all exist
// it only reads their metadata: no DDL in the steady state.
func Open(ctx context.Context, cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/bigquery/v2/"), option.WithoutAuthentication())
	}
	opts = append(opts, cfg.ClientOptions...)
	client, err := bq.NewClient(ctx, cfg.Project, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigquery: creating client for project %s: %w", cfg.Project, err)
	}
	client.Location = cfg.Location
	s := &Sink{
		cfg:    cfg,
		client: client,
		scope:  errorScope{Project: cfg.Project, Dataset: cfg.Dataset},
		t: tables{
			Submissions: ref(cfg.Project, cfg.Dataset, submissionsTable),
			State:       ref(cfg.Project, cfg.Dataset, stateTable),
			Staging:     ref(cfg.Project, cfg.Dataset, cfg.StagingTable),
		},
	}
	if err := s.ensureSchema(ctx); err != nil {
		client.Close()
		return nil, err
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

// Client is the underlying BigQuery client, for tools (status, tests).
func (s *Sink) Client() *bq.Client { return s.client }

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
	}
}

func stateSchema() bq.Schema {
	return bq.Schema{
		{Name: "form_id", Type: bq.StringFieldType, Required: true},
		{Name: "wm_created_at", Type: bq.TimestampFieldType},
		{Name: "wm_id", Type: bq.IntegerFieldType},
		{Name: "boundary", Type: bq.JSONFieldType, Description: "watermark boundary keys (JSON array of strings)"},
		{Name: "sort_order", Type: bq.StringFieldType},
		{Name: "last_total", Type: bq.IntegerFieldType},
		{Name: "row_count", Type: bq.IntegerFieldType, Description: "rows stored for the form"},
		{Name: "field_names", Type: bq.JSONFieldType},
		{Name: "last_success_at", Type: bq.TimestampFieldType},
		{Name: "last_error_at", Type: bq.TimestampFieldType},
		{Name: "last_error", Type: bq.StringFieldType},
		{Name: "backfill", Type: bq.JSONFieldType},
		{Name: "updated_at", Type: bq.TimestampFieldType, Required: true},
	}
}

// stagingSchema is one NDJSON line of a sink.Spool.
func stagingSchema() bq.Schema {
	return bq.Schema{
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

func (s *Sink) ensureSchema(ctx context.Context) error {
	ds := s.dataset()
	res := "dataset " + s.cfg.Project + "." + s.cfg.Dataset
	err := s.retry(ctx, func() error {
		_, err := ds.Metadata(ctx)
		if isNotFound(err) {
			err = ds.Create(ctx, &bq.DatasetMetadata{Location: s.cfg.Location, Description: "formsync: form submissions and sync state"})
			if isDuplicate(err) { // created concurrently by another pod
				err = nil
			}
		}
		return s.scope.classify("creating the dataset", res, err)
	})
	if err != nil {
		return err
	}
	for _, t := range []struct {
		name string
		meta *bq.TableMetadata
	}{
		{submissionsTable, &bq.TableMetadata{
			Schema:           submissionsSchema(),
			TimePartitioning: &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"},
			Clustering:       &bq.Clustering{Fields: []string{"form_id"}},
			Description:      "formsync: one row per form submission",
		}},
		{stateTable, &bq.TableMetadata{Schema: stateSchema(), Description: "formsync: sync state, one row per form"}},
		{s.cfg.StagingTable, &bq.TableMetadata{Schema: stagingSchema(), Description: "formsync: rows of the last commit, before the MERGE"}},
	} {
		tbl := ds.Table(t.name)
		res := "table " + s.cfg.Project + "." + s.cfg.Dataset + "." + t.name
		err := s.retry(ctx, func() error {
			_, err := tbl.Metadata(ctx)
			if isNotFound(err) {
				err = tbl.Create(ctx, t.meta)
				if isDuplicate(err) {
					err = nil
				}
			}
			return s.scope.classify("creating the table", res, err)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// retry runs op until it succeeds, fails with an error that is not
// ErrRetryable, ctx ends or MaxRetries retries are spent.
func (s *Sink) retry(ctx context.Context, op func() error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = s.cfg.RetryInitial
	b.MaxInterval = max(30*time.Second, s.cfg.RetryInitial)
	b.MaxElapsedTime = 0 // bounded by MaxRetries and ctx
	policy := backoff.WithContext(backoff.WithMaxRetries(b, uint64(s.cfg.MaxRetries)), ctx)
	return backoff.Retry(func() error {
		err := op()
		if err != nil && !Retryable(err) {
			return backoff.Permanent(err)
		}
		return err
	}, policy)
}
