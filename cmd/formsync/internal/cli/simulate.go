package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/internal/loopback"
)

// shutdownBound is how long a stopping simulator waits for the requests in
// flight.
const shutdownBound = 10 * time.Second

func runSimulate(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "loopback address to listen on")
	var accounts listFlag
	fs.Var(&accounts, "accounts", "serve several accounts, e.g. acme,globex: each its own token and forms (ACCOUNT-FORM for each of -forms), its token in a file of -token-dir, for FORMSYNC_API_TOKEN_DIR")
	tokenDir := fs.String("token-dir", "", "with -accounts, the directory the token files are written to (default: a new temporary one, removed on exit)")
	arrive := fs.Duration("arrive", 0, "add one submission to every form each interval while running, e.g. 1s, as users submitting the forms (0 = none)")
	var opts apisim.Options
	opts.RegisterFlags(fs)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if *arrive < 0 {
		fmt.Fprintf(e.stderr, "formsync simulate: -arrive %s: want an interval > 0, or 0 for no arrivals\n", *arrive)
		return exitUsage
	}
	if host, _, err := net.SplitHostPort(*addr); err != nil || !loopback.Host(host) {
		fmt.Fprintf(e.stderr, "formsync simulate: -addr %q: the simulator only listens on loopback (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)\n", *addr)
		return exitUsage
	}
	var sim *apisim.Server // the one account's, or the first account's
	var servers []*apisim.Server
	var handler http.Handler
	var stats func() int
	var tokens *simTokens
	if len(accounts) > 0 {
		acc, names, err := accountsSim(opts, accounts)
		if err != nil {
			fmt.Fprintf(e.stderr, "formsync simulate: -accounts: %v\n", err)
			return exitUsage
		}
		if tokens, err = writeSimTokens(*tokenDir, acc, names); err != nil {
			fmt.Fprintf(e.stderr, "formsync simulate: writing the token files: %v\n", err)
			return exitFailed
		}
		defer tokens.remove()
		sim, handler = acc.Server(names[0]), acc
		for _, name := range names {
			servers = append(servers, acc.Server(name))
		}
		stats = func() int {
			n := 0
			for _, name := range names {
				n += acc.Server(name).Stats().Requests
			}
			return n
		}
	} else {
		sim = apisim.New(opts)
		servers = []*apisim.Server{sim}
		handler, stats = sim, func() int { return sim.Stats().Requests }
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync simulate: %v\n", err)
		return exitFailed
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	if tokens != nil {
		fmt.Fprintf(e.stdout, "API simulator: http://%s/api/forms/{%s}/submissions\n", ln.Addr(), strings.Join(tokens.forms, ","))
		tokens.print(e.stdout)
	} else {
		fmt.Fprintf(e.stdout, "API simulator: http://%s/api/forms/{%s}/submissions (token from -token, default %q)\n",
			ln.Addr(), strings.Join(sim.FormIDs(), ","), apisim.DefaultToken)
	}
	fmt.Fprintf(e.stdout, "response form: %s\n", variantsText(opts))
	if n, w := sim.PlanLimit(); n > 0 {
		// Said here, not to the client: it must find the limit from the
		// X-RateLimit headers, as it would against the live service.
		fmt.Fprintf(e.stdout, "plan limit: %d requests per %s window (not announced; X-RateLimit-* headers sent)\n", n, w)
	}
	for _, line := range paceText(opts, sim) {
		fmt.Fprintln(e.stdout, line)
	}
	if tokens != nil {
		fmt.Fprintln(e.stdout, "  (the data and the time are each account's: formsync reads the accounts at once, each through a client of its own, at its own rate limit)")
	}
	if *arrive > 0 {
		fmt.Fprintf(e.stdout, "arrivals: one submission to every form each %s (-arrive)\n", *arrive)
	}
	if opts.Webhook != "" {
		// The path is left out: it holds the receiver's secret.
		host := opts.Webhook
		if u, err := url.Parse(opts.Webhook); err == nil {
			host = u.Host
		}
		fmt.Fprintf(e.stdout, "webhook: POST to http://%s/... (-webhook) for every submission added, as the service does\n", host)
	}
	e.log.Info("simulator listening", "addr", ln.Addr().String(), "forms", len(sim.FormIDs()), "accounts", max(1, len(accounts)))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	arrived := make(chan struct{})
	go func() {
		defer close(arrived)
		arrivals(ctx, *arrive, servers)
	}()
	select {
	case err := <-done:
		fmt.Fprintf(e.stderr, "formsync simulate: %v\n", err)
		return exitFailed
	case <-ctx.Done():
	}
	<-arrived
	// Serve returns as soon as Shutdown starts: wait for Shutdown, which
	// lets the requests in flight finish. net/http counts a connection
	// that was opened but has sent no request yet (a client's spare) as
	// busy for its first 5 s: the bound is past that, or a client that
	// just synced would make the stop fail.
	shut, cancel := context.WithTimeout(context.Background(), shutdownBound)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		srv.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("requests still in flight after %s were cut off", shutdownBound)
		}
		fmt.Fprintf(e.stderr, "formsync simulate: stopping: %v\n", err)
		return exitFailed
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(e.stderr, "formsync simulate: %v\n", err)
		return exitFailed
	}
	// The webhooks of the last arrivals are bounded by their timeout.
	wait, cancelWait := context.WithTimeout(context.Background(), apisim.WebhookTimeout+time.Second)
	defer cancelWait()
	sent, failed := 0, 0
	for _, s := range servers {
		s.WaitWebhooks(wait)
		st := s.Stats()
		sent, failed = sent+st.WebhooksSent, failed+st.WebhooksFailed
	}
	if opts.Webhook != "" {
		e.log.Info("simulator stopped", "requests", stats(), "webhooks_sent", sent, "webhooks_failed", failed)
		return exitOK
	}
	e.log.Info("simulator stopped", "requests", stats())
	return exitOK
}

// arrivals adds one submission to every form of servers each interval
// until ctx ends; an interval of 0 adds none.
func arrivals(ctx context.Context, every time.Duration, servers []*apisim.Server) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range servers {
			for _, id := range s.FormIDs() {
				s.Add(id, 1)
			}
		}
	}
}

// accountsSim builds the simulator of several accounts: each serves the
// forms of o, named ACCOUNT-FORM (a form id belongs to one account), and
// takes its own token, o's token (or the default) followed by -ACCOUNT.
func accountsSim(o apisim.Options, names []string) (*apisim.Accounts, []string, error) {
	forms := o.Forms
	if len(forms) == 0 {
		forms = apisim.DefaultForms
	}
	base := cmp.Or(o.Token, apisim.DefaultToken)
	each := map[string]apisim.Options{}
	var ordered []string
	for _, name := range names {
		if !accountName.MatchString(name) {
			return nil, nil, fmt.Errorf("%q is not an account name: letters, digits, '.', '_' and '-', starting with a letter or digit (it names a token file)", name)
		}
		if _, dup := each[name]; dup {
			return nil, nil, fmt.Errorf("account %q is listed twice", name)
		}
		a := o
		a.Token = base + "-" + name
		a.Forms = nil
		for _, f := range forms {
			a.Forms = append(a.Forms, name+"-"+f)
		}
		each[name] = a
		ordered = append(ordered, name)
	}
	return apisim.NewAccounts(each), ordered, nil
}

// simTokens are the token files of a simulator of several accounts.
type simTokens struct {
	dir       string
	temporary bool // made by simulate, removed on exit
	names     []string
	tokens    map[string]string
	forms     []string // every account's
	entries   []string // FORMSYNC_FORMS: account:form
}

// writeSimTokens writes each account's token to a file named after it in
// dir (a new temporary directory when dir is ""), as a mounted Secret
// holds them for FORMSYNC_API_TOKEN_DIR.
func writeSimTokens(dir string, acc *apisim.Accounts, names []string) (*simTokens, error) {
	t := &simTokens{dir: dir, names: names, tokens: map[string]string{}}
	if dir == "" {
		d, err := os.MkdirTemp("", "formsync-simulate-tokens-")
		if err != nil {
			return nil, err
		}
		t.dir, t.temporary = d, true
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, name := range names {
		srv := acc.Server(name)
		tok := srv.Token()
		t.tokens[name] = tok
		if err := os.WriteFile(filepath.Join(t.dir, name), []byte(tok+"\n"), 0o600); err != nil {
			t.remove()
			return nil, err
		}
		for _, f := range srv.FormIDs() {
			t.forms = append(t.forms, f)
			t.entries = append(t.entries, name+":"+f)
		}
	}
	return t, nil
}

// print says how to point formsync at the accounts.
func (t *simTokens) print(w io.Writer) {
	fmt.Fprintf(w, "accounts: %s, one token each, in a file per account in %s:\n", strings.Join(t.names, ", "), t.dir)
	for _, name := range t.names {
		fmt.Fprintf(w, "  %s: token file %s (token %q)\n", name, filepath.Join(t.dir, name), t.tokens[name])
	}
	fmt.Fprintln(w, "to sync them all, in the shell that runs formsync:")
	fmt.Fprintln(w, "  unset FORMSYNC_API_TOKEN FORMSYNC_API_TOKEN_FILE")
	fmt.Fprintf(w, "  export FORMSYNC_API_TOKEN_DIR=%s\n", t.dir)
	fmt.Fprintf(w, "  export FORMSYNC_FORMS=%s\n", strings.Join(t.entries, ","))
	if t.temporary {
		fmt.Fprintln(w, "(the directory is removed when the simulator stops; -token-dir keeps the files where you say)")
	}
}

// remove removes a temporary token directory.
func (t *simTokens) remove() {
	if t.temporary {
		os.RemoveAll(t.dir)
	}
}

// variantsText says which response form each form speaks, e.g.
// "newer (contact: live)".
func variantsText(o apisim.Options) string {
	var own []string
	for _, id := range slices.Sorted(maps.Keys(o.FormVariants)) {
		own = append(own, id+": "+o.FormVariants[id].String())
	}
	if len(own) == 0 {
		return o.Variant.String()
	}
	return o.Variant.String() + " (" + strings.Join(own, ", ") + ")"
}

// paceText says what the simulator's settings mean for a first sync: the
// page size each response form serves, the data's dates, and the requests
// that make, at formsync's default client rate limit (FORMSYNC_RATE_LIMIT)
// or the simulator's own, whichever is slower: the pace, not the
// simulator, sets how long a sync takes.
func paceText(o apisim.Options, sim *apisim.Server) []string {
	def := defaultConfig()
	var lines []string
	pages, rows := 0, 0
	perPage := map[apisim.Variant]int{apisim.Older: 25, apisim.Newer: min(def.PageSize, 100), apisim.Live: min(def.PageSize, 100)}
	seen := map[apisim.Variant]bool{}
	var newest time.Time
	for _, id := range sim.FormIDs() {
		v, ok := o.FormVariants[id]
		if !ok {
			v = o.Variant
		}
		n := sim.Len(id)
		rows += n
		pages += max(1, (n+perPage[v]-1)/perPage[v])
		seen[v] = true
		for _, s := range sim.Submissions(id) {
			if s.CreatedAt.After(newest) {
				newest = s.CreatedAt
			}
		}
	}
	if seen[apisim.Older] {
		lines = append(lines, "  older: 25 submissions a page whatever the limit asked (FORMSYNC_PAGE_SIZE), and no ids")
	}
	if seen[apisim.Newer] || seen[apisim.Live] {
		lines = append(lines, fmt.Sprintf("  newer/live: the limit asked, FORMSYNC_PAGE_SIZE (default %d, at most 100), a page", def.PageSize))
	}
	if !newest.IsZero() {
		lines = append(lines, fmt.Sprintf("data: %d submissions, the newest created at %s (-start dates the oldest instead)", rows, newest.UTC().Format(time.RFC3339)))
	}
	rate, by := def.RateLimit, fmt.Sprintf("formsync's default FORMSYNC_RATE_LIMIT=%g requests/s", def.RateLimit)
	if o.RateLimit > 0 && o.RateLimit < rate {
		rate, by = o.RateLimit, fmt.Sprintf("the simulator's -rate-limit %g requests/s", o.RateLimit)
	}
	secs := float64(pages) / rate
	lines = append(lines, fmt.Sprintf("a first sync: about %d requests (one a page) at %s: about %s;", pages, by, humanSeconds(secs)),
		"  the client's rate limit sets the pace, not the simulator: FORMSYNC_RATE_LIMIT=50 asks ten times as fast")
	if o.RateLimit > 0 {
		lines = append(lines, fmt.Sprintf("  the simulator answers 429 above %g requests/s (-rate-limit)", o.RateLimit))
	} else {
		lines = append(lines, "  the simulator itself has no rate limit (-rate-limit N answers 429 above N requests/s)")
	}
	return lines
}
