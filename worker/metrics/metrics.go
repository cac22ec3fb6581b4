package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

const namespace = "formsync"

// Metrics holds formsync's collectors and the registry they are on. Its
// methods are safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	now      func() time.Time

	requests        *prometheus.CounterVec
	rateLimited     prometheus.Counter
	backoff         prometheus.Counter
	requestDuration prometheus.Histogram

	runs          *prometheus.CounterVec
	rows          *prometheus.CounterVec
	pages         *prometheus.CounterVec
	formFailures  *prometheus.CounterVec
	lastSuccess   *prometheus.GaugeVec
	lastReconcile *prometheus.GaugeVec
	watermarkLag  *prometheus.GaugeVec
	missingRows   *prometheus.GaugeVec
	newFields     *prometheus.CounterVec
	formFields    *prometheus.GaugeVec
	triggers      *prometheus.CounterVec
	conflicts     prometheus.Counter
	// The files phase (worker.Config.Files): files kept and their bytes,
	// files not kept by reason, and files left pending.
	filesStored    *prometheus.CounterVec
	filesBytes     *prometheus.CounterVec
	filesNotStored *prometheus.CounterVec
	filesPending   *prometheus.GaugeVec
	// With several accounts (worker.Accounts): each form's account, and
	// the requests and rejected tokens by account.
	formAccount     *prometheus.GaugeVec
	accountRequests *prometheus.CounterVec
	accountRejected *prometheus.GaugeVec
	commitDuration  prometheus.Histogram
	runDuration     prometheus.Histogram
}

// Option changes how New builds Metrics.
type Option func(*Metrics)

// WithClock sets the clock that stamps last successes and measures
// watermark lag. Defaults to time.Now.
func WithClock(now func() time.Time) Option {
	return func(m *Metrics) { m.now = now }
}

// New returns Metrics with every collector, and the Go runtime and process
// collectors, registered on a registry of its own.
func New(opts ...Option) *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry(), now: time.Now}
	for _, o := range opts {
		o(m)
	}
	// Sync runs take seconds to many minutes, far beyond the default buckets.
	runBuckets := prometheus.ExponentialBuckets(0.5, 2, 14) // 0.5 s .. ~68 min
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "api_requests_total",
		Help: "Forms API request attempts, retries included, by HTTP status (\"error\" when no response arrived).",
	}, []string{"status"})
	m.rateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "api_rate_limited_total",
		Help: "Forms API request attempts answered 429 Too Many Requests.",
	})
	m.backoff = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "api_backoff_seconds_total",
		Help: "Seconds spent waiting before retrying Forms API requests.",
	})
	m.requestDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "api_request_duration_seconds",
		Help:    "Duration of one Forms API request attempt, body included.",
		Buckets: prometheus.DefBuckets,
	})
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "runs_total",
		Help: "Sync runs by result: failure when the commit or any form failed.",
	}, []string{"result"})
	m.rows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "rows_total",
		Help: "Submission rows committed, by form and kind (inserted: new; updated: changed or re-keyed; deleted_upstream: marked deleted by a reconcile; restored: marked rows served again).",
	}, []string{"form", "kind"})
	m.pages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "pages_total",
		Help: "Forms API pages read, by form.",
	}, []string{"form"})
	m.formFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "form_failures_total",
		Help: "Sync runs in which a form failed (its watermark did not move), by form.",
	}, []string{"form"})
	m.lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "last_success_timestamp_seconds",
		Help: "Unix time of the form's last successful sync.",
	}, []string{"form"})
	m.lastReconcile = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "last_reconcile_timestamp_seconds",
		Help: "Unix time of the form's last reconcile (every page read, rows deleted upstream marked).",
	}, []string{"form"})
	m.watermarkLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "watermark_lag_seconds",
		Help: "Seconds between the end of the form's last sync and the created_at of the newest submission loaded.",
	}, []string{"form"})
	m.missingRows = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "form_missing_rows",
		Help: "Submissions the API counts for the form that the sink does not hold after the last complete read (0 when complete).",
	}, []string{"form"})
	m.newFields = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "form_new_fields_total",
		Help: "Fields a form gained after its first rows (a question added to the form), by form; each is also logged once with its name, type and field policy rule.",
	}, []string{"form"})
	m.formFields = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "form_fields",
		Help: "Field names (view columns) the form has after its last successful sync.",
	}, []string{"form"})
	m.triggers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "webhook_triggers_total",
		Help: "Requests to the webhook endpoint of formsync run, by outcome (accepted, coalesced into a pending sync, bad_secret, unknown_form, too_large, rate_limited, bad_request).",
	}, []string{"outcome"})
	m.filesStored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "files_stored_total",
		Help: "Files a sync kept in the files store (FORMSYNC_FILES_STORE), by form: new objects and files whose bytes the store held already.",
	}, []string{"form"})
	m.filesBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "files_stored_bytes_total",
		Help: "Bytes of the files a sync kept in the files store, by form.",
	}, []string{"form"})
	m.filesNotStored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "files_not_stored_total",
		Help: "Files a sync recorded as not kept, by form and reason: expired (the service had deleted it), too_large, refused (an address or scheme formsync does not fetch from), dropped (the field policy drops its input), failed (tried again next sync).",
	}, []string{"form", "reason"})
	m.filesPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "files_pending",
		Help: "Files of the form's stored submissions left to fetch after the last sync (the next sync fetches them, oldest first).",
	}, []string{"form"})
	m.formAccount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "form_account_info",
		Help: "1 for each form and the account it is read through, when forms are read through several accounts (FORMSYNC_API_TOKEN_DIR): join on form to see any form metric by account.",
	}, []string{"form", "account"})
	m.accountRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "account_api_requests_total",
		Help: "Forms API request attempts, retries included, by account and HTTP status (\"error\" when no response arrived), when forms are read through several accounts.",
	}, []string{"account", "status"})
	m.accountRejected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "account_token_rejected",
		Help: "1 when the API rejected the account's token (401) in the last run, its forms failed; 0 when it was accepted.",
	}, []string{"account"})
	m.conflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "commit_conflicts_total",
		Help: "Commits refused because another formsync committed the same forms meanwhile; each was merged and tried again.",
	})
	m.commitDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "commit_duration_seconds",
		Help:    "Duration of the commit of rows and watermarks to the sink.",
		Buckets: runBuckets,
	})
	m.runDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "run_duration_seconds",
		Help:    "Duration of a sync run, reading and commit.",
		Buckets: runBuckets,
	})
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.rateLimited, m.backoff, m.requestDuration,
		m.runs, m.rows, m.pages, m.formFailures, m.lastSuccess, m.lastReconcile, m.watermarkLag,
		m.missingRows, m.newFields, m.formFields, m.triggers, m.conflicts, m.commitDuration, m.runDuration,
		m.formAccount, m.accountRequests, m.accountRejected,
		m.filesStored, m.filesBytes, m.filesNotStored, m.filesPending,
	)
	// Both results exist from the start so that rate() and alerts on
	// failures see a zero rather than no series at all.
	m.runs.WithLabelValues("success")
	m.runs.WithLabelValues("failure")
	return m
}

// Registry returns the registry every collector is on.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// ObserveRequest records one API request attempt. Its signature fits
// formsapi.Config.Observer.
func (m *Metrics) ObserveRequest(ev formsapi.Event) {
	status := "error"
	if ev.Status != 0 {
		status = strconv.Itoa(ev.Status)
	}
	m.requests.WithLabelValues(status).Inc()
	if ev.Status == http.StatusTooManyRequests || errors.Is(ev.Err, formsapi.ErrRateLimited) {
		m.rateLimited.Inc()
	}
	if ev.Wait > 0 {
		m.backoff.Add(ev.Wait.Seconds())
	}
	if ev.Duration > 0 {
		m.requestDuration.Observe(ev.Duration.Seconds())
	}
}

// ObserveAccountRequest records one API request attempt made through an
// account's token (worker.Accounts), by account: ObserveRequest counts it
// for the whole deployment.
func (m *Metrics) ObserveAccountRequest(account string, ev formsapi.Event) {
	status := "error"
	if ev.Status != 0 {
		status = strconv.Itoa(ev.Status)
	}
	m.accountRequests.WithLabelValues(account, status).Inc()
}

// ObserveRun records one sync run. rep may be nil when the run failed before
// it could report (reading the sync state, for instance): it then counts as
// a failed run and nothing else. commitDuration is observed when positive.
func (m *Metrics) ObserveRun(rep *worker.Report, commitDuration time.Duration) {
	if commitDuration > 0 {
		m.commitDuration.Observe(commitDuration.Seconds())
	}
	if rep == nil {
		m.runs.WithLabelValues("failure").Inc()
		return
	}
	m.runDuration.Observe(rep.Duration.Seconds())
	result := "success"
	if rep.Err() != nil {
		result = "failure"
	}
	m.runs.WithLabelValues(result).Inc()
	m.conflicts.Add(float64(rep.Conflicts))

	now := m.now()
	for _, f := range rep.Forms {
		if f.Account != "" {
			m.formAccount.WithLabelValues(f.FormID, f.Account).Set(1)
			_, rejected := rep.Rejected[f.Account]
			m.accountRejected.WithLabelValues(f.Account).Set(map[bool]float64{false: 0, true: 1}[rejected])
		}
		m.pages.WithLabelValues(f.FormID).Add(float64(f.Pages))
		m.observeFiles(f.FormID, f.Files)
		if f.Checked {
			m.missingRows.WithLabelValues(f.FormID).Set(float64(f.Missing))
		}
		// A failed form keeps showing its last success and reconcile as
		// stored, so that their age grows: a fresh process (a one-shot
		// command pushing to the Pushgateway, a restarted pod) would
		// otherwise have no series for it at all.
		success, reconcile := f.LastSuccessAt, f.LastReconcileAt
		if f.Err != nil || rep.CommitErr != nil {
			m.formFailures.WithLabelValues(f.FormID).Inc()
			// What the form committed in parts while it was read
			// (worker.Config.PartRows) is stored all the same, and the
			// next run finds those rows unchanged: counted now or never.
			for kind, n := range map[string]int64{"inserted": f.Inserted, "updated": f.Updated, "restored": f.Restored} {
				if n > 0 {
					m.rows.WithLabelValues(f.FormID, kind).Add(float64(n))
				}
			}
		} else {
			m.rows.WithLabelValues(f.FormID, "inserted").Add(float64(f.Inserted))
			m.rows.WithLabelValues(f.FormID, "updated").Add(float64(f.Updated))
			m.newFields.WithLabelValues(f.FormID).Add(float64(len(f.NewFields)))
			m.formFields.WithLabelValues(f.FormID).Set(float64(f.Fields))
			success = now
			if f.Reconciled {
				m.rows.WithLabelValues(f.FormID, "deleted_upstream").Add(float64(f.Deleted))
				reconcile = now
			}
			if f.Reconciled || f.Restored > 0 {
				m.rows.WithLabelValues(f.FormID, "restored").Add(float64(f.Restored))
			}
		}
		if !success.IsZero() {
			m.lastSuccess.WithLabelValues(f.FormID).Set(float64(success.UnixNano()) / 1e9)
		}
		if !reconcile.IsZero() {
			m.lastReconcile.WithLabelValues(f.FormID).Set(float64(reconcile.UnixNano()) / 1e9)
		}
		if !f.Watermark.IsZero() {
			// From the two instants, not a Duration: a watermark in year 1
			// or 9999 is further from now than a Duration holds.
			lag := float64(now.Unix()-f.Watermark.CreatedAt.Unix()) + float64(now.Nanosecond()-f.Watermark.CreatedAt.Nanosecond())/1e9
			m.watermarkLag.WithLabelValues(f.FormID).Set(lag)
		}
	}
}

// observeFiles counts what a run's files phase did with a form's files.
func (m *Metrics) observeFiles(form string, c worker.FileCounts) {
	if !c.Any() {
		// Nothing to fetch and nothing done: no pending series left from
		// an earlier run.
		m.filesPending.DeleteLabelValues(form)
		return
	}
	m.filesStored.WithLabelValues(form).Add(float64(c.Stored))
	m.filesBytes.WithLabelValues(form).Add(float64(c.Bytes))
	for reason, n := range c.NotStored {
		m.filesNotStored.WithLabelValues(form, reason).Add(float64(n))
	}
	m.filesPending.WithLabelValues(form).Set(float64(c.Pending))
}

// ObserveTrigger counts one request to the webhook endpoint by its
// outcome (trigger.Outcome's text).
func (m *Metrics) ObserveTrigger(outcome string) {
	m.triggers.WithLabelValues(outcome).Inc()
}

// Push replaces the metrics of job on the Pushgateway at pushURL with the
// registry's (HTTP PUT). Meant for one-shot runs. Credentials in pushURL's
// user info are sent as basic auth and kept out of errors.
func (m *Metrics) Push(ctx context.Context, pushURL, job string) error {
	return m.PushGrouped(ctx, pushURL, job, nil)
}

// PushGrouped is Push with grouping labels besides job: shards of an
// Indexed Job pushing under the same job need one (e.g. "shard") so that
// they do not replace each other's metrics.
func (m *Metrics) PushGrouped(ctx context.Context, pushURL, job string, grouping map[string]string) error {
	u, err := url.Parse(pushURL)
	if err != nil {
		// url.Parse errors quote the URL, password included: leave it out.
		return errors.New("metrics: pushing: pushgateway URL does not parse")
	}
	if u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("metrics: pushing to %s: pushgateway URL needs a scheme and host", u.Redacted())
	}
	user := u.User
	u.User = nil
	p := push.New(u.String(), job).Gatherer(m.registry)
	if user != nil {
		pass, _ := user.Password()
		p = p.BasicAuth(user.Username(), pass)
	}
	for name, value := range grouping {
		p = p.Grouping(name, value)
	}
	if err := p.PushContext(ctx); err != nil {
		return fmt.Errorf("metrics: pushing job %s to %s: %w", job, u.Redacted(), err)
	}
	return nil
}
