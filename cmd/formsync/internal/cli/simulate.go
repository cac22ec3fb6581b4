package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/formsync/formsync/internal/loopback"
	"github.com/formsync/formsync/internal/testkit/apisim"
)

func runSimulate(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "loopback address to listen on")
	var opts apisim.Options
	opts.RegisterFlags(fs)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if host, _, err := net.SplitHostPort(*addr); err != nil || !loopback.Host(host) {
		fmt.Fprintf(e.stderr, "formsync simulate: -addr %q: the simulator only listens on loopback (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)\n", *addr)
		return exitUsage
	}
	sim := apisim.New(opts)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync simulate: %v\n", err)
		return exitFailed
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(e.stdout, "API simulator: http://%s/api/forms/{%s}/submissions (token from -token, default %q)\n",
		ln.Addr(), strings.Join(sim.FormIDs(), ","), apisim.DefaultToken)
	fmt.Fprintf(e.stdout, "response form: %s\n", variantsText(opts))
	if n, w := sim.PlanLimit(); n > 0 {
		// Said here, not to the client: it must find the limit from the
		// X-RateLimit headers, as it would against the live service.
		fmt.Fprintf(e.stdout, "plan limit: %d requests per %s window (not announced; X-RateLimit-* headers sent)\n", n, w)
	}
	for _, line := range paceText(opts, sim) {
		fmt.Fprintln(e.stdout, line)
	}
	e.log.Info("simulator listening", "addr", ln.Addr().String(), "forms", len(sim.FormIDs()))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintf(e.stderr, "formsync simulate: %v\n", err)
		return exitFailed
	case <-ctx.Done():
	}
	// Serve returns as soon as Shutdown starts: wait for Shutdown, which
	// lets the requests in flight finish.
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		srv.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("requests still in flight after 5s were cut off")
		}
		fmt.Fprintf(e.stderr, "formsync simulate: stopping: %v\n", err)
		return exitFailed
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(e.stderr, "formsync simulate: %v\n", err)
		return exitFailed
	}
	st := sim.Stats()
	e.log.Info("simulator stopped", "requests", st.Requests)
	return exitOK
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
