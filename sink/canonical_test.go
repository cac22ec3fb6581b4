package sink

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// referenceCanonical is the definition AppendCanonical must match: decode
// with encoding/json (UseNumber), encode again without HTML escaping.
func referenceCanonical(src []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

var canonicalCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `-12.5e+3`, `1E-7`, `123456789012345678901234567890`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"b":{"z":[1,{"y":2,"x":3}],"a":null},"a":[]}`,
	`{"a":1,"b":2,"a":3}`, `{"":1," ":2}`,
	` { "a" : [ 1 , 2 ] , "b" : "x" } `,
	`"<html> & 'quotes'"`, `"tab\there"`, `"\u0000\u001f\u007f\b\f\n\r\t\"\\\/"`,
	`"\u2028\u2029 literal: ` + "\u2028\u2029" + `"`,
	`"\ud83d\ude00 pair, lone \ud83d, lone \ude00, bad pair \ud83d\u0041, \uD83D\uDE00"`,
	"\"invalid utf8 \xff\xfe and \xe2\x82\"", "{\"k\xff\":1,\"k\":2}",
	`{"é":1,"e":2,"\u00e9":3}`, `{"a\u0000":1,"a":2}`,
	`{"message":"Hello \"world\"","email":"a@b.c","files":[{"name":"x.pdf","size":12}]}`,
	`[1,"a",{"c":"d"},[],{}]`,
}

func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	for _, in := range canonicalCases {
		checkCanonical(t, []byte(in))
	}
}

func TestCanonicalRejectsInvalidJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `1.`, `-`, `1e`, `.5`,
		`"abc`, `"\x"`, `"\u12"`, "\"ctl\x01\"", `tru`, `nul`, `{} {}`, `{"a":1}x`, `{1:2}`, `+1`} {
		if out, err := AppendCanonical(nil, []byte(in)); err == nil {
			t.Errorf("%q accepted as %q", in, out)
		}
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	if _, err := AppendCanonical(nil, []byte(deep)); err == nil {
		t.Error("10001 levels of nesting accepted")
	}
}

func checkCanonical(t *testing.T, in []byte) {
	t.Helper()
	want, werr := referenceCanonical(in)
	if !json.Valid(in) {
		if _, err := AppendCanonical(nil, in); err == nil {
			t.Errorf("%q: invalid JSON accepted", in)
		}
		return
	}
	if werr != nil {
		return // valid but beyond encoding/json (nesting limit): no reference
	}
	got, err := AppendCanonical(nil, in)
	if err != nil {
		t.Fatalf("%q: %v", in, err)
	}
	if string(got) != want {
		t.Fatalf("%q:\n got  %q\n want %q", in, got, want)
	}
}

func BenchmarkCanonical(b *testing.B) {
	in := []byte(`{"name":"Ada Lovelace","email":"ada@example.com","message":"Hello \"there\", I'd like a quote for 3 items.\nThanks!","phone":"+44 20 7946 0958","consent":true,"score":42}`)
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		var dst []byte
		for b.Loop() {
			dst, _ = AppendCanonical(dst[:0], in)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			referenceCanonical(in)
		}
	})
}
