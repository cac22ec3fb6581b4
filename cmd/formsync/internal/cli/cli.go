package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/worker/formsapi"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a form or the run failed
	exitUsage  = 2 // bad configuration or command line
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) int
}

// env is what every command gets: its streams and the configuration.
type env struct {
	stdout, stderr io.Writer
	cfg            Config
	log            *slog.Logger
	// redactor is the log's (redactingHandler), holding every token the
	// load step read; a token read later (an account's rotated one) is
	// added to it before it is used. Nil only in tests.
	redactor *formsapi.Redactor
	// progress, when set, is told how far each form's read got (sync,
	// reconcile); progressEvery overrides progressLogEvery (tests).
	progress      *progressPrinter
	progressEvery time.Duration
}

// newEnv is a command's env over cfg, as LoadConfig returned it: its
// logger redacts every token the load step read, and any read later
// (redactor.Add).
func newEnv(stdout, stderr io.Writer, cfg Config) *env {
	e := &env{stdout: stdout, stderr: stderr, cfg: cfg, redactor: &formsapi.Redactor{}}
	e.redactor.Add(cfg.tokens()...)
	e.log = e.logTo(stderr)
	e.cfg.bqObserve = func(ev bigquery.Event) { logBigQueryRetry(e.log, ev) }
	e.cfg.bqLogger = e.log
	return e
}

// logTo is the process logger writing to w, which redacts every token.
func (e *env) logTo(w io.Writer) *slog.Logger {
	log := newLogger(w, e.cfg)
	if e.redactor != nil {
		log = slog.New(&redactingHandler{inner: log.Handler(), r: e.redactor})
	}
	return log
}

func commands() []command {
	return []command{
		{"sync", "one pass over every form, then exit (the Kubernetes CronJob)", runSync},
		{"run", "long-running: sync on FORMSYNC_SCHEDULE, serve /healthz, /readyz and /metrics", runScheduler},
		{"backfill", "re-read one form (or a window of it) through the same exactly-once path", runBackfill},
		{"reconcile", "read every page of the forms and mark the rows deleted upstream (deleted_at)", runReconcile},
		{"forget", "remove a person's submissions (by key or field value) and keep them out for good", runForget},
		{"remove", "take a form out of formsync: its sync state, and with --rows its stored rows (tombstones stay)", runRemove},
		{"demo", "sync simulated forms into a local SQLite file, twice, and show the result", runDemo},
		{"simulate", "serve the built-in API simulator on loopback", runSimulate},
		{"status", "show each form's watermark, last success and error, rows and lag", runStatus},
		{"dbt", "write a dbt project over the sink: sources, freshness, tests, a staging model per form over its typed view", runDBT},
		{"env", "print every FORMSYNC_* variable with the value in effect (secrets redacted); -check COMMAND validates it", runEnv},
		{"version", "print the version: the one linked in, else the commit it was built from", runVersion},
	}
}

// Main runs the command line args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		// Every variable is parsed here, but a command fails only on the
		// ones it reads (its Validate): version, demo and simulate read none.
		cfg, _ := LoadConfig()
		return c.run(ctx, newEnv(stdout, stderr, cfg), args[1:])
	}
	// The error and a hint, not the whole help, which would scroll the
	// error away.
	fmt.Fprintf(stderr, "formsync: unknown command %q\nRun 'formsync help' for the commands and their configuration.\n", name)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "formsync %s: copies form submissions into BigQuery or SQLite, exactly once.\n\n", formsapi.Version)
	fmt.Fprintln(w, "Usage: formsync <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help       show this help; 'formsync <command> -h' shows a command's flags")
	fmt.Fprintf(w, "\nConfiguration (environment variables, with defaults):\n%s", Usage())
}

// runEnv is `formsync env`: the configuration in effect, and with -check,
// whether it is complete for a command (exit 2 with every problem if not).
func runEnv(_ context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	check := fs.String("check", "", "validate the configuration for this command ("+checkable()+") instead of printing it")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if *check == "" {
		writeEnv(e.stdout, e.cfg)
		if _, err := LoadConfig(); err != nil {
			return configError(e, err)
		}
		return exitOK
	}
	need, ok := commandNeeds[*check]
	if !ok {
		fmt.Fprintf(e.stderr, "formsync env: -check %q: use %s\n", *check, checkable())
		return exitUsage
	}
	if err := e.cfg.Validate(need); err != nil {
		return configError(e, err)
	}
	if need.API {
		for _, w := range e.cfg.warnings() {
			fmt.Fprintf(e.stdout, "warning: %s\n", w)
		}
	}
	fmt.Fprintf(e.stdout, "the configuration is complete for formsync %s\n", *check)
	return exitOK
}

// newLogger builds the process logger: JSON with the keys Cloud Logging reads
// (severity, message), or text, which a person reads; auto is text when w
// is a terminal. Settings that are not valid give auto at info: the
// commands that read them report them.
func newLogger(w io.Writer, cfg Config) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToLower(cfg.LogLevel))); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "text" || (cfg.LogFormat != "json" && isTerminal(w)) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	opts.ReplaceAttr = cloudLoggingKeys
	return slog.New(slog.NewJSONHandler(w, opts))
}

func cloudLoggingKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.MessageKey:
		a.Key = "message"
	case slog.LevelKey:
		a.Key = "severity"
		switch lvl := a.Value.Any().(slog.Level); {
		case lvl >= slog.LevelError:
			a.Value = slog.StringValue("ERROR")
		case lvl >= slog.LevelWarn:
			a.Value = slog.StringValue("WARNING")
		case lvl >= slog.LevelInfo:
			a.Value = slog.StringValue("INFO")
		default:
			a.Value = slog.StringValue("DEBUG")
		}
	}
	return a
}

// parseFlags parses a command's flags; -h says what the command does and
// prints them.
func parseFlags(fs *flag.FlagSet, e *env, args []string) (ok bool, code int) {
	fs.SetOutput(e.stderr)
	fs.Usage = func() { commandUsage(fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, exitOK
		}
		return false, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "formsync %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return false, exitUsage
	}
	return true, 0
}

// readsNoEnv are the commands that read no FORMSYNC_* variable: they run
// the same whatever is set for a deployment.
var readsNoEnv = map[string]bool{"version": true, "demo": true, "simulate": true}

// commandUsage is a command's -h: what it does, its flags (written
// --name, as the docs write them; Go's flag package takes both), and
// where its configuration is listed.
func commandUsage(fs *flag.FlagSet) {
	w := fs.Output()
	flags := 0
	fs.VisitAll(func(*flag.Flag) { flags++ })
	for _, c := range commands() {
		if c.name == fs.Name() {
			synopsis := "formsync " + c.name
			if flags > 0 {
				synopsis += " [flags]"
			}
			fmt.Fprintf(w, "Usage: %s\n\n%s.\n", synopsis, strings.ToUpper(c.summary[:1])+c.summary[1:])
		}
	}
	if flags > 0 {
		fmt.Fprintln(w, "\nFlags:")
		var b strings.Builder
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(w)
		io.WriteString(w, doubleDash.ReplaceAllString(b.String(), "$1--"))
	} else {
		fmt.Fprintln(w, "\nIt takes no flags.")
	}
	if readsNoEnv[fs.Name()] {
		fmt.Fprintln(w, "\nIt reads no FORMSYNC_* environment variable.")
		return
	}
	fmt.Fprintln(w, "\nIt is configured by FORMSYNC_* environment variables: 'formsync help' lists them, 'formsync env' shows the values in effect.")
}

// configProblems are the problems of a Validate error: a *ConfigError's
// list, or the error itself as one problem.
func configProblems(err error) []string {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Problems
	}
	return []string{err.Error()}
}

// doubleDash finds the flag names of PrintDefaults' lines ("  -form").
var doubleDash = regexp.MustCompile(`(?m)^(  )-`)

// runVersion is `formsync version`.
func runVersion(_ context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	fmt.Fprintf(e.stdout, "formsync %s\n", version())
	return exitOK
}

// version is the version linked in (formsapi.Version, set by -ldflags),
// else the one the build stamped: the module's version (go install
// module@version), or the commit of a build from a clone.
func version() string {
	info, ok := debug.ReadBuildInfo()
	return versionOf(formsapi.Version, info, ok)
}

// versionOf is version for a linked version and a build's information.
func versionOf(linked string, info *debug.BuildInfo, ok bool) string {
	if linked != "dev" && linked != "" {
		return linked
	}
	if !ok || info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	setting := map[string]string{}
	for _, s := range info.Settings {
		setting[s.Key] = s.Value
	}
	rev := setting["vcs.revision"]
	if rev == "" {
		return "dev (no commit stamped: built with -buildvcs=false or outside a clone)"
	}
	out := "dev, commit " + rev[:min(len(rev), 12)]
	if t := setting["vcs.time"]; t != "" {
		out += " of " + t
	}
	if setting["vcs.modified"] == "true" {
		out += ", with uncommitted changes"
	}
	return out
}

// configError prints a configuration problem list and returns exitUsage.
func configError(e *env, err error) int {
	var ce *ConfigError
	if errors.As(err, &ce) {
		fmt.Fprintln(e.stderr, "formsync: the configuration has problems:")
		for _, p := range ce.Problems {
			fmt.Fprintf(e.stderr, "  - %s\n", p)
		}
		fmt.Fprintln(e.stderr, "Run 'formsync help' for every variable and its default.")
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "formsync: %v\n", err)
	return exitUsage
}
