package formsapi

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// TestRedactEncodedToken: a server or proxy that echoes the request's
// Authorization header may quote the token encoded as a whole, in base64
// (either alphabet, padded or not, behind any prefix) or hex; each of
// those is redacted, as the raw token is.
func TestRedactEncodedToken(t *testing.T) {
	const token = "fs_live_9aK3x/Qz+7Lm2Pq8?w"
	m := newTokenMatcher(token)
	var texts []string
	for _, prefix := range []string{"", "Bearer ", "user:", "x", "xy"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			texts = append(texts, enc.EncodeToString([]byte(prefix+token)), enc.EncodeToString([]byte(prefix+token+" trailing")))
		}
		texts = append(texts, hex.EncodeToString([]byte(prefix+token)), strings.ToUpper(hex.EncodeToString([]byte(prefix+token))))
	}
	for _, enc := range texts {
		if leftOfToken(enc, token) == "" {
			t.Fatalf("the check finds no token in %q: it checks nothing", enc)
		}
		for _, s := range []string{enc, "Authorization: Basic " + enc + " was refused", `{"echo":"` + strings.ReplaceAll(enc, "/", `\/`) + `"}`} {
			got := m.redact(s)
			if !strings.Contains(got, Redacted) {
				t.Errorf("not redacted: %q", s)
				continue
			}
			// What is left of the encoding decodes to no more than a
			// few bits of the token: no three consecutive characters.
			if leak := leftOfToken(got, token); leak != "" {
				t.Errorf("redacting %q left %q, which decodes to part of the token", s, got)
			}
		}
	}
	for _, innocent := range []string{"page 3 of 10", "c2ltcGxlIHRleHQ=", "deadbeef"} {
		if got := m.redact(innocent); got != innocent {
			t.Errorf("redacted innocent text %q to %q", innocent, got)
		}
	}
}

// leftOfToken decodes every base64 or hex run in s and returns one that
// holds 3 consecutive bytes of token, or "".
func leftOfToken(s, token string) string {
	for _, run := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+/-_=", r))
	}) {
		var decoded []string
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			for k := range 4 {
				if k < len(run) {
					if b, err := enc.DecodeString(strings.TrimRight(run[k:], "=")[:len(strings.TrimRight(run[k:], "="))/4*4]); err == nil {
						decoded = append(decoded, string(b))
					}
				}
			}
		}
		if b, err := hex.DecodeString(run[:len(run)/2*2]); err == nil {
			decoded = append(decoded, string(b))
		}
		for _, d := range decoded {
			for i := 0; i+3 <= len(token); i++ {
				if strings.Contains(d, token[i:i+3]) {
					return run
				}
			}
		}
	}
	return ""
}
