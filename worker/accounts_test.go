package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// TestAccountsSendNoTokenForAFormOfNoAccount: a form no account holds is
// refused without a request.
func TestAccountsSendNoTokenForAFormOfNoAccount(t *testing.T) {
	t.Parallel()
	sim := apisim.New(apisim.Options{Token: "acme-token", Forms: []string{"a1"}, SubmissionsPerForm: 3})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	client, err := formsapi.New(formsapi.Config{BaseURL: srv.URL, Token: "acme-token"})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := worker.NewAccounts(map[string]worker.Source{"acme": client}, map[string]string{"a1": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := acc.Page(t.Context(), "a1", 1, 10); err != nil {
		t.Fatalf("a1: %v", err)
	}
	if _, _, err := acc.Page(t.Context(), "zz", 1, 10); err == nil || !strings.Contains(err.Error(), "no configured account") {
		t.Errorf("a form of no account: %v, want a refusal", err)
	}
	if n := sim.Stats().Requests; n != 1 {
		t.Errorf("%d requests, want 1: none for the form of no account", n)
	}
	if _, err := worker.NewAccounts(map[string]worker.Source{"acme": client}, map[string]string{"g1": "globex"}); err == nil {
		t.Error("a form of an account without a source was accepted")
	}
}

// TestAccountsRejectedTokenStopsOnlyItsAccount: the engine stops the forms
// of the account whose token was refused; the other account's forms
// commit, and the report says which account was rejected.
func TestAccountsRejectedTokenStopsOnlyItsAccount(t *testing.T) {
	t.Parallel()
	sims := apisim.NewAccounts(map[string]apisim.Options{
		"acme":   {Seed: 1, Variant: apisim.Newer, Token: "acme-token", Forms: []string{"a1", "a2"}, SubmissionsPerForm: 50},
		"globex": {Seed: 2, Variant: apisim.Newer, Token: "globex-token", Forms: []string{"g1", "g2"}, SubmissionsPerForm: 50},
	})
	sims.Server("globex").Revoke()
	srv := httptest.NewServer(sims)
	t.Cleanup(srv.Close)
	src := accountSources(t, srv.URL, 50, map[string]string{"acme": "acme-token", "globex": "globex-token"},
		map[string]string{"a1": "acme", "a2": "acme", "g1": "globex", "g2": "globex"})
	dst := memory.New()
	eng, err := worker.New(src, dst, worker.Config{Forms: []string{"g1", "a1", "g2", "a2"}, PageSize: 10, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fatal != nil {
		t.Errorf("Fatal = %v, want nil: only an account's token was rejected", rep.Fatal)
	}
	if rep.Rejected["globex"] == nil || len(rep.Rejected) != 1 {
		t.Errorf("Rejected = %v, want globex alone", rep.Rejected)
	} else if msg := rep.Rejected["globex"].Error(); strings.Count(msg, "globex") != 1 || !errors.Is(rep.Rejected["globex"], formsapi.ErrUnauthorized) {
		t.Errorf("Rejected[globex] = %q: want the account named once, and ErrUnauthorized", msg)
	}
	for _, f := range rep.Forms {
		switch f.Account {
		case "acme":
			if f.Err != nil || f.Inserted != 50 {
				t.Errorf("form %s of acme: inserted %d, err %v; want 50, nil", f.FormID, f.Inserted, f.Err)
			}
		case "globex":
			if !errors.Is(f.Err, formsapi.ErrUnauthorized) {
				t.Errorf("form %s of globex: err %v, want the rejected token", f.FormID, f.Err)
			}
		default:
			t.Errorf("form %s has account %q", f.FormID, f.Account)
		}
	}
	// g1 met the 401; g2 was not sent.
	if got := sims.Server("globex").Stats().PerForm; got["g1"] != 1 || got["g2"] != 0 {
		t.Errorf("globex requests by form: %v, want g1 once and g2 never", got)
	}
	if c := sims.Crossed(); len(c) != 0 {
		t.Errorf("crossed tokens: %v", c)
	}
}

// accountSources is a client per account, routed by form.
func accountSources(tb testing.TB, base string, ceiling float64, tokens, forms map[string]string, wrap ...func(name string, src worker.Source) worker.Source) *worker.Accounts {
	tb.Helper()
	sources := map[string]worker.Source{}
	for name, tok := range tokens {
		c, err := formsapi.New(formsapi.Config{BaseURL: base, Token: formsapi.Secret(tok), RateLimit: ceiling, MaxRetryAfter: 5 * time.Second})
		if err != nil {
			tb.Fatal(err)
		}
		var src worker.Source = c
		for _, w := range wrap {
			src = w(name, src)
		}
		sources[name] = src
	}
	acc, err := worker.NewAccounts(sources, forms)
	if err != nil {
		tb.Fatal(err)
	}
	return acc
}

// finishSource records when the last page of its account was read.
type finishSource struct {
	worker.Source
	mu   sync.Mutex
	last time.Time
}

func (s *finishSource) Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error) {
	p, r, err := s.Source.Page(ctx, formID, page, limit)
	s.mu.Lock()
	s.last = time.Now()
	s.mu.Unlock()
	return p, r, err
}

// BenchmarkAccountsThrottledBeside: an account held by its plan limit does
// not slow another. The unlimited account's forms are read alone, then
// beside an account whose plan allows 2 requests a second; the metric
// unlimited-s is the time from the start of the run to the unlimited
// account's last page, which should be the same (within 10 %) in both.
// Each account's client ceiling (FORMSYNC_RATE_LIMIT) is 50/s, which
// bounds the unlimited account, or 1000/s, where the simulator's latency
// and the 4 forms at once do.
//
//	go test ./worker -run '^$' -bench AccountsThrottledBeside -benchtime 3x
func BenchmarkAccountsThrottledBeside(b *testing.B) {
	const unlimitedForms, throttledForms, perForm = 4, 4, 1000
	for _, bc := range []struct {
		ceiling float64
		beside  bool
	}{{50, false}, {50, true}, {1000, false}, {1000, true}} {
		ceiling, beside := bc.ceiling, bc.beside
		name := fmt.Sprintf("ceiling=%g/alone", ceiling)
		if beside {
			name = fmt.Sprintf("ceiling=%g/beside-throttled", ceiling)
		}
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				opts := map[string]apisim.Options{
					"globex": {Seed: 2, Variant: apisim.Newer, Token: "globex-token", Forms: formNames("g", unlimitedForms), SubmissionsPerForm: perForm, Latency: 20 * time.Millisecond},
				}
				tokens := map[string]string{"globex": "globex-token"}
				forms := map[string]string{}
				var ids []string
				for _, id := range opts["globex"].Forms {
					forms[id] = "globex"
					ids = append(ids, id)
				}
				if beside {
					opts["acme"] = apisim.Options{Seed: 1, Variant: apisim.Newer, Token: "acme-token", Forms: formNames("a", throttledForms), SubmissionsPerForm: 300,
						PlanLimit: 2, PlanWindow: time.Second, Latency: 20 * time.Millisecond}
					tokens["acme"] = "acme-token"
					// The throttled account's forms first: they must not
					// hold the places of the other account's.
					var acme []string
					for _, id := range opts["acme"].Forms {
						forms[id] = "acme"
						acme = append(acme, id)
					}
					ids = append(acme, ids...)
				}
				sims := apisim.NewAccounts(opts)
				srv := httptest.NewServer(sims)
				var globex *finishSource
				src := accountSources(b, srv.URL, ceiling, tokens, forms, func(name string, s worker.Source) worker.Source {
					if name != "globex" {
						return s
					}
					globex = &finishSource{Source: s}
					return globex
				})
				eng, err := worker.New(src, memory.New(), worker.Config{Forms: ids, PageSize: 100, Concurrency: 4, TmpDir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				rep, err := eng.Sync(context.Background())
				b.StopTimer()
				if err != nil || rep.Err() != nil {
					b.Fatalf("sync: %v %v", err, rep.Err())
				}
				total += globex.last.Sub(start)
				if testing.Verbose() {
					var req, lim int
					for _, f := range rep.Forms {
						if f.Account == "globex" {
							req, lim = req+f.Requests, lim+f.Limited
						}
					}
					b.Logf("unlimited account: last page at %v, %d requests, %d answered 429; run %v", globex.last.Sub(start), req, lim, rep.Duration)
				}
				srv.Close()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "unlimited-s")
		})
	}
}

func formNames(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%d", prefix, i+1))
	}
	return out
}

// gateSource holds every page until open is closed (or a time out).
type gateSource struct {
	worker.Source
	open <-chan struct{}
}

func (s *gateSource) Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error) {
	select {
	case <-s.open:
	case <-time.After(10 * time.Second):
		return nil, &formsapi.Response{}, errors.New("held for 10 s: the other account's forms did not get read meanwhile")
	}
	return s.Source.Page(ctx, formID, page, limit)
}

// seenSource closes done once every form of want has been read from.
type seenSource struct {
	worker.Source
	mu   sync.Mutex
	want map[string]bool
	done chan struct{}
}

func (s *seenSource) Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error) {
	p, r, err := s.Source.Page(ctx, formID, page, limit)
	s.mu.Lock()
	if delete(s.want, formID); len(s.want) == 0 && s.done != nil {
		close(s.done)
		s.done = nil
	}
	s.mu.Unlock()
	return p, r, err
}

// TestAccountsEachReadTheirOwnFormsAtOnce: Config.Concurrency counts per
// account, so an account whose forms are held (at its rate limit) does not
// keep another account's forms from being read.
func TestAccountsEachReadTheirOwnFormsAtOnce(t *testing.T) {
	t.Parallel()
	sims := apisim.NewAccounts(map[string]apisim.Options{
		"acme":   {Seed: 1, Variant: apisim.Newer, Token: "acme-token", Forms: []string{"a1", "a2"}, SubmissionsPerForm: 5},
		"globex": {Seed: 2, Variant: apisim.Newer, Token: "globex-token", Forms: []string{"g1", "g2"}, SubmissionsPerForm: 5},
	})
	srv := httptest.NewServer(sims)
	t.Cleanup(srv.Close)
	open := make(chan struct{})
	src := accountSources(t, srv.URL, 50, map[string]string{"acme": "acme-token", "globex": "globex-token"},
		map[string]string{"a1": "acme", "a2": "acme", "g1": "globex", "g2": "globex"},
		func(name string, s worker.Source) worker.Source {
			if name == "acme" {
				return &gateSource{Source: s, open: open}
			}
			return &seenSource{Source: s, want: map[string]bool{"g1": true, "g2": true}, done: open}
		})
	// One form at once: acme's first form holds its place until globex's
	// forms have both been read.
	eng, err := worker.New(src, memory.New(), worker.Config{Forms: []string{"a1", "a2", "g1", "g2"}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
}
