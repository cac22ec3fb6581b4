// Package apisim is an in-process simulator of the Form Submissions Read API
// (see api-spec.md): GET /api/forms/{formId}/submissions?page=N&limit=M with
// bearer-token auth, in either response form (Older/Newer), either sort order,
// and with the misbehaviour the worker must survive: 429s with every
// Retry-After shape, 5xx, truncated and stalled bodies, 400/401/404, ties on
// created_at, and submissions added or deleted while a client is paging.
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
// microsecond precision; the Newer form renders it truncated to milliseconds.
package apisim
