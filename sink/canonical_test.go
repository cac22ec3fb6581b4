package sink

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"slices"
	"strings"
	"testing"
)

// referenceCanonical is the definition AppendCanonical must match: decode
// with encoding/json (UseNumber), encode again without HTML escaping.
func referenceCanonical(src []byte) (string, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", nil, err
	}
	var keys []string
	if m, ok := v.(map[string]any); ok {
		keys = []string{}
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
	}
	return strings.TrimSuffix(buf.String(), "\n"), keys, nil
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
	want, wantKeys, werr := referenceCanonical(in)
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
	if len(in) > 0 && bytes.TrimSpace(in)[0] == '{' {
		c := canonicalizer{src: in}
		var keys []string
		if _, err := c.document(nil, &keys); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys, wantKeys) || keys == nil {
			t.Fatalf("%q: keys %q, want %q", in, keys, wantKeys)
		}
	}
}

// FuzzCanonicalMatchesEncodingJSON holds the hand-written canonical form to
// encoding/json's round trip, byte for byte: content keys depend on it.
//
//	go test ./sink -run '^$' -fuzz FuzzCanonicalMatchesEncodingJSON -fuzztime 60s
func FuzzCanonicalMatchesEncodingJSON(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkCanonical(t, in) })
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

// special8 finds the first byte appendQuoted must look at in any word of
// two chosen bytes among plain ones, whatever the bytes and their places.
func TestSpecial8(t *testing.T) {
	special := func(b byte) bool { return b < 0x20 || b == '"' || b == '\\' || b >= 0x80 }
	var w [8]byte
	for p1 := range 8 {
		for p2 := p1 + 1; p2 < 8; p2++ {
			for b1 := range 256 {
				for b2 := range 256 {
					for i := range w {
						w[i] = 'a'
					}
					w[p1], w[p2] = byte(b1), byte(b2)
					first := -1
					for i, b := range w {
						if special(b) {
							first = i
							break
						}
					}
					m := special8(load8(w[:], 0))
					if got := bits.TrailingZeros64(m) / 8; (m == 0) != (first < 0) || m != 0 && got != first {
						t.Fatalf("%q: first special byte %d, special8 says %d (%#x)", w, first, got, m)
					}
				}
			}
		}
	}
}
