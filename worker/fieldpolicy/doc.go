// Package fieldpolicy keeps personal data out of the warehouse. A field
// policy says, per form field, whether its value is stored as sent (keep),
// stored as a keyed hash (hash) or not stored at all (drop). It is applied
// to each submission's fields and to its raw API object before either is
// written anywhere, spools on disk included, so a dropped or hashed value
// never reaches a file, a table or a backup.
//
// # Syntax
//
// A policy is a comma-separated list of pattern=action rules:
//
//	email=hash,phone=drop,*password*=drop
//
// Space around rules, patterns and actions is ignored. The actions are
// hash, drop and keep, in any case. An empty spec is no policy. Parse
// reports every problem of a spec at once, each as a *ParseError: an empty
// rule (a doubled or trailing comma), a rule without "=", an empty pattern,
// an unknown action, or a pattern given twice.
//
// # Matching
//
// A pattern matches a field's whole name, ignoring case the way
// encoding/json does when it matches keys to struct fields ("EMAIL",
// "Email" and "email" are one name). A * matches any run of characters,
// the empty one included; no other character is special, so a pattern can
// name a field with dots or brackets as it is. The rules are tried in the
// order written and the first that matches decides; a field no rule
// matches is kept. Exceptions therefore come first:
//
//	email_opt_in=keep,*email*=hash
//
// Names are matched after JSON unescaping: a member sent as "em\u0061il" is
// the field email.
//
// # Hashing
//
// A hashed value is stored as the hex HMAC-SHA256 of the value under a
// secret key (LoadKey, FORMSYNC_FIELD_HASH_KEY_FILE). A string is hashed as
// its decoded UTF-8 text, so "x@example.com" hashes the bytes
// x@example.com; any other value as its JSON text, which is canonical
// (sink.AppendCanonical) in the fields a row holds and is made so in a raw
// object, so that a value hashes alike in both. Equal values
// give equal hashes in every run, so the warehouse can still count, group
// and join on a hashed field, and a system holding the key can compute the
// same HMAC of a known address and find its rows. Without the key the
// clear value cannot be recovered from its hash, nor confirmed by hashing
// guesses, which a plain SHA-256 of an e-mail address or a phone number
// would allow in seconds (but see the content key below).
//
// Identity names a policy and its key without revealing the key, so that
// rows stored under one policy can be told from rows stored under another.
//
// # What it does not do
//
// A policy acts on the top-level members of a submission's fields. A
// value that is itself an object or an array is kept, hashed or dropped as
// a whole: the names inside it are not matched. Of the raw API object,
// only the members of its fields and data objects are rewritten; every
// other member (ids, timestamps, files) is left exactly as sent. Rows
// stored before a policy changed are not rewritten. The content key of a
// submission (sink.Row.ContentKey, the key of a form without ids) is
// computed from its values before the policy, unkeyed: it lets a reader
// confirm a guess of every hashed or dropped value of a row.
//
// A nil *Policy, or the zero Policy, is no policy: every method returns
// its input unchanged without looking at it. A Policy is immutable and
// safe for concurrent use.
package fieldpolicy
