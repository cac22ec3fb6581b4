// Package files keeps the files attached to submissions, which the form
// service deletes 30 days after upload, in storage the user owns. It has
// three parts, which the worker puts together:
//
//	entries, err := files.Entries(row.Files)          // what a submission names
//	store, err := files.OpenStore(ctx, "gs://bucket/prefix", files.StoreOptions{})
//	fetcher, err := files.NewFetcher(files.FetcherConfig{APIOrigin: base, Token: token})
//	res, err := fetcher.Fetch(ctx, entries[0], store) // bytes stream from the URL into the store
//	reason := files.Reason(err)                       // "", "expired", "too_large", "refused", "failed"
//
// # Entries
//
// [Entries] lists the files of a submission's files JSON in every shape
// the service sends (an array of files; an object keyed by input name
// whose values are one file or an array of files), as the same rows the
// submission_files views give: input, position, name, url, size, type,
// and no row for an element that is not an object.
//
// # Store
//
// A [Store] is a bucket of gocloud.dev/blob named by one URL: file:///path
// (a folder), gs://bucket/prefix (Cloud Storage) or mem:// (memory). An
// object's name is <prefix>sha256/<hex SHA-256 of its bytes>, with the
// content type as its attribute and the original name as metadata
// ("filename"), so a retry, a second sync or two submissions with the
// same file store it once. [Store.URI] is the gs:// or file:// URI a table
// records.
//
// The digest is known only after the bytes are read, so [Store.Put]
// uploads to tmp/<random> while hashing, then copies that to
// sha256/<hex> unless it exists already, then deletes the upload. An
// object under a digest is always whole: fileblob renames a finished
// temporary file into place, GCS and memory create an object on close,
// and an upload whose body fails is aborted. A crash between the upload
// and its delete can leave a tmp/ object (and fileblob a *.tmp file
// beside an object): [Store.Sweep] deletes those older than a given age.
// A crash after the copy leaves an object no row names yet, which the
// next run's Put finds (Object.Existed) and reuses: to record a file
// exactly once, store it before the commit that names it.
//
// [Store.Delete] removes an object, for a privacy forget; whether another
// submission still names the same bytes is the caller's to check first.
//
// # Fetcher
//
// A [Fetcher] GETs the URL of an entry and streams the body into a store
// (any [Putter]), never holding it whole:
//
//   - Only https, and plain http only to a loopback host, as the API
//     client allows.
//   - Every address the host resolves to is checked before any is
//     dialled, by the dialer itself, which resolves the name (an injected
//     [Resolver]), checks each address against an [AddressPolicy], and
//     dials a checked address as a literal (an injected [Dialer]): DNS
//     rebinding cannot change the address between check and dial, and no
//     proxy stands between. Loopback and private addresses (CGNAT's
//     100.64/10 included) are refused unless allowed; link-local ones
//     (the cloud metadata address 169.254.169.254 among them),
//     unspecified, multicast, broadcast and reserved ones always, as is
//     the name metadata.google.internal; IPv4 addresses written as IPv6
//     (::ffff:10.0.0.1, NAT64) are judged as the IPv4 address. A host
//     with one refused address among others is refused.
//   - Redirects (at most 5) are followed by hand, each hop's scheme and
//     addresses checked as the first.
//   - The API token is sent only to a URL whose scheme, host and port are
//     exactly the API's, decided per hop: never on a redirect to another
//     origin.
//   - A size cap (25 MiB by default, well above the service's 5 MB),
//     checked on the announced length and on the bytes as they come; a
//     connect timeout and a timeout on a whole attempt; a bounded number
//     of fetches at once.
//   - A body whose length differs from the entry's declared size is stored
//     as received (named by its bytes) and the mismatch recorded in
//     [Result.SizeMismatch].
//
// A fetch that fails says why with a typed error: [GoneError] (404 or 410:
// the file expired at the service; record it once, never retry),
// [TooLargeError], [RefusedError] (scheme or address policy; nothing was
// sent) and [FailedError] (the network, 408, 429 or 5xx after a bounded
// retry with backoff, or another HTTP status). [Reason] turns them into
// the words a table stores; it is "" for errors that are not the file's
// (the store failing, the run cancelled), which leave the file pending.
//
// Fetching 50 KB files from loopback into a file:// store takes 3 to
// 5 ms a file (most of it fileblob's copy from tmp/ to sha256/) and
// 60 KB of allocation, its peak heap flat at about 5 MiB from 100 to
// 1,000 files (BenchmarkFetchStore, on a shared 2-core machine).
package files
