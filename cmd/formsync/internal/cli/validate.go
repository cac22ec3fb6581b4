package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/files"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/robfig/cron/v3"
)

// Need says which parts of the configuration a command uses; the log
// settings are checked whenever any part is.
type Need struct {
	API   bool // API URL, token, the engine's settings
	Forms bool // FORMSYNC_FORMS (backfill names its form with --form)
	Sink  bool
	Sched bool
	// Policy: the field policy (every command that reads the API, and
	// forget, which matches hashed values).
	Policy bool
}

// commandNeeds is what each command checks before it starts, and what
// `formsync env -check COMMAND` checks. (reconcile given form names on its
// command line does not need FORMSYNC_FORMS.)
var commandNeeds = map[string]Need{
	"sync":      {API: true, Forms: true, Sink: true},
	"run":       {API: true, Forms: true, Sink: true, Sched: true},
	"backfill":  {API: true, Sink: true},
	"reconcile": {API: true, Forms: true, Sink: true},
	"forget":    {Sink: true, Policy: true},
	"remove":    {Sink: true},
	"status":    {Sink: true},
	// dbt reads the schedule for the freshness it writes.
	"dbt": {Sink: true},
}

// needs is what command checks before it starts. A name without an entry
// is a formsync bug, never a configuration that checks nothing.
func needs(command string) Need {
	n, ok := commandNeeds[command]
	if !ok {
		panic("cli: no configuration needs for command " + command)
	}
	return n
}

// checkable lists the commands `formsync env -check` takes.
func checkable() string {
	return orList(slices.Sorted(maps.Keys(commandNeeds)))
}

func (n Need) groups() []string {
	g := []string{"log"}
	if n.API {
		g = append(g, "api")
	}
	if n.API || n.Policy {
		g = append(g, "policy")
	}
	if n.Sink {
		g = append(g, "sink")
	}
	if n.Sched {
		g = append(g, "sched")
	}
	return g
}

// problems collects configuration problems by variable, so that a
// variable is reported once (the first, most specific problem wins) and in
// the order of `formsync help`.
type problems struct {
	byVar map[string][]string
	other []string
}

func (p *problems) add(name, format string, a ...any) {
	if p.byVar == nil {
		p.byVar = map[string][]string{}
	}
	p.byVar[name] = append(p.byVar[name], fmt.Sprintf(format, a...))
}

func (p *problems) has(name string) bool { return len(p.byVar[name]) > 0 }

func (p *problems) err() error {
	var out []string
	for _, f := range configFields() {
		out = append(out, p.byVar[f.name]...)
	}
	out = append(out, p.other...)
	if len(out) == 0 {
		return nil
	}
	return &ConfigError{Problems: out}
}

// Validate checks what the command needs and returns every problem at once.
// It only reports: what the configuration names in files was read by the
// load step (load), whose problems (a missing or unreadable token, a hash
// key too short) are among those reported, so that they are not found
// after everything else was fixed. It changes nothing in c.
func (c *Config) Validate(n Need) error {
	var p problems
	groups := n.groups()
	for _, f := range fieldsOf(groups...) {
		if msg, ok := c.problems[f.name]; ok {
			p.add(f.name, "%s", msg)
		}
	}
	if n.API {
		c.validateAPI(&p, n.Forms)
	}
	if n.API || n.Policy {
		c.validatePolicy(&p)
		c.validateFieldTypes(&p)
	}
	if n.Sched {
		c.reportLoaded(&p, "TRIGGER_SECRET_FILE")
		if _, port, _ := net.SplitHostPort(c.TriggerAddr); c.TriggerSecretFile != "" && c.TriggerAddr == c.HTTPAddr && port != "0" {
			p.add("TRIGGER_ADDR", "FORMSYNC_TRIGGER_ADDR=%q is FORMSYNC_HTTP_ADDR too: the webhook endpoint has an address of its own, so that exposing it exposes neither the metrics nor the probes", c.TriggerAddr)
		}
	}
	if n.API || n.Sink {
		// Every command that reads the API or the sink reads
		// FORMSYNC_FORMS, if only to list the configured forms.
		c.accountFormProblems(&p)
	}
	if n.Sink {
		switch c.Sink {
		case "sqlite":
			if c.SQLitePath == "" {
				p.add("SQLITE_PATH", "FORMSYNC_SQLITE_PATH is empty")
			} else if err := sqlite.CheckPath(c.SQLitePath); err != nil {
				p.add("SQLITE_PATH", "FORMSYNC_SQLITE_PATH: %v", err)
			}
		case "bigquery":
			if c.BQProject == "" {
				p.add("BQ_PROJECT", "FORMSYNC_SINK=bigquery needs FORMSYNC_BQ_PROJECT (the Google Cloud project id)")
			}
			// What the sink would refuse when it opens, checked now: exit
			// 2, every problem at once, before any connection.
			if err := c.bigQuery().Validate(); err != nil {
				c.libraryProblems(&p, "bigquery", err)
			}
		default:
			p.add("SINK", "FORMSYNC_SINK=%q is not a sink: use sqlite or bigquery", c.Sink)
		}
	}
	// Each variable's own check (its check and oneof tags), unless it has
	// a problem already.
	for _, f := range fieldsOf(groups...) {
		if p.has(f.name) {
			continue
		}
		value := reflect.ValueOf(c).Elem().Field(f.index)
		switch {
		case f.words != nil:
			if !slices.Contains(f.words, value.String()) {
				p.add(f.name, "%s=%q: use %s", f.env(), value.String(), orList(f.words))
			}
		case checks[f.check] != nil:
			if msg := checks[f.check](value.String()); msg != "" {
				p.add(f.name, "%s=%s", f.env(), msg)
			}
		}
	}
	return p.err()
}

// orList is words as a sentence says them: "a, b or c".
func orList(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// checks are the checks a variable's check tag names (positive is made
// when the variable is read). Each takes the value and returns what
// follows "FORMSYNC_NAME=" in the problem, "" when the value is fine.
var checks = map[string]func(value string) string{
	"cron": func(v string) string {
		if err := checkSchedule(v); err != nil {
			return fmt.Sprintf("%q %v", v, err)
		}
		return ""
	},
	"listen": func(v string) string {
		if err := checkListenAddr(v); err != nil {
			return fmt.Sprintf("%q: %v", v, err)
		}
		return ""
	},
	// Rows are staged there: a missing directory failed every form of
	// every run, exit 1, after the configuration was called complete.
	"staging": func(v string) string {
		if v == "" {
			return ""
		}
		if fi, err := os.Stat(v); err != nil || !fi.IsDir() {
			return fmt.Sprintf("%q is not a directory: rows are staged there; create it or point at one (the system temp dir when unset)", v)
		}
		f, err := os.CreateTemp(v, ".formsync-check-*")
		if err != nil {
			// A read-only root filesystem without its emptyDir.
			return fmt.Sprintf("%q: cannot write there (%v): rows are staged there; point it at a writable directory", v, errors.Unwrap(err))
		}
		f.Close()
		os.Remove(f.Name())
		return ""
	},
	// A store that cannot be opened would fail every run's files phase.
	"filestore": func(v string) string {
		if v == "" {
			return ""
		}
		if err := files.CheckStoreURL(v); err != nil {
			return err.Error()
		}
		return ""
	},
	// A push that cannot happen was a warning after each run, its metrics
	// lost.
	"pushgateway": func(v string) string {
		if v == "" {
			return ""
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Sprintf("%q is not an http(s) URL with a host, e.g. http://pushgateway:9091", redactedURL(v))
		}
		return ""
	},
}

// validatePolicy reports what the load step found wrong with the field
// policy and its key: a policy that hashes without a usable key is
// refused before anything is read.
func (c *Config) validatePolicy(p *problems) {
	c.reportLoaded(p, "FIELD_POLICY", "FIELD_HASH_KEY_FILE")
}

// validateFieldTypes reports the pinned field types that did not parse,
// naming the form and field of a type that is not one.
func (c *Config) validateFieldTypes(p *problems) {
	c.reportLoaded(p, "FIELD_TYPES")
}

// parseFieldTypes reads FORMSYNC_FIELD_TYPES, a JSON object of form ids
// to objects of field names to type names, and returns every problem.
func parseFieldTypes(text string) (map[string]fieldtype.Set, []error) {
	var raw map[string]map[string]string
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, []error{fmt.Errorf(`not a JSON object of form ids, each an object of field names and their types, e.g. {"contact":{"rating":"integer","zip":"string"}}: %v`, err)}
	}
	pins := make(map[string]fieldtype.Set, len(raw))
	var errs []error
	for _, form := range slices.Sorted(maps.Keys(raw)) {
		pins[form] = make(fieldtype.Set, len(raw[form]))
		var named []string
		for _, field := range slices.Sorted(maps.Keys(raw[form])) {
			// A pin names its field ignoring case (fieldtype.Columns.Pin),
			// as the field policy does: two that differ only in case
			// would pin one field twice.
			if i := slices.IndexFunc(named, func(n string) bool { return strings.EqualFold(n, field) }); i >= 0 {
				errs = append(errs, fmt.Errorf("form %q: fields %q and %q are one field (field names are matched ignoring case, as in FORMSYNC_FIELD_POLICY): keep one pin", form, named[i], field))
				continue
			}
			named = append(named, field)
			t, err := fieldtype.Parse(raw[form][field])
			if err != nil {
				errs = append(errs, fmt.Errorf("form %q, field %q: %v", form, field, err))
				continue
			}
			pins[form][field] = t
		}
	}
	return pins, errs
}

// minBackoffMax is the shortest FORMSYNC_BACKOFF_MAX accepted.
const minBackoffMax = 100 * time.Millisecond

func (c *Config) validateAPI(p *problems, forms bool) {
	if c.APIBaseURL == "" {
		p.add("API_BASE_URL", "FORMSYNC_API_BASE_URL is not set: give the API's base URL, e.g. https://forms.example.com")
	}
	switch {
	case c.APITokenDir != "":
		c.validateAccounts(p, forms)
	case c.APIToken == "" && c.APITokenFile == "":
		p.add("API_TOKEN", "no API token: set FORMSYNC_API_TOKEN_FILE (a file holding the token) or FORMSYNC_API_TOKEN (or FORMSYNC_API_TOKEN_DIR, a token file per account)")
	case c.APIToken != "" && c.APITokenFile != "":
		p.add("API_TOKEN", "both FORMSYNC_API_TOKEN and FORMSYNC_API_TOKEN_FILE are set: keep one")
	case c.APITokenFile != "" && c.tokenErr != nil:
		p.add("API_TOKEN_FILE", "FORMSYNC_API_TOKEN_FILE=%q: %v", c.APITokenFile, c.tokenErr)
	}
	if forms && !p.has("FORMS") {
		entries, accounts := c.Forms, c.APITokenDir != ""
		if accounts {
			entries = c.formEntries
		}
		for _, msg := range formIDProblems(entries, accounts) {
			p.add("FORMS", "FORMSYNC_FORMS: %s", msg)
		}
	}
	if !p.has("SHARD_START_JITTER") && c.ShardStartJitter < 0 {
		p.add("SHARD_START_JITTER", "FORMSYNC_SHARD_START_JITTER=%s is negative: use 0s for no wait", shortDuration(c.ShardStartJitter))
	}
	if !p.has("SHARD_INDEX") && !p.has("SHARD_COUNT") && (c.ShardIndex < 0 || c.ShardIndex >= c.ShardCount) {
		p.add("SHARD_INDEX", "shard %d of %d is impossible: FORMSYNC_SHARD_INDEX (or JOB_COMPLETION_INDEX) must be 0..FORMSYNC_SHARD_COUNT-1", c.ShardIndex, c.ShardCount)
	}
	// The retry budget, FORMSYNC_MAX_WAIT, counts waits: waits of a few
	// milliseconds spend it in hundreds of thousands of retries, which at
	// the rate limit keep one failing page going for hours.
	if c.BackoffMax < minBackoffMax && !p.has("BACKOFF_MAX") {
		p.add("BACKOFF_MAX", "FORMSYNC_BACKOFF_MAX=%s is under %s: the retry budget FORMSYNC_MAX_WAIT counts waits, and waits that short would retry a failing page for hours", shortDuration(c.BackoffMax), shortDuration(minBackoffMax))
	}
	if c.BackoffMax < c.BackoffInitial && !p.has("BACKOFF_MAX") && !p.has("BACKOFF_INITIAL") {
		p.add("BACKOFF_MAX", "FORMSYNC_BACKOFF_MAX=%s is shorter than FORMSYNC_BACKOFF_INITIAL=%s", shortDuration(c.BackoffMax), shortDuration(c.BackoffInitial))
	}

	// The libraries check their own settings; their problems are reported
	// under the variable that sets the field, unless the variable already
	// has a problem of its own.
	tok, _ := c.Token()
	if tok == "" {
		tok = "unset" // reported above; keeps the client from saying it again
	}
	if err := c.clientConfig(tok, nil).Validate(); err != nil {
		c.libraryProblems(p, "formsapi", err)
	}
	if err := c.engineConfig(c.Forms, nil).Validate(); err != nil {
		c.libraryProblems(p, "worker", err)
	}
	if !forms {
		delete(p.byVar, "FORMS") // the command names its form otherwise
	}
}

// libraryProblems reports each problem of lib's Validate error under the
// variable that sets the field it names.
func (c *Config) libraryProblems(p *problems, lib string, err error) {
	for _, leaf := range config.Problems(err) {
		var fe *config.FieldError
		if !errors.As(leaf, &fe) {
			p.other = append(p.other, leaf.Error())
			continue
		}
		f := libraryVariable(lib, fe.Field)
		if f.name == "" {
			p.other = append(p.other, leaf.Error())
			continue
		}
		if f.name == "API_TOKEN" && c.APITokenFile != "" {
			f = fieldByName("API_TOKEN_FILE") // the token came from the file
		}
		if p.has(f.name) {
			continue
		}
		switch f.name {
		case "API_TOKEN", "API_TOKEN_FILE", "FORMS":
			// The problem is the token's or the list's, said without them.
			p.add(f.name, "%s: %v", f.env(), fe.Err)
		default:
			p.add(f.name, "%s=%s: %v", f.env(), quote(f, c.valueText(f)), fe.Err)
		}
	}
}

// formIDProblems checks the form ids, entries of FORMSYNC_FORMS written
// account:form when accounts (FORMSYNC_API_TOKEN_DIR; accountProblems
// checks the accounts). An id becomes one path segment of
// /api/forms/{id}/submissions: "." and ".." would be read as dot-segments
// (another path), "/" and "\" would split it, and whitespace or control
// characters are typing accidents. An empty entry (a doubled or trailing
// comma), an account with no form id after it, and a repeated id are
// refused: all are mistakes, and a repeated id would read the form twice
// in one run.
func formIDProblems(entries []string, accounts bool) []string {
	if len(entries) == 0 {
		return []string{"no form ids: list the ids of the forms to sync, comma-separated (e.g. contact,signup)"}
	}
	var out []string
	seen := map[string]bool{}
	for i, e := range entries {
		id, key := e, e
		if name, rest, ok := strings.Cut(e, ":"); accounts && ok {
			name, id = strings.TrimSpace(name), strings.TrimSpace(rest)
			if id == "" {
				out = append(out, fmt.Sprintf("entry %d %q has no form id after the account %s: write %s:FORMID (the form's id), or remove the entry", i+1, e, name, name))
				continue
			}
			key = name + ":" + id // one form under two accounts: accountProblems
		}
		if msg := formIDProblem(id); msg != "" {
			out = append(out, fmt.Sprintf("entry %d %s", i+1, msg))
			continue
		}
		if seen[key] {
			out = append(out, fmt.Sprintf("form id %q is listed twice", id))
		}
		seen[key] = true
	}
	return out
}

// accountFormProblems refuses FORMSYNC_FORMS entries written account:form
// when no FORMSYNC_API_TOKEN_DIR says which token each account has: they
// would be taken as form ids, colon included, and read (and listed by
// status) as forms that do not exist.
func (c *Config) accountFormProblems(p *problems) {
	if c.APITokenDir != "" {
		return
	}
	for i, e := range c.formEntries {
		if name, id, ok := strings.Cut(e, ":"); ok {
			p.add("FORMS", "FORMSYNC_FORMS: entry %d %q is written account:form, which needs FORMSYNC_API_TOKEN_DIR (a directory of token files, one per account, here one named %s): set it, or list the form id alone (%s)", i+1, e, strings.TrimSpace(name), strings.TrimSpace(id))
		}
	}
}

// flagFormProblem is what is wrong with a command's --form value, "" when
// nothing: it is missing (what says what the form is for), a list, or no
// form id.
func flagFormProblem(form, what string) string {
	switch {
	case form == "":
		return "--form is required: the id of the form " + what
	case strings.Contains(form, ","):
		return fmt.Sprintf("--form %s: name one form (run the command once for each)", form)
	}
	if msg := formIDProblem(form); msg != "" {
		return "--form " + msg
	}
	return ""
}

// formIDProblem says what is wrong with one form id, "" if nothing.
func formIDProblem(id string) string {
	switch {
	case id == "":
		return "is empty: remove the extra comma"
	case !utf8.ValidString(id):
		// The sinks would store the id and then never find it again (they
		// look it up as text), refusing every later commit of the form.
		return fmt.Sprintf("%q is not valid UTF-8: a form id is stored and looked up as text", id)
	case id == "." || id == "..":
		return fmt.Sprintf("%q is not a form id (it would be sent as a relative path segment)", id)
	case strings.ContainsAny(id, `/\`):
		return fmt.Sprintf("%q contains a slash: a form id is one path segment", id)
	case strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Sprintf("%q contains whitespace or control characters", id)
	}
	return ""
}

// checkSchedule checks a cron spec for `formsync run`: that cron parses it,
// that it fires at all (cron gives up on "0 0 30 2 *" and the scheduler
// refuses it), and that an @every interval is not below cron's floor of a
// second, which cron would silently raise to one: "@every -5m" would sync
// back to back.
func checkSchedule(spec string) error {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return fmt.Errorf("is not a cron spec (e.g. \"*/15 * * * *\" or \"@every 5m\"): %v", err)
	}
	f := strings.Fields(spec)
	if len(f) > 0 && (strings.HasPrefix(f[0], "CRON_TZ=") || strings.HasPrefix(f[0], "TZ=")) {
		f = f[1:]
	}
	if len(f) == 2 && f[0] == "@every" {
		if d, err := time.ParseDuration(f[1]); err == nil && d < time.Second {
			return fmt.Errorf("runs every %v: an @every interval must be at least 1s (e.g. @every 5m)", d)
		}
	}
	if sched.Next(time.Now().UTC()).IsZero() {
		return errors.New("never fires (a date that does not exist, such as 30 February): give a schedule that comes round")
	}
	return nil
}

// checkListenAddr checks a host:port for net.Listen without listening.
func checkListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("not host:port (e.g. :9090 or 127.0.0.1:9090)")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if host != "" && net.ParseIP(host) == nil && strings.ContainsAny(host, " /:") {
		return fmt.Errorf("host %q is not an address or a name", host)
	}
	return nil
}

// warnings are settings that work but are likely a mistake; the commands
// that read the API log each once at start.
func (c *Config) warnings() []string {
	var out []string
	// Retry-After counts whole seconds: a cap under one second asks again
	// before the API allows, every time. Tests and a known-conservative
	// API may want exactly that, so it is said, not refused.
	if c.MaxRetryAfter > 0 && c.MaxRetryAfter < time.Second {
		out = append(out, fmt.Sprintf("FORMSYNC_MAX_RETRY_AFTER=%s is under 1s: Retry-After counts whole seconds, so every wait the API asks for is cut short and the page asked again early", shortDuration(c.MaxRetryAfter)))
	}
	if unknown := c.unknownPinnedForms(); len(unknown) > 0 {
		out = append(out, fmt.Sprintf("FORMSYNC_FIELD_TYPES pins fields of forms FORMSYNC_FORMS does not list (%s): their pins do nothing; check the form ids (pins are keyed by form id, without the account)", strings.Join(unknown, ", ")))
	}
	if unused := c.unusedTokens(); len(unused) > 0 {
		out = append(out, fmt.Sprintf("FORMSYNC_API_TOKEN_DIR=%q holds token files no form uses (%s): check the account names in FORMSYNC_FORMS", c.APITokenDir, strings.Join(unused, ", ")))
	}
	// BigQuery may hold a query request up to its default timeoutMs (10 s)
	// before answering.
	if c.Sink == "bigquery" && c.BQTimeout < 15*time.Second {
		out = append(out, fmt.Sprintf("FORMSYNC_BQ_TIMEOUT=%s is under 15s: BigQuery may take up to 10 s to answer a query request, so a slow query can be taken for an outage", shortDuration(c.BQTimeout)))
	}
	return out
}

// unknownPinnedForms are the forms FORMSYNC_FIELD_TYPES pins that
// FORMSYNC_FORMS (as written, whatever form a command names) does not
// list: a misspelt id, whose pins would be stored nowhere.
func (c *Config) unknownPinnedForms() []string {
	ids := c.formEntries
	if c.APITokenDir != "" {
		ids, _ = splitAccounts(c.formEntries)
	}
	var out []string
	for _, form := range slices.Sorted(maps.Keys(c.pins)) {
		if !slices.Contains(ids, form) {
			out = append(out, strconv.Quote(form))
		}
	}
	return out
}

// clientConfig is the API client's share of the configuration, each
// field set by its variable (TestLibraryFieldsMapped keeps this and the
// field tags in step); the token is given, as the load step read it.
func (c *Config) clientConfig(token formsapi.Secret, observe func(formsapi.Event)) formsapi.Config {
	return formsapi.Config{
		BaseURL:        c.APIBaseURL,
		Token:          token, // FORMSYNC_API_TOKEN's, FORMSYNC_API_TOKEN_FILE's or an account's
		RateLimit:      c.RateLimit,
		RequestTimeout: c.RequestTimeout,
		MaxWait:        c.MaxWait,
		MaxRetryAfter:  c.MaxRetryAfter,
		InitialBackoff: c.BackoffInitial,
		MaxBackoff:     c.BackoffMax,
		Observer:       observe,
	}
}

// engineConfig is the engine's share of the configuration, for forms (this
// shard's, or the one a command names), each field set by its variable.
func (c *Config) engineConfig(forms []string, log *slog.Logger) worker.Config {
	cfg := worker.Config{
		Forms:          forms,
		PageSize:       c.PageSize,
		Concurrency:    c.Concurrency,
		FormTimeout:    c.FormTimeout,
		Lookback:       c.Lookback,
		ReconcileEvery: c.ReconcileEvery,
		TmpDir:         c.TmpDir,
		ShutdownGrace:  c.ShutdownTimeout,
		Logger:         log,
		FieldPolicy:    c.fieldPolicy(),
		FieldTypes:     c.pins,
	}
	// Shards started on one tick commit together; one process alone
	// has nothing to spread.
	if c.ShardCount > 1 {
		cfg.StartJitter = c.ShardStartJitter
	}
	return cfg
}

// redactedURL is s with the password of a URL in it replaced: a
// Pushgateway behind basic auth, say, has a secret in its URL.
func redactedURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// fieldPolicy is the parsed field policy as the engine takes it: nil, not
// a nil *Policy in the interface, when there is none.
func (c *Config) fieldPolicy() worker.FieldPolicy {
	if c.policy == nil {
		return nil
	}
	return c.policy
}
