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
// The files a submission names are served by the server itself, under
// FilesPath on the address its first request came to (the listener's,
// never a Host header's; Options.Files.Origin or SetFilesOrigin name it
// before any request, as a test that reads Submissions first needs): no
// file URL leads off loopback. Their bytes follow from the seed, form,
// submission id and position (FileBytes), with the entry's type as
// Content-Type; Files lists a form's files with the SHA-256 a GET gets.
// Options.Files sets which submissions carry files and how many, their
// size, and the share of files served with a fault (expired 404 or 410,
// a slow body, too large, a redirect, a size other than declared);
// SetFileFault sets one file's. File requests need no token: Stats counts
// them, and their bytes, apart from the API's requests, and FileRequests
// keeps the Authorization header each carried.
//
//	sim := apisim.New(apisim.Options{Files: apisim.FileOptions{Every: 1, PerSubmission: 2}})
//	srv := httptest.NewServer(sim)
//	sim.SetFilesOrigin(srv.URL)
//	for _, f := range sim.Files("contact") { _ = f.URL; _ = f.SHA256 }
//
// Every random choice comes from Options.Seed, so two servers with the same
// Options answer the same requests with the same bytes. docs/testing.md
// says more.
package apisim
