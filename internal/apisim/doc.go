// Package apisim is an in-process simulator of the Form Submissions Read
// API, for tests, `formsync demo` and `formsync simulate`: every response
// form (older, newer, live), either sort order, and the misbehaviour the
// worker must survive (429s with every Retry-After shape, an undisclosed
// plan limit, 5xx, truncated and stalled bodies, 400/401/404, ties, and
// submissions added or deleted while a client pages).
//
//	sim := apisim.New(apisim.Options{Forms: []string{"contact"}, SubmissionsPerForm: 1000, Seed: 1})
//	srv := httptest.NewServer(sim)
//	sim.Add("contact", 5)          // new submissions
//	sim.Delete("contact", 2)       // deleted upstream
//	want := sim.Submissions("contact")
//
// NewAccounts serves several accounts at one address, each a Server with
// its own token and limits, and records any request that carried another
// account's token (Accounts.Crossed).
//
// With Options.Webhook, every submission added is followed, once served,
// by the service's webhook to a loopback URL (Stats counts those sent and
// failed), so that a trigger endpoint is driven as the service drives it.
//
// Every random choice comes from Options.Seed, so two servers with the same
// Options answer the same requests with the same bytes. docs/testing.md
// says more.
package apisim
