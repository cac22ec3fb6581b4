package cli

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/formsync/formsync/worker/formsapi"
	"github.com/kelseyhightower/envconfig"
	"github.com/robfig/cron/v3"
)

// envPrefix is the prefix of every formsync environment variable.
const envPrefix = "FORMSYNC"

// Config is formsync's whole configuration, read from FORMSYNC_* environment
// variables. Every field documents its variable and default; `formsync help`
// prints the same table.
type Config struct {
	// API_BASE_URL: base address of the Form Submissions Read API, e.g.
	// https://forms.example.com. http:// is accepted only for loopback hosts.
	APIBaseURL string `envconfig:"API_BASE_URL" desc:"base URL of the Form Submissions Read API (https; http only on loopback)"`
	// API_TOKEN / API_TOKEN_FILE: the personal access token, given directly or
	// as a file (a mounted Kubernetes Secret). Exactly one is needed.
	APIToken     formsapi.Secret `envconfig:"API_TOKEN" desc:"API personal access token (prefer FORMSYNC_API_TOKEN_FILE)"`
	APITokenFile string          `envconfig:"API_TOKEN_FILE" desc:"file holding the API token (e.g. a mounted Secret)"`
	// FORMS: comma-separated form ids to sync.
	Forms []string `envconfig:"FORMS" desc:"comma-separated form ids to sync"`
	// PAGE_SIZE: the limit asked per page (the older API form ignores it and
	// pages by 25). Defaults to 100, the API's maximum.
	PageSize int `envconfig:"PAGE_SIZE" default:"100" desc:"submissions asked per page (1-100)"`
	// CONCURRENCY: forms synced at once. Defaults to 4.
	Concurrency int `envconfig:"CONCURRENCY" default:"4" desc:"forms synced at once"`
	// RATE_LIMIT: requests per second to the API, shared by all forms.
	RateLimit float64 `envconfig:"RATE_LIMIT" default:"5" desc:"API requests per second, shared by all forms"`
	// REQUEST_TIMEOUT: limit of one HTTP attempt, body included.
	RequestTimeout time.Duration `envconfig:"REQUEST_TIMEOUT" default:"30s" desc:"timeout of one API request, body included"`
	// MAX_WAIT: how long one page may spend waiting on retries (429, 5xx)
	// before its form fails for this run, watermark untouched.
	MaxWait time.Duration `envconfig:"MAX_WAIT" default:"2m" desc:"retry wait budget per page before the form fails for this run"`
	// MAX_RETRY_AFTER: the longest Retry-After honoured; longer ones are capped.
	MaxRetryAfter time.Duration `envconfig:"MAX_RETRY_AFTER" default:"60s" desc:"cap on an honoured Retry-After"`
	// BACKOFF_INITIAL and BACKOFF_MAX shape the exponential backoff (with
	// jitter) used when no usable Retry-After came with a 429, and on 5xx
	// and timeouts.
	BackoffInitial time.Duration `envconfig:"BACKOFF_INITIAL" default:"500ms" desc:"first retry wait without a Retry-After; doubles per attempt"`
	BackoffMax     time.Duration `envconfig:"BACKOFF_MAX" default:"30s" desc:"longest retry wait without a Retry-After"`
	// LOOKBACK: re-read submissions newer than watermark minus this, so
	// later changes (a submission marked as spam) reach the table. 0 = off.
	Lookback time.Duration `envconfig:"LOOKBACK" default:"0s" desc:"re-read this far behind the watermark to pick up changes (e.g. 24h)"`
	// SINK: sqlite (embedded, the default) or bigquery.
	Sink string `envconfig:"SINK" default:"sqlite" desc:"destination: sqlite or bigquery"`
	// SQLITE_PATH: the SQLite database file.
	SQLitePath string `envconfig:"SQLITE_PATH" default:"formsync.db" desc:"SQLite database file"`
	// BQ_*: BigQuery destination. Credentials come from Application Default
	// Credentials (Workload Identity on GKE).
	BQProject  string `envconfig:"BQ_PROJECT" desc:"BigQuery project (required with FORMSYNC_SINK=bigquery)"`
	BQDataset  string `envconfig:"BQ_DATASET" default:"formsync" desc:"BigQuery dataset"`
	BQLocation string `envconfig:"BQ_LOCATION" default:"US" desc:"BigQuery location of the dataset and jobs"`
	BQEndpoint string `envconfig:"BQ_ENDPOINT" desc:"BigQuery API base URL override (emulators, tests)"`
	// TMP_DIR: where a run stages rows as NDJSON before committing them.
	TmpDir string `envconfig:"TMP_DIR" desc:"directory for staged rows (default: the system temp dir)"`
	// SCHEDULE: cron spec of `formsync run`.
	Schedule string `envconfig:"SCHEDULE" default:"*/15 * * * *" desc:"cron schedule of 'formsync run' (robfig/cron spec)"`
	// HTTP_ADDR: where `formsync run` serves /healthz, /readyz, /metrics.
	HTTPAddr string `envconfig:"HTTP_ADDR" default:":9090" desc:"address of /healthz, /readyz and /metrics in 'formsync run'"`
	// PUSHGATEWAY_URL: one-shot commands push their metrics here when set.
	PushgatewayURL string `envconfig:"PUSHGATEWAY_URL" desc:"Prometheus Pushgateway URL for one-shot runs"`
	// SHARD_INDEX / SHARD_COUNT: split forms across pods of an Indexed Job.
	// The index defaults to JOB_COMPLETION_INDEX.
	ShardIndex int `envconfig:"SHARD_INDEX" default:"-1" desc:"this pod's shard (default: JOB_COMPLETION_INDEX, else 0)"`
	ShardCount int `envconfig:"SHARD_COUNT" default:"1" desc:"number of shards the forms are split into"`
	// SHUTDOWN_TIMEOUT: after SIGTERM, how long an in-flight commit may take.
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"20s" desc:"bound on a clean stop after SIGTERM"`
	// LOG_FORMAT / LOG_LEVEL: json (Cloud Logging keys) or text; debug, info, warn, error.
	LogFormat string `envconfig:"LOG_FORMAT" default:"json" desc:"log format: json or text"`
	LogLevel  string `envconfig:"LOG_LEVEL" default:"info" desc:"log level: debug, info, warn or error"`
}

// LoadConfig reads the configuration from the process environment. Tests
// set it with t.Setenv.
func LoadConfig() (Config, error) {
	var c Config
	if err := envconfig.Process(envPrefix, &c); err != nil {
		return c, &ConfigError{Problems: []string{err.Error()}}
	}
	if c.ShardIndex < 0 { // not set: an Indexed Job tells each pod its index
		c.ShardIndex = 0
		if v, ok := os.LookupEnv("JOB_COMPLETION_INDEX"); ok {
			if _, err := fmt.Sscanf(v, "%d", &c.ShardIndex); err != nil {
				return c, &ConfigError{Problems: []string{fmt.Sprintf("JOB_COMPLETION_INDEX=%q is not a number", v)}}
			}
		}
	}
	forms := c.Forms[:0]
	for _, f := range c.Forms {
		if f = strings.TrimSpace(f); f != "" {
			forms = append(forms, f)
		}
	}
	c.Forms = forms
	return c, nil
}

// ConfigError lists every configuration problem found.
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string {
	return "configuration: " + strings.Join(e.Problems, "; ")
}

// Need says which parts of the configuration a command uses.
type Need struct {
	API   bool // API URL, token and forms
	Sink  bool
	Sched bool
}

// Validate checks what the command needs and returns every problem at once.
func (c *Config) Validate(n Need) error {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if n.API {
		switch u, err := url.Parse(c.APIBaseURL); {
		case c.APIBaseURL == "":
			add("FORMSYNC_API_BASE_URL is not set: give the API's base URL, e.g. https://forms.example.com")
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			add("FORMSYNC_API_BASE_URL=%q is not an absolute http(s) URL", c.APIBaseURL)
		}
		switch {
		case c.APIToken == "" && c.APITokenFile == "":
			add("no API token: set FORMSYNC_API_TOKEN_FILE (a file holding the token) or FORMSYNC_API_TOKEN")
		case c.APIToken != "" && c.APITokenFile != "":
			add("both FORMSYNC_API_TOKEN and FORMSYNC_API_TOKEN_FILE are set: keep one")
		}
		if len(c.Forms) == 0 {
			add("FORMSYNC_FORMS is empty: list the form ids to sync, comma-separated")
		}
		if c.PageSize < 1 || c.PageSize > 100 {
			add("FORMSYNC_PAGE_SIZE=%d is out of range: the API pages by 1 to 100", c.PageSize)
		}
		if c.Concurrency < 1 {
			add("FORMSYNC_CONCURRENCY=%d must be at least 1", c.Concurrency)
		}
		if c.RateLimit <= 0 {
			add("FORMSYNC_RATE_LIMIT=%g must be above 0 requests per second", c.RateLimit)
		}
		if c.RequestTimeout <= 0 || c.MaxWait < 0 || c.MaxRetryAfter <= 0 {
			add("FORMSYNC_REQUEST_TIMEOUT and FORMSYNC_MAX_RETRY_AFTER must be positive and FORMSYNC_MAX_WAIT not negative")
		}
		if c.BackoffInitial <= 0 || c.BackoffMax < c.BackoffInitial {
			add("FORMSYNC_BACKOFF_INITIAL=%s must be positive and FORMSYNC_BACKOFF_MAX=%s at least as long", c.BackoffInitial, c.BackoffMax)
		}
		if c.Lookback < 0 {
			add("FORMSYNC_LOOKBACK=%s must not be negative", c.Lookback)
		}
		if c.ShardCount < 1 || c.ShardIndex < 0 || c.ShardIndex >= c.ShardCount {
			add("shard %d of %d is impossible: FORMSYNC_SHARD_INDEX (or JOB_COMPLETION_INDEX) must be 0..FORMSYNC_SHARD_COUNT-1", c.ShardIndex, c.ShardCount)
		}
	}
	if n.Sink {
		switch c.Sink {
		case "sqlite":
			if c.SQLitePath == "" {
				add("FORMSYNC_SQLITE_PATH is empty")
			}
		case "bigquery":
			if c.BQProject == "" {
				add("FORMSYNC_SINK=bigquery needs FORMSYNC_BQ_PROJECT (the Google Cloud project id)")
			}
			if c.BQDataset == "" {
				add("FORMSYNC_BQ_DATASET is empty")
			}
		default:
			add("FORMSYNC_SINK=%q is not a sink: use sqlite or bigquery", c.Sink)
		}
	}
	if n.Sched {
		if _, err := cron.ParseStandard(c.Schedule); err != nil {
			add("FORMSYNC_SCHEDULE=%q is not a cron spec: %v", c.Schedule, err)
		}
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		add("FORMSYNC_LOG_FORMAT=%q: use json or text", c.LogFormat)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		add("FORMSYNC_LOG_LEVEL=%q: use debug, info, warn or error", c.LogLevel)
	}
	if len(p) > 0 {
		return &ConfigError{Problems: p}
	}
	return nil
}

// Token returns the API token, reading FORMSYNC_API_TOKEN_FILE when set.
func (c *Config) Token() (formsapi.Secret, error) {
	if c.APITokenFile == "" {
		return c.APIToken, nil
	}
	b, err := os.ReadFile(c.APITokenFile)
	if err != nil {
		return "", fmt.Errorf("reading FORMSYNC_API_TOKEN_FILE: %w", errors.Unwrap(err))
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("FORMSYNC_API_TOKEN_FILE %s is empty", c.APITokenFile)
	}
	return formsapi.Secret(tok), nil
}

// envNames lists every variable formsync reads.
func envNames() []string {
	var names []string
	t := reflect.TypeOf(Config{})
	for i := range t.NumField() {
		names = append(names, envPrefix+"_"+t.Field(i).Tag.Get("envconfig"))
	}
	return names
}

// writeEnv prints every variable formsync reads as NAME=value, with the
// value in effect (the environment's, else the default) and secrets
// redacted: what `formsync env` shows an operator, and what the tests of
// the Kubernetes manifests read the binary's variables from.
func writeEnv(w io.Writer, c Config) {
	v := reflect.ValueOf(c)
	t := v.Type()
	for i := range t.NumField() {
		val := v.Field(i).Interface()
		switch x := val.(type) {
		case formsapi.Secret:
			if x == "" {
				val = ""
			}
		case []string:
			val = strings.Join(x, ",")
		}
		fmt.Fprintf(w, "%s_%s=%v\n", envPrefix, t.Field(i).Tag.Get("envconfig"), val)
	}
}

// Usage describes every variable with its default.
func Usage() string {
	var b strings.Builder
	t := reflect.TypeOf(Config{})
	for i := range t.NumField() {
		f := t.Field(i)
		def := f.Tag.Get("default")
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(&b, "  %-28s %-14s %s\n", envPrefix+"_"+f.Tag.Get("envconfig"), def, f.Tag.Get("desc"))
	}
	return b.String()
}
