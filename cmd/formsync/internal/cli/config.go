package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/fieldpolicy"
	"github.com/formsync/formsync/worker/formsapi"
)

// envPrefix is the prefix of every formsync environment variable.
const envPrefix = "FORMSYNC"

// Config is formsync's whole configuration, read from FORMSYNC_* environment
// variables. Each field declares one variable, once: its comment says what
// it does and its default, and its tags are the rest of it.
//
//   - envconfig: the variable's name, without the prefix.
//   - default: its value when unset or empty (none when absent); show:
//     the default as help says it, when the value alone would not.
//   - field: the library Config field it sets, as package.Field
//     (formsapi, worker or bigquery). clientConfig, engineConfig and
//     bigQuery set that field by name, so grep follows a variable to its
//     library (TestLibraryFieldsMapped fails for a tag they do not map).
//     The library checks the value itself (its Validate) and names the
//     field in its *config.FieldError; the problem is reported under this
//     variable.
//   - check: a check of its own (checks): positive (0 is refused: the
//     libraries read 0 as "the default"), cron, listen, staging,
//     pushgateway. oneof: the words it takes, in any case.
//   - group: which commands read it (see Need): a command never fails on
//     a variable it does not read. desc: its line in `formsync help`.
//
// Adding a setting is adding a field here (and its row in the manual's
// table of variables, which TestREADMEDocumentsEveryVariable asks for). The tags are
// envconfig's; help is printed from them by Usage, and why envconfig.Process
// does not read them is said at readConfig. TestConfigDocsStateDefaults
// keeps each comment's default and the default tag in step.
type Config struct {
	// API_BASE_URL: base address of the Form Submissions Read API, e.g.
	// https://forms.example.com. http:// is accepted only for loopback hosts.
	// Default: none (required by the commands that read the API).
	APIBaseURL string `envconfig:"API_BASE_URL" field:"formsapi.BaseURL" group:"api" desc:"base URL of the Form Submissions Read API (https; http only on loopback)"`
	// API_TOKEN: the personal access token, given directly. Exactly one of
	// API_TOKEN and API_TOKEN_FILE is needed; prefer the file.
	// Default: none.
	APIToken formsapi.Secret `envconfig:"API_TOKEN" field:"formsapi.Token" group:"api" desc:"API personal access token (prefer FORMSYNC_API_TOKEN_FILE)"`
	// API_TOKEN_FILE: a file holding the personal access token (a mounted
	// Kubernetes Secret). Exactly one of API_TOKEN and API_TOKEN_FILE is
	// needed. Default: none.
	APITokenFile string `envconfig:"API_TOKEN_FILE" group:"api" desc:"file holding the API token (e.g. a mounted Secret)"`
	// API_TOKEN_DIR: a directory holding one token file per account, named
	// after the account (a Kubernetes Secret with one key per account,
	// mounted as a directory), for a deployment that syncs the forms of
	// several accounts. FORMS then names each form's account, account:form.
	// It replaces API_TOKEN and API_TOKEN_FILE. Default: none.
	APITokenDir string `envconfig:"API_TOKEN_DIR" group:"api" desc:"directory of token files, one per account and named after it (a mounted Secret); FORMSYNC_FORMS then reads account:form"`
	// FORMS: comma-separated form ids to sync; with API_TOKEN_DIR each is
	// written account:form (acme:f1,acme:f2,globex:f3). Default: none
	// (required by sync, run and reconcile without form names).
	Forms []string `envconfig:"FORMS" field:"worker.Forms" group:"api" desc:"comma-separated form ids to sync (account:form each with FORMSYNC_API_TOKEN_DIR)"`
	// PAGE_SIZE: the limit asked per page (the older API form ignores it and
	// pages by 25). Default 100.
	PageSize int `envconfig:"PAGE_SIZE" default:"100" field:"worker.PageSize" check:"positive" group:"api" desc:"submissions asked per page (1-100)"`
	// CONCURRENCY: forms synced at once (of each account, with
	// API_TOKEN_DIR). Default 4.
	Concurrency int `envconfig:"CONCURRENCY" default:"4" field:"worker.Concurrency" check:"positive" group:"api" desc:"forms synced at once (of each account, with FORMSYNC_API_TOKEN_DIR)"`
	// RATE_LIMIT: requests per second to the API, shared by all forms
	// (by all forms of an account, each account having its own, with
	// API_TOKEN_DIR). Default 5.
	RateLimit float64 `envconfig:"RATE_LIMIT" default:"5" field:"formsapi.RateLimit" check:"positive" group:"api" desc:"most API requests per second, all forms together (each account's, with FORMSYNC_API_TOKEN_DIR); below it the server's rate-limit headers set the pace"`
	// REQUEST_TIMEOUT: limit of one HTTP attempt, body included. Default 30s.
	RequestTimeout time.Duration `envconfig:"REQUEST_TIMEOUT" default:"30s" field:"formsapi.RequestTimeout" check:"positive" group:"api" desc:"timeout of one API request, body included"`
	// MAX_WAIT: how long one page may spend waiting on retries (429, 5xx)
	// before its form fails for this run, watermark untouched. Default 2m.
	MaxWait time.Duration `envconfig:"MAX_WAIT" default:"2m" field:"formsapi.MaxWait" check:"positive" group:"api" desc:"retry wait budget per page before the form fails for this run"`
	// MAX_RETRY_AFTER: the longest Retry-After honoured; longer ones are
	// capped. Default 1m.
	MaxRetryAfter time.Duration `envconfig:"MAX_RETRY_AFTER" default:"1m" field:"formsapi.MaxRetryAfter" check:"positive" group:"api" desc:"cap on an honoured Retry-After"`
	// BACKOFF_INITIAL: the first wait of the exponential backoff (with
	// jitter) used when no usable Retry-After came with a 429, and on 5xx
	// and timeouts; it doubles per attempt. Default 500ms.
	BackoffInitial time.Duration `envconfig:"BACKOFF_INITIAL" default:"500ms" field:"formsapi.InitialBackoff" check:"positive" group:"api" desc:"first retry wait without a Retry-After; doubles per attempt"`
	// BACKOFF_MAX: the longest wait of that backoff. Default 30s.
	BackoffMax time.Duration `envconfig:"BACKOFF_MAX" default:"30s" field:"formsapi.MaxBackoff" check:"positive" group:"api" desc:"longest retry wait without a Retry-After"`
	// FORM_TIMEOUT: everything one form may wait on in a run (requests,
	// retries, the rate limiter); past it the form fails for this run.
	// Default 10m.
	FormTimeout time.Duration `envconfig:"FORM_TIMEOUT" default:"10m" field:"worker.FormTimeout" check:"positive" group:"api" desc:"time budget of one form in a run, retries and rate limit included"`
	// LOOKBACK: re-read submissions newer than watermark minus this, so
	// later changes (a submission marked as spam) reach the table.
	// Default 0s (off).
	Lookback time.Duration `envconfig:"LOOKBACK" default:"0s" field:"worker.Lookback" group:"api" desc:"re-read this far behind the watermark to pick up changes (e.g. 24h)"`
	// RECONCILE_EVERY: sync and run reconcile a form (read every page, mark
	// the rows no longer served as deleted) once this long has passed since
	// its last reconcile. 0 = only `formsync reconcile` does. Default 0s.
	ReconcileEvery time.Duration `envconfig:"RECONCILE_EVERY" default:"0s" field:"worker.ReconcileEvery" group:"api" desc:"reconcile each form (mark rows deleted upstream) this often during syncs, e.g. 24h; 0 = only 'formsync reconcile'"`
	// FIELD_POLICY: personal fields hashed or dropped before anything is
	// staged, e.g. email=hash,phone=drop; hash is HMAC-SHA256 under the key
	// in FIELD_HASH_KEY_FILE. Default: none (every field kept as served).
	FieldPolicy string `envconfig:"FIELD_POLICY" group:"policy" desc:"fields to hash or drop before staging, e.g. email=hash,phone=drop,*password*=drop"`
	// FIELD_HASH_KEY_FILE: the file holding the secret key of FIELD_POLICY's
	// hash. Default: none (required when FIELD_POLICY hashes a field).
	FieldHashKeyFile string `envconfig:"FIELD_HASH_KEY_FILE" group:"policy" desc:"file holding the secret key of FORMSYNC_FIELD_POLICY's hash (at least 16 bytes)"`
	// FIELD_TYPES: the type of view columns pinned per form and field,
	// whatever their values (docs/types.md), as a JSON object, since
	// field names may hold any character:
	// {"contact":{"rating":"integer","zip":"string"}}. Types: boolean,
	// integer, decimal, date, timestamp, array, string. A pin names its
	// field ignoring case, as FIELD_POLICY does. Every commit of a form
	// stores its pins, so a pin removed is gone at the next.
	// Default: none (every column typed by its values).
	FieldTypes string `envconfig:"FIELD_TYPES" group:"policy" desc:"view column types pinned per form and field, as JSON: {\"contact\":{\"zip\":\"string\"}}"`
	// SINK: sqlite (embedded) or bigquery. Default sqlite.
	Sink string `envconfig:"SINK" default:"sqlite" oneof:"sqlite,bigquery" group:"sink" desc:"destination: sqlite or bigquery"`
	// SQLITE_PATH: the SQLite database file. Default formsync.db.
	SQLitePath string `envconfig:"SQLITE_PATH" default:"formsync.db" group:"sink" desc:"SQLite database file"`
	// BQ_PROJECT: the BigQuery project. Credentials come from Application
	// Default Credentials (Workload Identity on GKE). Default: none
	// (required with SINK=bigquery).
	BQProject string `envconfig:"BQ_PROJECT" field:"bigquery.Project" group:"sink" desc:"BigQuery project (required with FORMSYNC_SINK=bigquery)"`
	// BQ_DATASET: the BigQuery dataset. Default formsync.
	BQDataset string `envconfig:"BQ_DATASET" default:"formsync" field:"bigquery.Dataset" group:"sink" desc:"BigQuery dataset"`
	// BQ_LOCATION: the BigQuery location of the dataset and jobs. Default US.
	BQLocation string `envconfig:"BQ_LOCATION" default:"US" field:"bigquery.Location" group:"sink" desc:"BigQuery location of the dataset and jobs"`
	// BQ_ENDPOINT: overrides the BigQuery API base URL: a regional or
	// Private Service Connect endpoint (credentials sent), or an emulator
	// (http or loopback: none sent). Default: none (Google's endpoint).
	BQEndpoint string `envconfig:"BQ_ENDPOINT" field:"bigquery.Endpoint" group:"sink" desc:"BigQuery API base URL override (regional, Private Service Connect; credentials sent unless http or loopback: emulators)"`
	// BQ_TIMEOUT: how long BigQuery may go without answering (connections
	// refused or unanswered, 5xx) before the step waiting on it fails,
	// watermarks untouched. Default 2m.
	BQTimeout time.Duration `envconfig:"BQ_TIMEOUT" default:"2m" field:"bigquery.Timeout" check:"positive" group:"sink" desc:"how long BigQuery may fail to answer before the sync fails, watermarks untouched"`
	// BQ_JOB_TIMEOUT: how long one BigQuery job (a load, a commit's
	// transaction) may run before formsync cancels it and the step fails,
	// watermarks untouched. Default 10m.
	BQJobTimeout time.Duration `envconfig:"BQ_JOB_TIMEOUT" default:"10m" field:"bigquery.JobTimeout" check:"positive" group:"sink" desc:"how long one BigQuery job may run before it is cancelled and the commit fails"`
	// BQ_PART_ROWS: a form that stages this many rows in one run (a first
	// sync) is committed to BigQuery in parts of this many, each its own
	// load job and transaction; smaller reads commit together, once per
	// run. Default 100000.
	BQPartRows int `envconfig:"BQ_PART_ROWS" default:"100000" field:"bigquery.PartRows" check:"positive" group:"sink" desc:"rows of one form committed to BigQuery as one part of a large read"`
	// FILES_STORE: where the files submissions name are kept, before the
	// service deletes them (30 days after upload): gs://bucket/prefix
	// (Cloud Storage) or file:///absolute/path (a folder). Each file is
	// stored once, named by its SHA-256, and submission_files says where.
	// Default: none (no file is fetched; status counts the files that
	// will expire).
	FilesStore string `envconfig:"FILES_STORE" check:"filestore" group:"sink" desc:"where submissions' files are kept: gs://bucket/prefix or file:///path (unset: not kept)"`
	// FILES_MAX_BYTES: the largest file kept; a larger one is recorded as
	// too_large. Default 26214400 (25 MiB; the service takes 5 MB).
	FilesMaxBytes int `envconfig:"FILES_MAX_BYTES" default:"26214400" check:"positive" group:"sink" desc:"largest file kept, in bytes"`
	// FILES_ALLOW_LOOPBACK: fetch files from loopback addresses (the
	// simulator, a local test service). Default false.
	FilesAllowLoopback bool `envconfig:"FILES_ALLOW_LOOPBACK" default:"false" group:"sink" desc:"fetch files from loopback addresses (tests, the simulator)"`
	// FILES_ALLOW_PRIVATE: fetch files from private network addresses
	// (10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10): a service on
	// your own network. Link-local and metadata addresses are always
	// refused. Default false.
	FilesAllowPrivate bool `envconfig:"FILES_ALLOW_PRIVATE" default:"false" group:"sink" desc:"fetch files from private network addresses"`
	// TMP_DIR: where a run stages rows as NDJSON before committing them.
	// Default: system temp dir (os.TempDir).
	TmpDir string `envconfig:"TMP_DIR" show:"system temp dir" field:"worker.TmpDir" check:"staging" group:"api" desc:"directory for staged rows"`
	// SCHEDULE: cron spec of `formsync run`. Default `*/15 * * * *`.
	Schedule string `envconfig:"SCHEDULE" default:"*/15 * * * *" check:"cron" group:"sched" desc:"cron schedule of 'formsync run' (robfig/cron spec, UTC)"`
	// SYNC_AT_START: `formsync run` syncs once as soon as it starts rather
	// than waiting up to a whole schedule period for the first tick.
	// Default true.
	SyncAtStart bool `envconfig:"SYNC_AT_START" default:"true" group:"sched" desc:"'formsync run' syncs once at start, before the first tick"`
	// HTTP_ADDR: where `formsync run` serves /healthz, /readyz, /metrics.
	// Default `:9090`.
	HTTPAddr string `envconfig:"HTTP_ADDR" default:":9090" check:"listen" group:"sched" desc:"address of /healthz, /readyz and /metrics in 'formsync run'"`
	// TRIGGER_SECRET_FILE: a file holding the secret path segment of the
	// webhook endpoint of `formsync run` (POST /hooks/<secret>/<form id>),
	// a mounted Secret as the token is. Unset, `run` serves no webhook
	// endpoint. Default: none.
	TriggerSecretFile string `envconfig:"TRIGGER_SECRET_FILE" group:"sched" desc:"file holding the secret of the webhook endpoint of 'formsync run' (unset: no endpoint)"`
	// TRIGGER_ADDR: where `formsync run` serves the webhook endpoint, when
	// TRIGGER_SECRET_FILE is set: apart from HTTP_ADDR, so that exposing
	// it (an Ingress) exposes neither the metrics nor the probes.
	// Default `:8081`.
	TriggerAddr string `envconfig:"TRIGGER_ADDR" default:":8081" check:"listen" group:"sched" desc:"address of the webhook endpoint of 'formsync run', with TRIGGER_SECRET_FILE"`
	// PUSHGATEWAY_URL: one-shot commands push their metrics here when set.
	// Default: none (no push).
	PushgatewayURL string `envconfig:"PUSHGATEWAY_URL" check:"pushgateway" group:"api" desc:"Prometheus Pushgateway URL for one-shot runs"`
	// SHARD_INDEX: this pod's shard, when SHARD_COUNT splits the forms
	// across pods of an Indexed Job. Default: JOB_COMPLETION_INDEX, else 0.
	ShardIndex int `envconfig:"SHARD_INDEX" default:"0" show:"JOB_COMPLETION_INDEX, else 0" group:"api" desc:"this pod's shard"`
	// SHARD_COUNT: the number of shards the forms are split into. Default 1.
	ShardCount int `envconfig:"SHARD_COUNT" default:"1" check:"positive" group:"api" desc:"number of shards the forms are split into"`
	// SHARD_START_JITTER: with SHARD_COUNT above 1, each sync or reconcile
	// waits a random time up to this before it reads anything, so that
	// the shards started on one tick do not commit at the same moment
	// (worker.Config.StartJitter, set only for a sharded run). Default 30s.
	ShardStartJitter time.Duration `envconfig:"SHARD_START_JITTER" default:"30s" group:"api" desc:"longest random wait before a sharded run starts (0s: none)"`
	// SHUTDOWN_TIMEOUT: after SIGTERM, how long the commit of what was read
	// completely may take. Default 20s.
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"20s" field:"worker.ShutdownGrace" check:"positive" group:"api" desc:"bound on the commit after SIGTERM"`
	// LOG_FORMAT: auto (text when stderr is a terminal, json otherwise),
	// json (Cloud Logging keys) or text. Default auto.
	LogFormat string `envconfig:"LOG_FORMAT" default:"auto" oneof:"auto,json,text" group:"log" desc:"log format: auto (text on a terminal, json otherwise), json or text"`
	// LOG_LEVEL: debug, info, warn or error. Default info.
	LogLevel string `envconfig:"LOG_LEVEL" default:"info" oneof:"debug,info,warn,error" group:"log" desc:"log level: debug, info, warn or error"`

	// problems are the variables that did not parse, by name; Validate
	// reports those of the groups a command reads.
	problems map[string]string
	// What the load step (load) read, once: token and tokenErr are
	// APITokenFile's token or why it could not be read, accountTokens the
	// tokens of APITokenDir by account, triggerSecret TriggerSecretFile's
	// secret (checked as trigger.NewHandler takes it), policy FieldPolicy
	// parsed with its key (nil for none), pins FieldTypes parsed (nil for
	// none), and loadProblems what could not be read or parsed, by
	// variable, which Validate reports.
	token         formsapi.Secret
	tokenErr      error
	accountTokens map[string]formsapi.Secret
	triggerSecret formsapi.Secret
	policy        *fieldpolicy.Policy
	pins          map[string]fieldtype.Set
	loadProblems  problems
	// formEntries are FORMS as written (with APITokenDir, Forms holds the
	// form ids alone), and formAccount each form's account.
	formEntries []string
	formAccount map[string]string
	// bqObserve is told of every failed BigQuery request (logged).
	bqObserve func(bigquery.Event)
	// bqLogger is told of what the BigQuery sink finds costly (a table
	// clustered otherwise).
	bqLogger *slog.Logger
}

// field is one variable of Config: its field's tags.
type field struct {
	name  string // without the prefix: PAGE_SIZE
	index int    // in Config
	group string
	desc  string
	def   string // the default value; "" for none
	show  string // the default as help shows it, when not def
	// lib and libField are the library Config field the variable sets:
	// "worker", "PageSize".
	lib, libField string
	check         string
	words         []string // oneof
	secret        bool
}

func (f field) env() string { return envPrefix + "_" + f.name }

// defaultText is the variable's default as help and the README show it.
func (f field) defaultText() string {
	if f.show != "" {
		return f.show
	}
	return f.def
}

// libraries are the Config types a variable can set a field of (the field
// tag's package), each validated by its own Validate.
var libraries = map[string]reflect.Type{
	"formsapi": reflect.TypeFor[formsapi.Config](),
	"worker":   reflect.TypeFor[worker.Config](),
	"bigquery": reflect.TypeFor[bigquery.Config](),
}

// configFields is every variable, in the order of Config (and of help).
// A tag that names no library field of the variable's type, or no check,
// is a formsync bug: it panics, at the first use, in every test.
var configFields = sync.OnceValue(func() []field {
	var out []field
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		sf := t.Field(i)
		name := sf.Tag.Get("envconfig")
		if name == "" {
			continue
		}
		f := field{name: name, index: i, group: sf.Tag.Get("group"), desc: sf.Tag.Get("desc"),
			def: sf.Tag.Get("default"), show: sf.Tag.Get("show"), check: sf.Tag.Get("check"),
			secret: sf.Type == reflect.TypeFor[formsapi.Secret]()}
		if w := sf.Tag.Get("oneof"); w != "" {
			f.words = strings.Split(w, ",")
		}
		if lf := sf.Tag.Get("field"); lf != "" {
			f.lib, f.libField, _ = strings.Cut(lf, ".")
			lt, ok := libraries[f.lib]
			if !ok {
				panic(fmt.Sprintf("cli: %s sets a field of %q, not a library of libraries", name, f.lib))
			}
			if target, ok := lt.FieldByName(f.libField); !ok || target.Type != sf.Type {
				panic(fmt.Sprintf("cli: %s sets %s.Config.%s, which is not a field of type %s", name, f.lib, f.libField, sf.Type))
			}
		}
		if _, ok := checks[f.check]; f.check != "" && f.check != "positive" && !ok {
			panic(fmt.Sprintf("cli: %s has check %q, which checks does not hold", name, f.check))
		}
		out = append(out, f)
	}
	return out
})

// fieldByName is the variable of that name (without the prefix); the zero
// field if there is none.
func fieldByName(name string) field {
	for _, f := range configFields() {
		if f.name == name {
			return f
		}
	}
	return field{}
}

// fieldsOf returns the fields of the given groups.
func fieldsOf(groups ...string) []field {
	return slices.DeleteFunc(slices.Clone(configFields()), func(f field) bool { return !slices.Contains(groups, f.group) })
}

// libraryVariable is the variable that sets field of lib's Config; the
// zero field if none does.
func libraryVariable(lib, libField string) field {
	for _, f := range configFields() {
		if f.lib == lib && f.libField == libField {
			return f
		}
	}
	return field{}
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

// LoadConfig reads the configuration from the process environment (tests
// set it with t.Setenv). The error lists every variable that does not
// parse; the Config is complete anyway (a variable that does not parse
// keeps its default), so that a command can use the variables it reads.
func LoadConfig() (Config, error) {
	c := readConfig(os.LookupEnv)
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
func defaultConfig() Config {
	return readConfig(func(string) (string, bool) { return "", false })
}

// readConfig reads every variable of Config through lookup (os.LookupEnv),
// over the defaults, then the files they name (load).
//
// Config is an envconfig specification, and a test checks that
// envconfig.Process reads a well-formed environment into the same Config.
// Process does not read it here because four of formsync's documented
// rules are not envconfig's: Process stops at the first value it cannot
// convert, and says it in its own words, where formsync reports every
// problem at once, each in words a user can act on; it falls back to the
// unprefixed name (PAGE_SIZE, LOG_LEVEL), often set for other programs in
// the same container, where formsync reads FORMSYNC_* only; it takes a
// variable set empty as set, where a blank ConfigMap entry takes the
// default here; and it cannot tell a variable set to 0 from an unset one
// (check:"positive"). Reading is therefore this loop over the same tags.
func readConfig(lookup func(string) (string, bool)) Config {
	var c Config
	c.problems = map[string]string{}
	v := reflect.ValueOf(&c).Elem()
	for _, f := range configFields() {
		text, _ := lookup(f.env())
		text = strings.TrimSpace(text)
		set := text != ""
		if !set {
			text = f.def
		}
		if err := setField(v.Field(f.index), text); err != nil {
			c.problems[f.name] = fmt.Sprintf("%s=%s: %v", f.env(), quote(f, text), err)
			setField(v.Field(f.index), f.def) // a default always parses
			continue
		}
		if f.check == "positive" && set && v.Field(f.index).IsZero() {
			c.problems[f.name] = fmt.Sprintf("%s=%s: must be above 0 (unset it for the default, %s)", f.env(), quote(f, text), f.def)
		}
		// A word from a list is read in any case, as FORMSYNC_FIELD_POLICY's
		// actions are: TEXT, BigQuery and Debug say what they mean. Anything
		// else is left as written, for the problem to quote.
		if lower := strings.ToLower(text); f.words != nil && slices.Contains(f.words, lower) {
			v.Field(f.index).SetString(lower)
		}
	}
	c.formEntries = c.Forms
	if c.APITokenDir != "" {
		c.Forms, c.formAccount = splitAccounts(c.Forms)
	}
	if idx, _ := lookup(fieldByName("SHARD_INDEX").env()); strings.TrimSpace(idx) == "" {
		// An Indexed Job tells each pod its index.
		if s, ok := lookup("JOB_COMPLETION_INDEX"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				c.problems["SHARD_INDEX"] = fmt.Sprintf("JOB_COMPLETION_INDEX=%q (the shard index when FORMSYNC_SHARD_INDEX is unset) is not a whole number", s)
			}
			c.ShardIndex = n
		}
	}
	c.load()
	return c
}

// quote shows a value in a problem; a secret is never shown.
func quote(f field, v string) string {
	if f.secret {
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

// readTokenFile reads the token file, bounded. It is opened without
// blocking: a FIFO with no writer reads as empty rather than hanging the
// start. Whitespace and a UTF-8 byte order mark (an editor's) around the
// token are not part of it.
func readTokenFile(path string) (formsapi.Secret, error) {
	f, err := openNonBlocking(path)
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
	tok := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "\ufeff"))
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
		if f.name == "FORMS" && c.formEntries != nil {
			return strings.Join(c.formEntries, ",")
		}
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

// Usage describes every variable with its default.
func Usage() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, f := range configFields() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.env(), cmp.Or(f.defaultText(), "-"), f.desc)
	}
	tw.Flush()
	return b.String()
}
