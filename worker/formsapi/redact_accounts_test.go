package formsapi

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestRedactorCoversEveryAccount: one Redactor removes the token of every
// account, in every encoding, a token added later (a rotated one) too,
// and a token that holds another leaves no tail behind.
func TestRedactorCoversEveryAccount(t *testing.T) {
	t.Parallel()
	r := NewRedactor("acme-token-1234", "", "acme-token-1234-long")
	r.Add("globex/token+5678")
	for _, text := range []string{
		"acme-token-1234",
		"acme-token-1234-long",
		`globex\/token+5678`,
		"globex%2Ftoken%2B5678",
		"ACME-TOKEN-1234",
	} {
		got := r.Redact("said: " + text + ".")
		if got != "said: "+Redacted+"." {
			t.Errorf("Redact(%q) = %q", text, got)
		}
	}
	// Encoded whole, the part that only the token decides is removed.
	enc := base64.StdEncoding.EncodeToString([]byte("Bearer globex/token+5678"))
	if got := r.Redact(enc); !strings.Contains(got, Redacted) || len(got) > len(enc)-10+len(Redacted) {
		t.Errorf("Redact(%q) = %q", enc, got)
	}
	if got := r.Redact("nothing secret"); got != "nothing secret" {
		t.Errorf("Redact changed text without a token: %q", got)
	}
	if NewRedactor("", "") != nil {
		t.Error("a Redactor of no token is not nil")
	}
	if strings.Contains(r.Redact("acme-token-1234 and globex/token+5678"), "token") {
		t.Error("two tokens in one text: one left")
	}
}
