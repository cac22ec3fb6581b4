// Package formsapi is the client of the hosted form service's Form
// Submissions Read API: one endpoint, GET
// {base}/api/forms/{formId}/submissions?page=N&limit=M, answering pages of
// submissions in one of two response forms (older: no ids, 25 per page, six
// fractional digits, links {}; newer: integer ids, limit honoured, three
// digits, next/previous links).
//
// Data flow: the sync engine calls Client.Page (or Client.Follow for a
// server-supplied link) for one page of one form. The call waits on the
// Client's shared Limiter (a smooth client-side rate, so 429s stay rare),
// sends one GET with the bearer token under a per-attempt timeout that also
// covers reading the body, reads at most MaxBodyBytes and hands the body to
// DecodePage, which checks the envelope and turns either response form into
// the same Page of Submissions (created_at in UTC, microseconds; fields and
// files kept as raw JSON). Failures become an *Error whose Kind tells the
// engine what to do: 400 (access disabled) and 404 (form gone) fail that
// form; 401 fails the run; 429, 5xx, transport errors and malformed or
// truncated bodies are retried here with exponential backoff and jitter,
// honouring a sane Retry-After exactly and capping an absurd one, until the
// MaxWait budget would be exceeded. Every attempt is reported to the
// optional Observer, for metrics.
//
// The token goes only to the configured origin: page URLs are built here,
// links are followed only on the same scheme, host and port, redirects are
// not followed, and plain http is allowed only to loopback hosts. It never
// appears in an error, in the quoted excerpt of an error body, or when a
// Config is printed or logged. The package does not log.
package formsapi
