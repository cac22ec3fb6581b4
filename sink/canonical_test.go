package sink

import (
	"errors"
	"strings"
	"testing"
)

// canonicalCases are JSON documents the row tests and the content-key
// corpus build on; internal/jsonscan holds the canonical form itself to
// encoding/json.
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

func TestCanonicalRejectsInvalidJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `1.`, `-`, `1e`, `.5`,
		`"abc`, `"\x"`, `"\u12"`, "\"ctl\x01\"", `tru`, `nul`, `{} {}`, `{"a":1}x`, `{1:2}`, `+1`} {
		if out, err := AppendCanonical(nil, []byte(in)); err == nil {
			t.Errorf("%q accepted as %q", in, out)
		}
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	if _, err := AppendCanonical(nil, []byte(deep)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("10001 levels of nesting: %v, want ErrTooDeep", err)
	}
}
