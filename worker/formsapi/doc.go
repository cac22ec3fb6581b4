// Package formsapi reads form submissions out of the hosted form service's
// Form Submissions Read API, page by page, for the sync engine: one
// endpoint, GET {base}/api/forms/{formId}/submissions?page=N&limit=M with a
// bearer token, answered with pages of submissions. Client.Page fetches one
// page of one form and returns it decoded, with what the call cost
// (Response) and, on failure, an *Error whose Kind tells the engine what to
// do.
//
// # What the decoder accepts
//
// The service exists in more shapes than its spec describes, and the
// decoder accepts all of them without being told which it talks to:
//
//   - the older form (no ids, 25 per page, six fractional digits, links {}),
//     the newer form (integer ids, limit honoured, three digits,
//     previous/next links or null) and the live service's form (the newer
//     one with the submitted values under "data" instead of "fields", and
//     no files or is_spam members);
//   - links as {}, [] (a PHP serialiser's empty array: a form of one page),
//     null, or an object whose previous/next are missing or null;
//   - files as an array, an object keyed by input name (each value one
//     {name, url} or a list of them), null or absent (stored as []);
//   - is_spam absent, a boolean, or 0/1; id an integer or an integer in a
//     string;
//   - count is checked to be a number but not compared with data: the live
//     reference itself shows count 10 beside one submission.
//
// Each Submission keeps Raw, the submission object exactly as received
// (invalid UTF-8 replaced by U+FFFD), so that nothing the service sends is
// dropped. A submission with neither fields nor data has Fields nil, not an
// empty object, so that the caller can say that no values came.
//
// # Paging checks
//
// Every page must add up, or the call fails with KindPaging (ErrPaging),
// which is not retried: current_page must be the page asked for (a server
// or cache that ignores page would otherwise hand back page 1 as every
// page), and total_pages must be max(1, ⌈total / per_page⌉) (0 or 1 when
// total is 0). The message says which number did not add up. A page equal to
// the previous one is for the engine to notice, which sees both.
//
// # Errors and retries
//
// 400 (HTTP API access off), 403 (token without access to the form or
// plan), 404 (form unknown or deleted) and 410 (form or API version gone)
// fail that form, each with a message that says what to do. A JSON error
// body with a "message" member (Laravel's shape) is quoted as that message;
// any other body as a short printable excerpt. 429, 5xx, transport errors
// and malformed or truncated bodies are retried here with exponential
// backoff and jitter, honouring a sane Retry-After exactly and capping an
// absurd one, until the MaxWait budget would be exceeded. After a 429 the
// budget also pays for the limiter's hold until the server's window closes
// (see Pacing), which a 429 with X-RateLimit-Reset but no Retry-After
// makes far longer than the backoff; the call fails before a hold that
// would not fit. A body over MaxBodyBytes, and a server certificate that
// does not verify, fail at once: the next attempt would meet them again.
//
// A 401 fails the run: the token is the same for every form, so once any
// call of a Client has been answered 401, every later call returns an
// ErrUnauthorized error at once, without sending a request (Response.Requests
// is 0), naming FORMSYNC_API_TOKEN and FORMSYNC_API_TOKEN_FILE.
//
// # Pacing
//
// All calls of a Client share one limiter. Config.RateLimit is a ceiling
// (starts at least 1/RateLimit apart, golang.org/x/time/rate with burst 1).
// Below it the limiter follows the server's own signals when its answers
// carry them, as the service's Laravel throttle does: a fixed window of
// X-RateLimit-Limit requests, X-RateLimit-Remaining on every answer, and
// Retry-After and X-RateLimit-Reset on a 429. The limiter spends the
// remaining budget, learns when the window ends from the first 429 and how
// long it is from when it opened, and from then on waits for each window to
// close instead of collecting 429s, so a user who does not know the plan's
// limit can set a high ceiling and get close to the plan's full rate. Waits
// honour ctx (a per-form deadline ends them). BenchmarkAdaptiveRate measures
// it.
//
// # The token
//
// The token goes only to the configured origin: page URLs are built here
// (server links are never followed), redirects are not followed, and plain
// http is allowed only to loopback hosts. It is redacted, in every encoding
// a body can carry it (JSON \/ and \uXXXX escapes, percent-encoding once or
// twice, HTML character references, any letter case, and, for a header
// echoed whole, base64 in either alphabet and hex), from error bodies and
// wrapped errors before they are stored in an Error, and it prints as
// [REDACTED] when a Config or Secret is printed or logged. A Redactor
// applies the same redaction to other text (formsync passes every log
// line through one). The package does
// not log; every attempt is reported to the optional Observer, for metrics.
package formsapi
