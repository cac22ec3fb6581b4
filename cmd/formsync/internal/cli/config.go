package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/fieldpolicy"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/kelseyhightower/envconfig"
)

// envPrefix is the prefix of every formsync environment variable.
const envPrefix = "FORMSYNC"

// Config is formsync's whole configuration, read from FORMSYNC_* environment
// variables. The envconfig tag names the variable, desc is its line in
// `formsync help`, and group says which commands read it (see Need): a
// command never fails on a variable it does not read. Defaults are in
// defaults, not in the tags; each field's comment states its default too,
// and TestConfigDocsStateDefaults keeps the two in step.
type Config struct {
	// API_BASE_URL: base address of the Form Submissions Read API, e.g.
	// https://forms.example.com. http:// is accepted only for loopback hosts.
	// Default: none (required by the commands that read the API).
	APIBaseURL string `envconfig:"API_BASE_URL" group:"api" desc:"base URL of the Form Submissions Read API (https; http only on loopback)"`
	// API_TOKEN: the personal access token, given directly. Exactly one of
	// API_TOKEN and API_TOKEN_FILE is needed; prefer the file.
	// Default: none.
	APIToken formsapi.Secret `envconfig:"API_TOKEN" group:"api" desc:"API personal access token (prefer FORMSYNC_API_TOKEN_FILE)"`
	// API_TOKEN_FILE: a file holding the personal access token (a mounted
	// Kubernetes Secret). Exactly one of API_TOKEN and API_TOKEN_FILE is
	// needed. Default: none.
	APITokenFile string `envconfig:"API_TOKEN_FILE" group:"api" desc:"file holding the API token (e.g. a mounted Secret)"`
	// FORMS: comma-separated form ids to sync. Default: none (required by
	// sync, run and reconcile without form names).
	Forms []string `envconfig:"FORMS" group:"api" desc:"comma-separated form ids to sync"`
	// PAGE_SIZE: the limit asked per page (the older API form ignores it and
	// pages by 25). Default 100.
	PageSize int `envconfig:"PAGE_SIZE" group:"api" desc:"submissions asked per page (1-100)"`
	// CONCURRENCY: forms synced at once. Default 4.
	Concurrency int `envconfig:"CONCURRENCY" group:"api" desc:"forms synced at once"`
	// RATE_LIMIT: requests per second to the API, shared by all forms.
	// Default 5.
	RateLimit float64 `envconfig:"RATE_LIMIT" group:"api" desc:"most API requests per second, all forms together; below it the server's rate-limit headers set the pace"`
	// REQUEST_TIMEOUT: limit of one HTTP attempt, body included. Default 30s.
	RequestTimeout time.Duration `envconfig:"REQUEST_TIMEOUT" group:"api" desc:"timeout of one API request, body included"`
	// MAX_WAIT: how long one page may spend waiting on retries (429, 5xx)
	// before its form fails for this run, watermark untouched. Default 2m.
	MaxWait time.Duration `envconfig:"MAX_WAIT" group:"api" desc:"retry wait budget per page before the form fails for this run"`
	// MAX_RETRY_AFTER: the longest Retry-After honoured; longer ones are
	// capped. Default 1m.
	MaxRetryAfter time.Duration `envconfig:"MAX_RETRY_AFTER" group:"api" desc:"cap on an honoured Retry-After"`
	// BACKOFF_INITIAL: the first wait of the exponential backoff (with
	// jitter) used when no usable Retry-After came with a 429, and on 5xx
	// and timeouts; it doubles per attempt. Default 500ms.
	BackoffInitial time.Duration `envconfig:"BACKOFF_INITIAL" group:"api" desc:"first retry wait without a Retry-After; doubles per attempt"`
	// BACKOFF_MAX: the longest wait of that backoff. Default 30s.
	BackoffMax time.Duration `envconfig:"BACKOFF_MAX" group:"api" desc:"longest retry wait without a Retry-After"`
	// FORM_TIMEOUT: everything one form may wait on in a run (requests,
	// retries, the rate limiter); past it the form fails for this run.
	// Default 10m.
	FormTimeout time.Duration `envconfig:"FORM_TIMEOUT" group:"api" desc:"time budget of one form in a run, retries and rate limit included"`
	// LOOKBACK: re-read submissions newer than watermark minus this, so
	// later changes (a submission marked as spam) reach the table.
	// Default 0s (off).
	Lookback time.Duration `envconfig:"LOOKBACK" group:"api" desc:"re-read this far behind the watermark to pick up changes (e.g. 24h)"`
	// RECONCILE_EVERY: sync and run reconcile a form (read every page, mark
	// the rows no longer served as deleted) once this long has passed since
	// its last reconcile. 0 = only `formsync reconcile` does. Default 0s.
	ReconcileEvery time.Duration `envconfig:"RECONCILE_EVERY" group:"api" desc:"reconcile each form (mark rows deleted upstream) this often during syncs, e.g. 24h; 0 = only 'formsync reconcile'"`
	// FIELD_POLICY: personal fields hashed or dropped before anything is
	// staged, e.g. email=hash,phone=drop; hash is HMAC-SHA256 under the key
	// in FIELD_HASH_KEY_FILE. Default: none (every field kept as served).
	FieldPolicy string `envconfig:"FIELD_POLICY" group:"policy" desc:"fields to hash or drop before staging, e.g. email=hash,phone=drop,*password*=drop"`
	// FIELD_HASH_KEY_FILE: the file holding the secret key of FIELD_POLICY's
	// hash. Default: none (required when FIELD_POLICY hashes a field).
	FieldHashKeyFile string `envconfig:"FIELD_HASH_KEY_FILE" group:"policy" desc:"file holding the secret key of FORMSYNC_FIELD_POLICY's hash (at least 16 bytes)"`
	// SINK: sqlite (embedded) or bigquery. Default sqlite.
	Sink string `envconfig:"SINK" group:"sink" desc:"destination: sqlite or bigquery"`
	// SQLITE_PATH: the SQLite database file. Default formsync.db.
	SQLitePath string `envconfig:"SQLITE_PATH" group:"sink" desc:"SQLite database file"`
	// BQ_PROJECT: the BigQuery project. Credentials come from Application
	// Default Credentials (Workload Identity on GKE). Default: none
	// (required with SINK=bigquery).
	BQProject string `envconfig:"BQ_PROJECT" group:"sink" desc:"BigQuery project (required with FORMSYNC_SINK=bigquery)"`
	// BQ_DATASET: the BigQuery dataset. Default formsync.
	BQDataset string `envconfig:"BQ_DATASET" group:"sink" desc:"BigQuery dataset"`
	// BQ_LOCATION: the BigQuery location of the dataset and jobs. Default US.
	BQLocation string `envconfig:"BQ_LOCATION" group:"sink" desc:"BigQuery location of the dataset and jobs"`
	// BQ_ENDPOINT: overrides the BigQuery API base URL (emulators, tests).
	// Default: none (Google's endpoint).
	BQEndpoint string `envconfig:"BQ_ENDPOINT" group:"sink" desc:"BigQuery API base URL override (emulators, tests)"`
	// BQ_TIMEOUT: how long BigQuery may go without answering (connections
	// refused or unanswered, 5xx) before the step waiting on it fails,
	// watermarks untouched. Default 2m.
	BQTimeout time.Duration `envconfig:"BQ_TIMEOUT" group:"sink" desc:"how long BigQuery may fail to answer before the sync fails, watermarks untouched"`
	// TMP_DIR: where a run stages rows as NDJSON before committing them.
	// Default: system temp dir (os.TempDir).
	TmpDir string `envconfig:"TMP_DIR" group:"api" desc:"directory for staged rows"`
	// SCHEDULE: cron spec of `formsync run`. Default `*/15 * * * *`.
	Schedule string `envconfig:"SCHEDULE" group:"sched" desc:"cron schedule of 'formsync run' (robfig/cron spec, UTC)"`
	// SYNC_AT_START: `formsync run` syncs once as soon as it starts rather
	// than waiting up to a whole schedule period for the first tick.
	// Default true.
	SyncAtStart bool `envconfig:"SYNC_AT_START" group:"sched" desc:"'formsync run' syncs once at start, before the first tick"`
	// HTTP_ADDR: where `formsync run` serves /healthz, /readyz, /metrics.
	// Default `:9090`.
	HTTPAddr string `envconfig:"HTTP_ADDR" group:"sched" desc:"address of /healthz, /readyz and /metrics in 'formsync run'"`
	// PUSHGATEWAY_URL: one-shot commands push their metrics here when set.
	// Default: none (no push).
	PushgatewayURL string `envconfig:"PUSHGATEWAY_URL" group:"api" desc:"Prometheus Pushgateway URL for one-shot runs"`
	// SHARD_INDEX: this pod's shard, when SHARD_COUNT splits the forms
	// across pods of an Indexed Job. Default: JOB_COMPLETION_INDEX, else 0.
	ShardIndex int `envconfig:"SHARD_INDEX" group:"api" desc:"this pod's shard"`
	// SHARD_COUNT: the number of shards the forms are split into. Default 1.
	ShardCount int `envconfig:"SHARD_COUNT" group:"api" desc:"number of shards the forms are split into"`
	// SHUTDOWN_TIMEOUT: after SIGTERM, how long the commit of what was read
	// completely may take. Default 20s.
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" group:"api" desc:"bound on the commit after SIGTERM"`
	// LOG_FORMAT: json (Cloud Logging keys) or text. Default json.
	LogFormat string `envconfig:"LOG_FORMAT" group:"log" desc:"log format: json or text"`
	// LOG_LEVEL: debug, info, warn or error. Default info.
	LogLevel string `envconfig:"LOG_LEVEL" group:"log" desc:"log level: debug, info, warn or error"`

	// problems are the variables that did not parse, by name; Validate
	// reports those of the groups a command reads.
	problems map[string]string
	// token is the token read from APITokenFile by Validate.
	token formsapi.Secret
	// policy is FieldPolicy parsed, with its key, by Validate; nil for none.
	policy *fieldpolicy.Policy
	// bqObserve is told of every failed BigQuery request (logged).
	bqObserve func(bigquery.Event)
}

// defaultValue is a variable's default: the value parsed when the variable
// is unset, and what `formsync help` shows (show, when the value alone would
// not say it).
type defaultValue struct{ value, show string }

// defaults is every variable's default, declared once: where a library has
// the setting, its exported constant (formsapi.Default*, worker.Default*),
// so that the library used on its own and the binary cannot disagree; the
// binary's own settings are declared here.
var defaults = map[string]defaultValue{
	"PAGE_SIZE":        {value: strconv.Itoa(worker.DefaultPageSize)},
	"CONCURRENCY":      {value: strconv.Itoa(worker.DefaultConcurrency)},
	"RATE_LIMIT":       {value: strconv.FormatFloat(formsapi.DefaultRateLimit, 'g', -1, 64)},
	"REQUEST_TIMEOUT":  {value: shortDuration(formsapi.DefaultRequestTimeout)},
	"MAX_WAIT":         {value: shortDuration(formsapi.DefaultMaxWait)},
	"MAX_RETRY_AFTER":  {value: shortDuration(formsapi.DefaultMaxRetryAfter)},
	"BACKOFF_INITIAL":  {value: shortDuration(formsapi.DefaultInitialBackoff)},
	"BACKOFF_MAX":      {value: shortDuration(formsapi.DefaultMaxBackoff)},
	"FORM_TIMEOUT":     {value: shortDuration(worker.DefaultFormTimeout)},
	"LOOKBACK":         {value: "0s"},
	"RECONCILE_EVERY":  {value: "0s"},
	"SINK":             {value: "sqlite"},
	"SQLITE_PATH":      {value: "formsync.db"},
	"BQ_DATASET":       {value: "formsync"},
	"BQ_LOCATION":      {value: "US"},
	"BQ_TIMEOUT":       {value: shortDuration(bigquery.DefaultTimeout)},
	"TMP_DIR":          {show: "system temp dir"},
	"SCHEDULE":         {value: "*/15 * * * *"},
	"SYNC_AT_START":    {value: "true"},
	"HTTP_ADDR":        {value: ":9090"},
	"SHARD_INDEX":      {value: "0", show: "JOB_COMPLETION_INDEX, else 0"},
	"SHARD_COUNT":      {value: "1"},
	"SHUTDOWN_TIMEOUT": {value: shortDuration(worker.DefaultShutdownGrace)},
	"LOG_FORMAT":       {value: "json"},
	"LOG_LEVEL":        {value: "info"},
}

// positive lists the variables whose libraries take 0 for "use the
// default": set to 0 they are refused rather than silently replaced.
var positive = map[string]bool{
	"PAGE_SIZE": true, "CONCURRENCY": true, "RATE_LIMIT": true, "REQUEST_TIMEOUT": true, "MAX_WAIT": true,
	"MAX_RETRY_AFTER": true, "BACKOFF_INITIAL": true, "FORM_TIMEOUT": true, "BACKOFF_MAX": true, "SHUTDOWN_TIMEOUT": true, "SHARD_COUNT": true, "BQ_TIMEOUT": true,
}

// shortDuration prints d as people write it in a variable: 2m, 60s, 500ms.
func shortDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// envText is a variable as envconfig found it. Its Decode never fails, so
// that envconfig.Process visits every variable instead of stopping at the
// first one that does not parse; the values are parsed afterwards, every
// problem in words of its own.
type envText struct {
	Value string
	Set   bool
}

func (t *envText) Decode(v string) error {
	t.Value, t.Set = v, true
	return nil
}

// field is one variable of Config.
type field struct {
	name  string // without the prefix: PAGE_SIZE
	index int    // in Config
	group string
	desc  string
}

func (f field) env() string { return envPrefix + "_" + f.name }

func configFields() []field {
	var out []field
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		sf := t.Field(i)
		if name := sf.Tag.Get("envconfig"); name != "" {
			out = append(out, field{name: name, index: i, group: sf.Tag.Get("group"), desc: sf.Tag.Get("desc")})
		}
	}
	return out
}

// readEnv has envconfig read every variable of Config as text: a struct of
// the same field names and tags whose fields are envText.
func readEnv() (map[string]envText, error) {
	fields := configFields()
	sfs := make([]reflect.StructField, len(fields))
	ct := reflect.TypeFor[Config]()
	for i, f := range fields {
		sf := ct.Field(f.index)
		sfs[i] = reflect.StructField{Name: sf.Name, Type: reflect.TypeFor[envText](), Tag: reflect.StructTag(`envconfig:"` + f.name + `"`)}
	}
	v := reflect.New(reflect.StructOf(sfs))
	if err := envconfig.Process(envPrefix, v.Interface()); err != nil {
		return nil, err
	}
	out := map[string]envText{}
	for i, f := range fields {
		t := v.Elem().Field(i).Interface().(envText)
		// envconfig falls back to the unprefixed name (PAGE_SIZE, SINK,
		// LOG_LEVEL) when FORMSYNC_… is unset. Such generic names are often
		// set for other programs in the same container: formsync reads
		// FORMSYNC_* only, as documented.
		if _, ok := os.LookupEnv(f.env()); !ok {
			t = envText{}
		}
		// An empty value is unset: a blank ConfigMap entry takes the default.
		if t.Value == "" {
			t.Set = false
		}
		out[f.name] = t
	}
	return out, nil
}

// LoadConfig reads the configuration from the process environment (tests
// set it with t.Setenv). The error lists every variable that does not
// parse; the Config is complete anyway (a variable that does not parse
// keeps its default), so that a command can use the variables it reads.
func LoadConfig() (Config, error) {
	raw, err := readEnv()
	if err != nil {
		return defaultConfig(), &ConfigError{Problems: []string{err.Error()}}
	}
	c := parseConfig(raw)
	if len(c.problems) > 0 {
		var p []string
		for _, f := range configFields() {
			if msg, ok := c.problems[f.name]; ok {
				p = append(p, msg)
			}
		}
		return c, &ConfigError{Problems: p}
	}
	return c, nil
}

// defaultConfig is the configuration of an empty environment.
func defaultConfig() Config { return parseConfig(nil) }

// parseConfig parses raw values over the defaults.
func parseConfig(raw map[string]envText) Config {
	var c Config
	c.problems = map[string]string{}
	v := reflect.ValueOf(&c).Elem()
	for _, f := range configFields() {
		t := raw[f.name]
		if !t.Set {
			t.Value = defaults[f.name].value
		}
		if err := setField(v.Field(f.index), t.Value); err != nil {
			c.problems[f.name] = fmt.Sprintf("%s=%s: %v", f.env(), quote(f, t.Value), err)
			setField(v.Field(f.index), defaults[f.name].value) // a default always parses
			continue
		}
		if positive[f.name] && t.Set && v.Field(f.index).IsZero() {
			c.problems[f.name] = fmt.Sprintf("%s=%s: must be above 0 (unset it for the default, %s)", f.env(), quote(f, t.Value), defaults[f.name].value)
		}
	}
	// A word from a list is read in any case, as FORMSYNC_FIELD_POLICY's
	// actions are: TEXT, BigQuery and Debug say what they mean. Anything
	// else is left as written, for the problem to quote.
	for _, w := range []struct {
		v     *string
		words []string
	}{
		{&c.Sink, []string{"sqlite", "bigquery"}},
		{&c.LogFormat, []string{"json", "text"}},
		{&c.LogLevel, []string{"debug", "info", "warn", "error"}},
	} {
		if lower := strings.ToLower(*w.v); slices.Contains(w.words, lower) {
			*w.v = lower
		}
	}
	if !raw["SHARD_INDEX"].Set {
		// An Indexed Job tells each pod its index.
		if v, ok := os.LookupEnv("JOB_COMPLETION_INDEX"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				c.problems["SHARD_INDEX"] = fmt.Sprintf("JOB_COMPLETION_INDEX=%q (the shard index when FORMSYNC_SHARD_INDEX is unset) is not a whole number", v)
			}
			c.ShardIndex = n
		}
	}
	return c
}

// quote shows a value in a problem; a secret is never shown.
func quote(f field, v string) string {
	if f.name == "API_TOKEN" {
		return formsapi.Redacted
	}
	return strconv.Quote(v)
}

// setField parses s into a field of Config by its type.
func setField(v reflect.Value, s string) error {
	s = strings.TrimSpace(s)
	switch p := v.Addr().Interface().(type) {
	case *string:
		*p = s
	case *formsapi.Secret:
		*p = formsapi.Secret(s)
	case *[]string:
		*p = nil
		if s != "" {
			for _, x := range strings.Split(s, ",") {
				*p = append(*p, strings.TrimSpace(x))
			}
		}
	case *int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("not a whole number")
		}
		*p = n
	case *float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return errors.New("not a number (e.g. 5 or 0.5)")
		}
		*p = x
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			if _, nerr := strconv.ParseFloat(s, 64); nerr == nil && s != "0" {
				return fmt.Errorf("a duration needs a unit: e.g. %ss", s)
			}
			return errors.New("not a duration: use a number and a unit (ms, s, m or h), e.g. 30s, 2m or 24h")
		}
		*p = d
	case *bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("use true or false")
		}
		*p = b
	default:
		panic(fmt.Sprintf("cli: no parser for %s", v.Type()))
	}
	return nil
}

// ConfigError lists every configuration problem found.
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string {
	return "configuration: " + strings.Join(e.Problems, "; ")
}

// maxTokenFile bounds the read of FORMSYNC_API_TOKEN_FILE: a token is a
// few dozen bytes, and a path such as /dev/zero must not fill the memory.
const maxTokenFile = 64 << 10

// readTokenFile reads the token file, bounded.
func readTokenFile(path string) (formsapi.Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the file: %w", unwrapPath(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("cannot read the file: %w", unwrapPath(err))
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("the file holds more than %d KiB: it must hold only the token", maxTokenFile>>10)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("the file is empty: it must hold the token")
	}
	return formsapi.Secret(tok), nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Token returns the API token: FORMSYNC_API_TOKEN, or the content of
// FORMSYNC_API_TOKEN_FILE.
func (c *Config) Token() (formsapi.Secret, error) {
	if c.token != "" {
		return c.token, nil
	}
	if c.APITokenFile == "" {
		return c.APIToken, nil
	}
	tok, err := readTokenFile(c.APITokenFile)
	if err != nil {
		return "", fmt.Errorf("FORMSYNC_API_TOKEN_FILE=%q: %w", c.APITokenFile, err)
	}
	return tok, nil
}

// envNames lists every variable formsync reads.
func envNames() []string {
	var names []string
	for _, f := range configFields() {
		names = append(names, f.env())
	}
	return names
}

// writeEnv prints every variable formsync reads as NAME=value, with the
// value in effect (the environment's, else the default) and secrets
// redacted: what `formsync env` shows an operator, and what the tests of
// the Kubernetes manifests read the binary's variables from.
func writeEnv(w io.Writer, c Config) {
	for _, f := range configFields() {
		val := c.valueText(f)
		if f.name == "TMP_DIR" && c.TmpDir == "" {
			val = os.TempDir()
		}
		fmt.Fprintf(w, "%s=%v\n", f.env(), val)
	}
}

// valueText is a variable's value in effect, as it would be written.
func (c *Config) valueText(f field) string {
	switch x := reflect.ValueOf(c).Elem().Field(f.index).Interface().(type) {
	case formsapi.Secret:
		if x == "" {
			return ""
		}
		return formsapi.Redacted
	case []string:
		return strings.Join(x, ",")
	case time.Duration:
		return shortDuration(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return redactedURL(x)
	default:
		return fmt.Sprint(x)
	}
}

// defaultText is a variable's default as help and the README show it.
func defaultText(name string) string {
	d := defaults[name]
	return cmp.Or(d.show, d.value)
}

// Usage describes every variable with its default.
func Usage() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, f := range configFields() {
		def := defaultText(f.name)
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.env(), def, f.desc)
	}
	tw.Flush()
	return b.String()
}

// fieldsOf returns the fields of the given groups.
func fieldsOf(groups ...string) []field {
	return slices.DeleteFunc(configFields(), func(f field) bool { return !slices.Contains(groups, f.group) })
}
