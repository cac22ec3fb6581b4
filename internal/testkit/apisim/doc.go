// Package apisim is an in-process simulator of the Form Submissions Read API
// (see api-spec.md): GET /api/forms/{formId}/submissions?page=N&limit=M with
// bearer-token auth, in any of three response forms (Older and Newer as the
// spec describes them, Live as the live service's reference shows it: values
// under "data", no files or is_spam, links [] for one page and neighbours
// left out rather than null), chosen for all forms or per form, either sort
// order, and with the misbehaviour the worker must survive: 429s with every
// Retry-After shape, an undisclosed plan limit counted the way Laravel's
// throttle counts it (fixed window from the first request, X-RateLimit-Limit
// and -Remaining on every authenticated answer, Retry-After and
// X-RateLimit-Reset on a refusal), 5xx, truncated and stalled bodies,
// 400/401/404, ties on created_at, and submissions added or deleted while a
// client is paging.
//
// Data flow: New generates each form's submissions once from Options.Seed and
// keeps only a compact record per submission (created_at in unix microseconds,
// id, spam flag), sorted by (created_at, id). Serving a page copies at most one
// page of records under the lock (O(page size)) and renders fields and files
// outside the lock from a per-submission seed, so a form of 1,000,000
// submissions costs about 24 MB and a page costs the same as on a small form.
//
// Every random choice comes from Options.Seed: the data from per-form
// generators, the faults of a request from a generator keyed by the request's
// sequence number, and mutations from the form's generator. Two servers with
// the same Options (including a fixed Now) answer the same sequence of
// requests with the same bytes.
//
// The ground-truth accessors (Submissions, Deleted) return created_at with
// microsecond precision; the Newer and Live forms render it truncated to
// milliseconds.
package apisim
