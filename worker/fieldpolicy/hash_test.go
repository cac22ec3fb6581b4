package fieldpolicy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func keyed(t testing.TB, spec string) *Policy {
	t.Helper()
	return mustParse(t, spec).WithKey(testKey)
}

func hmacHex(key []byte, msg string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return hex.EncodeToString(mac.Sum(nil))
}

func TestHashValue(t *testing.T) {
	p := keyed(t, "email=hash")
	for _, tc := range []struct {
		value string
		// hashed is the text the HMAC is over.
		hashed string
	}{
		// A string hashes as its decoded text, so that a system without
		// JSON can compute the same HMAC of an address.
		{`"x@example.com"`, "x@example.com"},
		{`"x\u0040example.com"`, "x@example.com"},
		{`"\u00e9t\u00E9"`, "été"},
		{`"été"`, "été"},
		{`"a\"b\\c\/d\n"`, "a\"b\\c/d\n"},
		{`"\ud83d\ude00"`, "😀"},
		// As encoding/json decodes them: lone surrogates and invalid UTF-8
		// become U+FFFD.
		{`"\ud83d!"`, "\ufffd!"},
		{"\"\xff\"", "\ufffd"},
		{`""`, ""},
		{` "x" `, "x"},
		// Any other value hashes as its bytes as given.
		{`1.50`, "1.50"},
		{`true`, "true"},
		{`null`, "null"},
		{`{"b":1,"a":2}`, `{"b":1,"a":2}`},
		{`["x"]`, `["x"]`},
		{`"x" "y"`, `"x" "y"`},
		{`"unterminated`, `"unterminated`},
	} {
		want := hmacHex(testKey, tc.hashed)
		got := p.HashValue([]byte(tc.value))
		if got != want {
			t.Errorf("HashValue(%s) = %s, want the HMAC of %q", tc.value, got, tc.hashed)
		}
		if again := p.HashValue([]byte(tc.value)); again != got {
			t.Errorf("HashValue(%s) changed from %s to %s", tc.value, got, again)
		}
	}
}

// A value's hash is fixed: rows stored in another run, or by another
// process, must join with today's.
func TestHashValueIsStable(t *testing.T) {
	p := mustParse(t, "email=hash").WithKey([]byte("0123456789abcdef"))
	const want = "037c64968d58dfa72c39f5c9932333c6151894482230e805a2fccd5c5479fcce"
	if got := p.HashValue([]byte(`"x@example.com"`)); got != want {
		t.Errorf("HashValue = %s, want %s", got, want)
	}
	other := mustParse(t, "email=hash").WithKey([]byte("fedcba9876543210"))
	if other.HashValue([]byte(`"x@example.com"`)) == want {
		t.Error("another key gives the same hash")
	}
}

func TestIdentity(t *testing.T) {
	hexID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	base := keyed(t, "email=hash,phone=drop")
	id := base.Identity()
	if !hexID.MatchString(id) {
		t.Fatalf("Identity() = %q, want 32 hex digits", id)
	}
	if again := keyed(t, "email=hash,phone=drop").Identity(); again != id {
		t.Errorf("the same policy and key give %s, then %s", id, again)
	}
	if same := keyed(t, " EMAIL=Hash , phone=DROP").Identity(); same != id {
		t.Errorf("the same rules written otherwise change the identity: %s, %s", id, same)
	}
	// Fixed across processes and releases: stored rows carry it.
	const want = "2bfa07e9472d822f670fd6e29466190f"
	if id != want {
		t.Errorf("Identity() = %s, want %s", id, want)
	}
	for name, other := range map[string]*Policy{
		"another rule":     keyed(t, "email=hash,phone=hash"),
		"another order":    keyed(t, "phone=drop,email=hash"),
		"one more rule":    keyed(t, "email=hash,phone=drop,x=keep"),
		"another key":      mustParse(t, "email=hash,phone=drop").WithKey([]byte("another key, 16+ bytes")),
		"no key":           mustParse(t, "email=hash,phone=drop"),
		"another key size": mustParse(t, "email=hash,phone=drop").WithKey(append(testKey, 'x')),
	} {
		if got := other.Identity(); got == id || !hexID.MatchString(got) {
			t.Errorf("%s: Identity() = %s, want 32 hex digits other than %s", name, got, id)
		}
	}
	if strings.Contains(id, hex.EncodeToString(testKey)[:8]) {
		t.Error("the identity shows the key")
	}
	// The key changes nothing a keep/drop policy stores, so it does not
	// change its identity.
	a := mustParse(t, "phone=drop").WithKey(testKey).Identity()
	b := mustParse(t, "phone=drop").WithKey([]byte("another key, 16+ bytes")).Identity()
	if a != b || a != mustParse(t, "phone=drop").Identity() {
		t.Errorf("a policy that does not hash has identities %s and %s by key", a, b)
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, content, want string
	}{
		{"plain", "0123456789abcdef", "0123456789abcdef"},
		{"newline", "0123456789abcdef\n", "0123456789abcdef"},
		{"crlf", "0123456789abcdef\r\n", "0123456789abcdef"},
		{"one newline only", "0123456789abcdef\n\n", "0123456789abcdef\n"},
		{"space is key", " 0123456789abcdef ", " 0123456789abcdef "},
		{"binary", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"},
	} {
		key, err := LoadKey(write(tc.name, tc.content))
		if err != nil || string(key) != tc.want {
			t.Errorf("%s: LoadKey = %q, %v; want %q", tc.name, key, err, tc.want)
		}
	}
	for _, tc := range []struct{ name, content string }{
		{"empty", ""},
		{"short", "0123456789abcde"},
		{"short after its newline", "0123456789abcde\n"},
		{"short after crlf", "0123456789abcde\r\n"},
	} {
		path := write(tc.name, tc.content)
		key, err := LoadKey(path)
		if err == nil {
			t.Errorf("%s: LoadKey = %q, want an error", tc.name, key)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "too short to resist guessing") {
			t.Errorf("%s: %q does not name the file and why a short key is refused", tc.name, msg)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := LoadKey(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v, want fs.ErrNotExist naming %s", err, missing)
	}
	if _, err := LoadKey(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory: %v, want an error naming %s", err, dir)
	}
	// A device that never ends is refused after 64 KiB, not read forever.
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := LoadKey("/dev/zero"); err == nil || !strings.Contains(err.Error(), "more than 64 KiB") {
			t.Errorf("/dev/zero: %v, want it refused as too large", err)
		}
	}
	big := write("big", strings.Repeat("k", 64<<10+1))
	if _, err := LoadKey(big); err == nil || !strings.Contains(err.Error(), big) {
		t.Errorf("a file of 64 KiB and a byte: %v, want an error naming %s", err, big)
	}
}

func TestValidate(t *testing.T) {
	if err := mustParse(t, "phone=drop").Validate(); err != nil {
		t.Errorf("a policy that does not hash needs no key: %v", err)
	}
	if err := keyed(t, "email=hash").Validate(); err != nil {
		t.Errorf("keyed: %v", err)
	}
	err := mustParse(t, "email=hash,*token*=hash").Validate()
	if err == nil || !strings.Contains(err.Error(), "FORMSYNC_FIELD_HASH_KEY_FILE") || !strings.Contains(err.Error(), "*token*") {
		t.Errorf("no key: %v, want an error naming FORMSYNC_FIELD_HASH_KEY_FILE and what is hashed", err)
	}
	if err := mustParse(t, "email=hash").WithKey([]byte("short")).Validate(); err == nil {
		t.Error("a 5-byte key accepted")
	}
	// Applying a policy that cannot hash stores nothing.
	p := mustParse(t, "email=hash")
	if out, err := p.Fields(`{"a":1}`); err == nil {
		t.Errorf("Fields without a key = %q", out)
	}
	if out, err := p.Raw([]byte(`{"a":1}`)); err == nil {
		t.Errorf("Raw without a key = %q", out)
	}
	if out, err := p.Lookup("email", "x"); err == nil {
		t.Errorf("Lookup without a key = %q", out)
	}
}

func TestWithKeyCopies(t *testing.T) {
	p := mustParse(t, "email=hash")
	key := []byte("0123456789abcdef")
	q := p.WithKey(key)
	want := q.HashValue([]byte(`"x"`))
	key[0] = 'X'
	if got := q.HashValue([]byte(`"x"`)); got != want {
		t.Error("changing the caller's key changed the policy's")
	}
	if p.Validate() == nil {
		t.Error("WithKey gave the original policy a key")
	}
}

// A policy is shared by every form read at once: its pooled HMAC states
// must not mix one value's hash with another's.
func TestConcurrentUse(t *testing.T) {
	p := keyed(t, testSpec)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				v := fmt.Sprintf("user%d.%d@example.com", g, i)
				out, err := p.Fields(`{"email":"` + v + `","phone":"1"}`)
				if want := `{"email":` + h(v) + `}`; err != nil || out != want {
					t.Errorf("Fields = %s, %v; want %s", out, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestLookup(t *testing.T) {
	p := keyed(t, "email=hash,phone=drop")
	fields, err := p.Fields(`{"email":"x@example.com","name":"X \u003cx\u003e","phone":"1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Lookup("Email", "x@example.com"); err != nil || !strings.Contains(fields, `"email":"`+got+`"`) {
		t.Errorf("Lookup(email) = %q, %v: not what %s stores", got, err, fields)
	}
	if got, err := p.Lookup("name", "X <x>"); err != nil || got != "X <x>" {
		t.Errorf("Lookup(name) = %q, %v", got, err)
	}
	if got, err := p.Lookup("phone", "1"); err == nil || got != "" ||
		err.Error() != `field "phone" is dropped by the field policy: it is never stored, so no row can be found by it` {
		t.Errorf("Lookup(phone) = %q, %v", got, err)
	}
	// Invalid UTF-8 is replaced as when the value came as JSON.
	if got, _ := p.Lookup("email", "\xff"); got != p.HashValue([]byte("\"\xff\"")) {
		t.Error("Lookup of invalid UTF-8 does not hash as the JSON value does")
	}
}
