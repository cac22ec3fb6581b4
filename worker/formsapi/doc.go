// Package formsapi reads form submissions out of the form service's Form
// Submissions Read API, one page at a time:
// GET {base}/api/forms/{formId}/submissions?page=N&limit=M with a bearer
// token.
//
//	c, err := formsapi.New(formsapi.Config{BaseURL: "https://forms.example.com", Token: token})
//	page, resp, err := c.Page(ctx, "contact", 1, 100)
//	switch {
//	case errors.Is(err, formsapi.ErrUnauthorized):   // the token: stop the run
//	case errors.Is(err, formsapi.ErrAccessDisabled): // this form only
//	}
//
// [Client.Page] decodes every response form the service sends (older,
// newer and live) into one [Page] of [Submission] values, each keeping its
// raw object as received; checks that the paging adds up; retries 429s,
// 5xx and transport errors within Config.MaxWait, honouring Retry-After;
// paces all calls of a Client under one limiter that follows the server's
// rate-limit headers; and returns an [*Error] whose Kind, and the
// sentinels it matches, say what the caller should do. The token goes only
// to the configured origin and never appears in an error. The package does
// not log: every attempt is reported to Config.Observer.
//
// The decoder's rules, the retries and the pacing are described in
// docs/design.md.
package formsapi
