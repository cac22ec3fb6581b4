// Package fieldpolicy keeps personal data out of the warehouse. A policy
// says, per form field, whether its value is stored as sent (keep), as a
// keyed hash (hash) or not at all (drop), and is applied to each
// submission's fields and raw object before anything is written, spools
// on disk included.
//
//	p, err := fieldpolicy.Parse("email_opt_in=keep,*email*=hash,phone=drop")
//	key, err := fieldpolicy.LoadKey("/var/run/secrets/formsync-hash-key/hash-key")
//	p = p.WithKey(key)
//	fields, err = p.Fields(fields)        // canonical JSON in, canonical JSON out
//	raw, err = p.Raw(raw)
//	stored, err := p.Lookup("email", "person@example.com") // to find a person's rows
//
// Patterns match whole field names, case-insensitively, * matching any
// run of characters; the first matching rule wins. A hash is the hex
// HMAC-SHA256 of the value under the key. [Policy.Identity] names a policy
// and its key without revealing the key. A nil *Policy is no policy.
// docs/privacy.md gives the full rules and what a policy does not do.
package fieldpolicy
