package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/bits"
	"slices"
	"strings"
	"testing"
)

// referenceCanonical is the definition AppendCanonical must match: decode
// with encoding/json (UseNumber), encode again without HTML escaping; and
// the keys of the object, sorted, when it is one.
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

var cases = []string{
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
	``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `1.`, `-`, `1e`, `.5`,
	`"abc`, `"\x"`, `"\u12"`, "\"ctl\x01\"", `tru`, `nul`, `{} {}`, `{"a":1}x`, `{1:2}`, `+1`, `[}`, `{]`, `{"a":1]`,
}

// check holds everything the package reads and writes to encoding/json,
// for one input.
func check(t *testing.T, in []byte) {
	t.Helper()
	valid := json.Valid(in)
	var r Reader
	r.Reset(in)
	v, err := r.ReadValue()
	if err == nil {
		err = r.End()
	}
	if (err == nil) != valid {
		t.Fatalf("%q: read with error %v, encoding/json.Valid says %v", in, err, valid)
	}
	if err != nil {
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(in) {
			t.Fatalf("%q: error %#v", in, err)
		}
	} else if !bytes.Equal(v, bytes.TrimSpace(in)) {
		t.Fatalf("%q: read %q", in, v)
	}

	var c Canonicalizer
	got, err := c.Append(nil, in)
	want, wantKeys, werr := referenceCanonical(in)
	switch {
	case !valid:
		if err == nil {
			t.Fatalf("%q: invalid JSON canonical as %q", in, got)
		}
	case werr != nil:
		// Valid but beyond encoding/json's decoder (nesting): no reference.
	case err != nil:
		t.Fatalf("%q: %v", in, err)
	case string(got) != want:
		t.Fatalf("%q:\n got  %q\n want %q", in, got, want)
	default:
		keys, top := c.Keys()
		var names []string
		for _, k := range keys {
			names = append(names, string(k))
		}
		if top != (wantKeys != nil) || top && !slices.Equal(names, wantKeys) {
			t.Fatalf("%q: keys %q (%v), want %q", in, names, top, wantKeys)
		}
	}

	if valid {
		var s string
		isString := bytes.TrimSpace(in)[0] == '"' && json.Unmarshal(in, &s) == nil
		if q, ok := String(in); ok != isString {
			t.Fatalf("%q: String says %v", in, ok)
		} else if ok && string(AppendUnquote(nil, q)) != s {
			t.Fatalf("%q: unquoted as %q, want %q", in, AppendUnquote(nil, q), s)
		}
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(string(in))
	if got := AppendQuoted(nil, in); string(got)+"\n" != buf.String() {
		t.Fatalf("%q: quoted as %s, want %s", in, got, buf.Bytes())
	}
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, in := range cases {
		check(t, []byte(in))
	}
}

// Nesting is accepted to encoding/json's depth, or a Canonicalizer's
// limit, and no deeper.
func TestDepth(t *testing.T) {
	nested := func(n int) []byte { return []byte(strings.Repeat(`[{"a":`, n/2) + `1` + strings.Repeat(`}]`, n/2)) }
	if !readsAsOne(nested(MaxDepth)) || readsAsOne(nested(MaxDepth+2)) {
		t.Error("depth limit is not encoding/json's")
	}
	// Objects and arrays alternate beyond the 64 levels a Reader keeps in
	// a word.
	check(t, nested(300))
	c := Canonicalizer{Limit: 10}
	if _, err := c.Append(nil, nested(10)); err != nil {
		t.Errorf("10 levels: %v", err)
	}
	var de *DepthError
	for _, in := range [][]byte{nested(12), append(nested(12), 'x')} {
		if _, err := c.Append(nil, in); !errors.As(err, &de) || de.Limit != 10 {
			t.Errorf("12 levels: %v, want a DepthError", err)
		}
	}
	if _, err := AppendCanonical(nil, nested(MaxDepth+2)); !errors.As(err, &de) || de.Limit != MaxDepth {
		t.Errorf("%d levels: %v, want a DepthError", MaxDepth+2, err)
	}
}

// FuzzMatchesEncodingJSON holds the package to encoding/json, byte for
// byte: what it accepts, the canonical form content keys hash, the keys
// it reports, strings read and strings written.
//
//	go test ./internal/jsonscan -run '^$' -fuzz FuzzMatchesEncodingJSON -fuzztime 60s
func FuzzMatchesEncodingJSON(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(check)
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

func BenchmarkCanonical(b *testing.B) {
	in := []byte(`{"name":"Ada Lovelace","email":"ada@example.com","message":"Hello \"there\", I'd like a quote for 3 items.\nThanks!","phone":"+44 20 7946 0958","consent":true,"score":42}`)
	b.Run("jsonscan", func(b *testing.B) {
		b.ReportAllocs()
		var c Canonicalizer
		var dst []byte
		for b.Loop() {
			dst, _ = c.Append(dst[:0], in)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			referenceCanonical(in)
		}
	})
}

// readsAsOne reports whether the Reader takes src as one JSON text.
func readsAsOne(src []byte) bool {
	var r Reader
	r.Reset(src)
	if _, err := r.ReadValue(); err != nil {
		return false
	}
	return r.End() == nil
}

// TestUnquote holds the one fast path to encoding/json's reading: a plain
// string is its own text (no copy), and an escape, invalid UTF-8 or an
// unpaired surrogate is decoded as encoding/json decodes it.
func TestUnquote(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`"plain"`, `""`, `"a\"b"`, `"\u00e9t\u00e9"`, "\"bad \xff byte\"", `"\ud800 alone"`, `"a\u0000b"`} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		var buf []byte
		quoted := []byte(in)
		got := Unquote(&buf, quoted)
		if string(got) != want {
			t.Errorf("Unquote(%q) = %q, want %q (encoding/json)", in, got, want)
		}
		plain := !strings.Contains(in, `\`) && !strings.Contains(in, "\xff")
		if shared := len(got) > 0 && &got[0] == &quoted[1]; plain && len(got) > 0 && !shared {
			t.Errorf("Unquote(%q) copied a string that needs no decoding", in)
		}
	}
}
