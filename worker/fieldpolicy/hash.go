package fieldpolicy

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/formsync/formsync/internal/jsonscan"
)

// keyFileEnv is where the deployment names the key file; errors name it so
// that the user knows what to set.
const keyFileEnv = "FORMSYNC_FIELD_HASH_KEY_FILE"

// minKeyLen is the shortest key accepted. A short key can be found by
// trying keys against one known value and its stored hash, after which
// every hashed value can be confirmed by guessing; 16 bytes (128 bits)
// puts that out of reach.
const minKeyLen = 16

// maxKeyFile is the largest key file read.
const maxKeyFile = 64 << 10

// hexLen is the length of a hashed value: hex HMAC-SHA256.
const hexLen = 2 * sha256.Size

// LoadKey reads the hash key from the file at path. One trailing newline
// ("\n" or "\r\n"), which editors and echo add, is not part of the key.
// It refuses a key shorter than 16 bytes, and a file of more than 64 KiB
// (a path naming a device such as /dev/urandom would never end).
func LoadKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		// The *fs.PathError names the path.
		return nil, fmt.Errorf("field hash key: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("field hash key: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("field hash key %s: more than %d KiB: the file must hold only the key", path, maxKeyFile>>10)
	}
	key := trimNewline(b)
	if len(key) < minKeyLen {
		return nil, fmt.Errorf("field hash key %s: %d bytes, fewer than %d: a key that short is too short to resist guessing (write e.g. the output of openssl rand -hex 32 to it)",
			path, len(key), minKeyLen)
	}
	return key, nil
}

func trimNewline(b []byte) []byte {
	if b, ok := bytes.CutSuffix(b, []byte("\r\n")); ok {
		return b
	}
	b, _ = bytes.CutSuffix(b, []byte("\n"))
	return b
}

// WithKey returns a copy of p that hashes under key (it keeps its own copy
// of key). No policy stays no policy.
func (p *Policy) WithKey(key []byte) *Policy {
	if p.empty() {
		return p
	}
	q := &Policy{rules: p.rules, folded: p.folded, needsKey: p.needsKey, key: bytes.Clone(key)}
	q.hashers = newHashers(q.key)
	return q
}

// Validate reports whether p can be applied: a policy that hashes needs a
// key of at least 16 bytes.
func (p *Policy) Validate() error {
	if !p.NeedsKey() {
		return nil
	}
	switch {
	case len(p.key) == 0:
		return fmt.Errorf("field policy hashes %s but has no key: set %s to a file holding a secret key of at least %d bytes",
			strings.Join(p.hashedPatterns(), ", "), keyFileEnv, minKeyLen)
	case len(p.key) < minKeyLen:
		return fmt.Errorf("field hash key: %d bytes, fewer than %d: too short to resist guessing", len(p.key), minKeyLen)
	}
	return nil
}

func (p *Policy) hashedPatterns() []string {
	var patterns []string
	for _, r := range p.rules {
		if r.Action == Hash {
			patterns = append(patterns, r.Pattern)
		}
	}
	return patterns
}

// Identity returns a short hex name of what p does: "" for no policy,
// otherwise the first 16 bytes of a SHA-256 over its rules in normal form
// and, when it hashes, a fingerprint of its key. A change of rules, or of
// the key of a policy that hashes, changes it; the same policy and key
// give the same identity in every process.
//
// The key counts only when a rule hashes: a policy that only keeps and
// drops stores the same rows whatever the key, and a rotated but unused
// key should not look like a change of policy.
func (p *Policy) Identity() string {
	if p.empty() {
		return ""
	}
	h := sha256.New()
	h.Write([]byte("formsync field policy\n"))
	h.Write([]byte(p.String()))
	if p.needsKey {
		h.Write([]byte("\nkey "))
		h.Write(p.keyFingerprint())
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// keyFingerprint stands for the key in Identity: an HMAC of a fixed label,
// which changes with the key but, unlike a plain hash of a key, is no
// help in guessing it. Without a key it is empty.
func (p *Policy) keyFingerprint() []byte {
	if len(p.key) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, p.key)
	mac.Write([]byte("formsync field policy key fingerprint"))
	return mac.Sum(nil)
}

// HashValue returns the hex HMAC-SHA256 (64 characters) of the JSON value v
// under p's key: of the decoded UTF-8 text for a string (so "x@example.com"
// hashes the bytes x@example.com, which another system can hash too), of
// v's bytes as given for any other value. No policy returns "". A policy
// without a key hashes under the empty key, which anyone can recompute;
// Validate refuses that, and Fields, Raw and Lookup with it.
func (p *Policy) HashValue(v json.RawMessage) string {
	if p.empty() {
		return ""
	}
	h := p.hasher()
	defer p.release(h)
	h.buf = loadValue(h.buf[:0], v)
	var out [hexLen]byte
	h.hexSum(out[:])
	return string(out[:])
}

// Lookup returns the form in which a field's clear value is stored, for
// finding rows by it: value itself for a kept field, its hash for a hashed
// one. A dropped field is never stored, so Lookup refuses it.
func (p *Policy) Lookup(name, value string) (string, error) {
	switch p.Action(name) {
	case Drop:
		return "", fmt.Errorf("field %q is dropped by the field policy: it is never stored, so no row can be found by it", name)
	case Hash:
		if err := p.Validate(); err != nil {
			return "", err
		}
		// As a JSON string, so that it hashes to what the field's value
		// hashed to, invalid UTF-8 replaced the same way.
		v, err := json.Marshal(value)
		if err != nil {
			return "", fmt.Errorf("field %q: %w", name, err)
		}
		return p.HashValue(v), nil
	}
	return value, nil
}

// hasher is one HMAC state keyed with a policy's key, with scratch space
// for what it hashes.
type hasher struct {
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

func newHashers(key []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return &hasher{mac: hmac.New(sha256.New, key)} }}
}

// hasher takes an HMAC state from the pool. Every policy that is not
// empty comes from Parse or WithKey, which make the pool.
func (p *Policy) hasher() *hasher { return p.hashers.Get().(*hasher) }

func (p *Policy) release(h *hasher) { p.hashers.Put(h) }

// hexSum writes the hex HMAC of h.buf to dst, which holds hexLen bytes.
func (h *hasher) hexSum(dst []byte) {
	h.mac.Reset()
	h.mac.Write(h.buf)
	hex.Encode(dst, h.mac.Sum(h.sum[:0]))
}

// loadValue appends what the JSON value v is hashed as to dst: a string's
// decoded text, any other value's bytes.
func loadValue(dst, v []byte) []byte {
	if s, ok := jsonscan.String(v); ok {
		return jsonscan.AppendUnquote(dst, s)
	}
	return append(dst, v...)
}
