package formsapi

import (
	"fmt"
	"log/slog"
)

// Secret holds a credential. However it is printed (fmt verbs, slog, JSON)
// it shows as [REDACTED]; Reveal returns the credential for the one place
// that sends it.
type Secret string

// Redacted is what a Secret (or a credential found in server text) prints as.
const Redacted = "[REDACTED]"

func (Secret) String() string               { return Redacted }
func (Secret) GoString() string             { return Redacted }
func (Secret) LogValue() slog.Value         { return slog.StringValue(Redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }
func (s Secret) Format(f fmt.State, _ rune) { f.Write([]byte(Redacted)) }
func (s Secret) Reveal() string             { return string(s) }

var (
	_ fmt.Stringer   = Secret("")
	_ slog.LogValuer = Secret("")
)
