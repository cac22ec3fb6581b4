package fieldpolicy

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/jsonscan"
)

// testSpec is the policy the rewriting tests apply.
const testSpec = "email_ok=keep,*email*=hash,phone=drop,*password*=drop,n=hash"

// h is the JSON string a hashed value is stored as, given the text hashed.
func h(hashed string) string { return `"` + hmacHex(testKey, hashed) + `"` }

func TestFields(t *testing.T) {
	p := keyed(t, testSpec)
	for _, tc := range []struct{ name, in, want string }{
		{"only member dropped", `{"phone":"+44 20 7946 0958"}`, `{}`},
		{"first dropped", `{"a_password":"x","b":2,"c":3}`, `{"b":2,"c":3}`},
		{"middle dropped", `{"a":1,"phone":"1","z":2}`, `{"a":1,"z":2}`},
		{"last dropped", `{"a":1,"phone":"1"}`, `{"a":1}`},
		{"all dropped", `{"password":"x","phone":"1"}`, `{}`},
		{"leading drops", `{"a_password":"x","b_password":"y","c":3}`, `{"c":3}`},
		{"trailing drops", `{"a":1,"password":"x","phone":"1"}`, `{"a":1}`},
		{"drops around a kept member", `{"a_password":"x","b":2,"phone":"1"}`, `{"b":2}`},
		{"drops between kept members", `{"a":1,"b_password":"x","c_password":"y","d":4}`, `{"a":1,"d":4}`},
		{"only member hashed", `{"email":"x@example.com"}`, `{"email":` + h("x@example.com") + `}`},
		{"first hashed", `{"email":"x@example.com","z":1}`, `{"email":` + h("x@example.com") + `,"z":1}`},
		{"last hashed", `{"a":1,"work_email":"w@example.com"}`, `{"a":1,"work_email":` + h("w@example.com") + `}`},
		{"hashed number", `{"n":1.50}`, `{"n":` + h("1.50") + `}`},
		{"hashed object as given", `{"email":{"a":[1,"x"]}}`, `{"email":` + h(`{"a":[1,"x"]}`) + `}`},
		{"hashed escaped string decoded", `{"email":"x\u003cy\u003e\n"}`, `{"email":` + h("x<y>\n") + `}`},
		{"hash, drop and keep", `{"email":"x@example.com","email_ok":true,"message":"hi \u003cb\u003e","n":1.5,"phone":"1"}`,
			`{"email":` + h("x@example.com") + `,"email_ok":true,"message":"hi \u003cb\u003e","n":` + h("1.5") + `}`},
		{"case ignored", `{"EMAIL":"x","Phone":"1"}`, `{"EMAIL":` + h("x") + `}`},
		{"escaped name matched unescaped", `{"my\npassword":"x","z":1}`, `{"z":1}`},
		{"nested names not matched", `{"contact":{"email":"x","phone":"1"}}`, `{"contact":{"email":"x","phone":"1"}}`},
		{"dropped member holding an object", `{"a":1,"password":{"x":[1,{"y":2}]},"z":2}`, `{"a":1,"z":2}`},
		{"empty", `{}`, `{}`},
	} {
		got, err := p.Fields(tc.in)
		if err != nil {
			t.Errorf("%s: Fields(%s): %v", tc.name, tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: Fields(%s)\n = %s\nwant %s", tc.name, tc.in, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: Fields(%s) = %s, not JSON", tc.name, tc.in, got)
		}
	}
}

// The result of canonical fields is what encoding/json makes of the
// edited map: still canonical, so it hashes and compares like any other.
func TestFieldsIsCanonical(t *testing.T) {
	p := keyed(t, testSpec)
	in := map[string]any{
		"email":      "jane.doe@example.com",
		"email_ok":   true,
		"message":    "Hello <b>world</b> & \"friends\"\n",
		"n":          json.Number("12.50"),
		"name":       "Jane Doe",
		"phone":      "+44 20 7946 0958",
		"password":   "hunter2",
		"tags":       []any{"a", map[string]any{"b": nil}},
		"work_email": map[string]any{"z": 1, "a": "x"},
		"zz":         nil,
	}
	obj := mustMarshal(t, in)
	got, err := p.Fields(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for k, v := range in {
		switch p.Action(k) {
		case Hash:
			want[k] = strings.Trim(p.HashValue([]byte(mustMarshal(t, v))), `"`)
		case Keep:
			want[k] = v
		}
	}
	if w := mustMarshal(t, want); got != w {
		t.Errorf("Fields(%s)\n = %s\nwant %s", obj, got, w)
	}
	// The strings were hashed as their text.
	if !strings.Contains(got, `"email":`+h("jane.doe@example.com")) {
		t.Errorf("email not hashed as its text: %s", got)
	}
}

func mustMarshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFieldsUnchanged(t *testing.T) {
	p := keyed(t, testSpec)
	for _, in := range []string{`{}`, `{"a":1}`, `{"email_ok":true,"name":"x","x":{"email":"y"}}`} {
		if got, err := p.Fields(in); got != in || err != nil {
			t.Errorf("Fields(%s) = %s, %v", in, got, err)
		}
		if n := testing.AllocsPerRun(100, func() { p.Fields(in) }); n != 0 {
			t.Errorf("Fields(%s) allocates %v times though nothing changes", in, n)
		}
	}
}

func TestFieldsErrors(t *testing.T) {
	p := keyed(t, testSpec)
	for _, in := range []string{
		``, ` `, `[]`, `[{"email":"x"}]`, `"x"`, `1`, `null`, `true`,
		`{`, `{"email"}`, `{"email":}`, `{"email":"x",}`, `{"email":"x"}x`, `{"email":"x"} {}`,
		`{"email":"x}`, `{"email":tru}`, `{"email":01}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{email:1}`,
		`{"a":[1,]}`, `{"a":{"b":1,}}`,
	} {
		if got, err := p.Fields(in); err == nil {
			t.Errorf("Fields(%q) = %q, want an error", in, got)
		} else if got != "" {
			t.Errorf("Fields(%q) returned %q with its error", in, got)
		}
	}
	_, err := p.Fields(`[1]`)
	if err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("Fields([1]): %v", err)
	}
	_, err = p.Fields(`{"a":1,}`)
	if err == nil || !strings.Contains(err.Error(), "offset 7") {
		t.Errorf(`Fields({"a":1,}): %v, want the offset of the problem`, err)
	}
	deep := `{"a":` + strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth) + `}`
	if _, err := p.Fields(deep); err == nil {
		t.Error("nesting deeper than encoding/json accepts was accepted")
	}
}

func TestRaw(t *testing.T) {
	p := keyed(t, testSpec)
	hx := h("x@example.com")
	for _, tc := range []struct{ name, in, want string }{
		{"data", `{"id":1,"data":{"email":"x@example.com","name":"X","phone":"1"},"created_at":"2026-01-01T00:00:00Z"}`,
			`{"id":1,"data":{"email":` + hx + `,"name":"X"},"created_at":"2026-01-01T00:00:00Z"}`},
		{"fields", `{"fields":{"phone":"1","email":"x@example.com"},"id":"7"}`,
			`{"fields":{"email":` + hx + `},"id":"7"}`},
		{"fields and data", `{"fields":{"phone":"1"},"data":{"phone":"1","a":2}}`, `{"fields":{},"data":{"a":2}}`},
		{"every data member", `{"data":{"phone":"1"},"data":{"email":"x@example.com"}}`, `{"data":{},"data":{"email":` + hx + `}}`},
		{"space kept",
			"{\n  \"id\" : 1 ,\n  \"data\" : {\n    \"name\" : \"X\" ,\n    \"email\" : \"x@example.com\" ,\n    \"phone\" : \"1\"\n  }\n}\n",
			"{\n  \"id\" : 1 ,\n  \"data\" : {\n    \"name\" : \"X\" ,\n    \"email\" : " + hx + "\n  }\n}\n"},
		{"space around a first dropped member", `{ "data" : { "phone" : "1" , "a" : 2 } }`, `{ "data" : { "a" : 2 } }`},
		{"space around the only member", `{ "data" : { "phone" : "1" } }`, `{ "data" : {  } }`},
		{"escaped names", `{"d\u0061ta":{"em\u0061il":"x@example.com","ph\u006Fne":"1","n\u0061me":"X"}}`,
			`{"d\u0061ta":{"em\u0061il":` + hx + `,"n\u0061me":"X"}}`},
		{"case of the values member ignored", `{"Data":{"phone":"1","a":2},"FIELDS":{"phone":"1"}}`, `{"Data":{"a":2},"FIELDS":{}}`},
		{"escapes in kept values kept", `{"data":{"a":"\u00e9\/","phone":1}}`, `{"data":{"a":"\u00e9\/"}}`},
		{"string hashed as its decoded text", `{"data":{"email":"x\u0040example.com"}}`, `{"data":{"email":` + hx + `}}`},
		{"object hashed in canonical form", `{"data":{"email":{ "z" : 1, "a" : "\u00e9<" }}}`,
			`{"data":{"email":` + h(`{"a":"é<","z":1}`) + `}}`},
		{"members outside fields and data untouched", `{"email":"x@example.com","phone":"1","files":{"phone":"1"},"data":{"a":1,"phone":2}}`,
			`{"email":"x@example.com","phone":"1","files":{"phone":"1"},"data":{"a":1}}`},
		{"nested names not matched", `{"data":{"contact":{"phone":"1"},"list":[{"email":"x"}]}}`,
			`{"data":{"contact":{"phone":"1"},"list":[{"email":"x"}]}}`},
	} {
		got, err := p.Raw([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: Raw(%s): %v", tc.name, tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s: Raw(%s)\n = %s\nwant %s", tc.name, tc.in, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: Raw(%s) = %s, not JSON", tc.name, tc.in, got)
		}
	}
}

// Raw returns its input itself when it changes nothing: the submission is
// stored byte for byte as the API sent it.
func TestRawUnchanged(t *testing.T) {
	p := keyed(t, testSpec)
	for _, in := range []string{
		`{}`, `{"id":1,"data":{"name":"X"}}`, "{ \"data\" : { \"email_ok\" : true } }\n",
		`{"data":[{"email":"x","phone":"1"}],"fields":null}`, `{"data":"phone","fields":1}`,
		`{"email":"x","phone":"1","metadata":{"phone":"1"}}`,
		`{"datas":{"phone":"1"},"field":{"phone":"1"}}`,
		// Not objects: left as sent.
		`[{"data":{"phone":"1"}}]`, `"x"`, ` 1 `, `null`, "\n[]\n",
	} {
		raw := []byte(in)
		got, err := p.Raw(raw)
		if err != nil {
			t.Errorf("Raw(%s): %v", in, err)
			continue
		}
		if len(got) != len(raw) || &got[0] != &raw[0] {
			t.Errorf("Raw(%s) = %s, a copy", in, got)
		}
		if n := testing.AllocsPerRun(100, func() { p.Raw(raw) }); n != 0 {
			t.Errorf("Raw(%s) allocates %v times though nothing changes", in, n)
		}
	}
}

func TestRawErrors(t *testing.T) {
	p := keyed(t, testSpec)
	for _, in := range []string{
		``, `{`, `{"data":{"email":"x"}`, `{"data":{"email":}}`, `{"data":{"email":"x",}}`, `[1,`, `{"a":1}x`,
		`{"data":{"phone":"1"}} {}`, `{"data":{"phone" "1"}}`, `nul`, `{"data":[1 2]}`,
	} {
		if got, err := p.Raw([]byte(in)); err == nil || got != nil {
			t.Errorf("Raw(%q) = %q, %v; want an error", in, got, err)
		}
	}
}

// A value hashes alike in the raw object and in the canonical fields made
// from it, so the two can be joined on.
func TestRawHashesAsFields(t *testing.T) {
	p := keyed(t, "*=hash")
	raw := []byte(`{"data": {"email": "x\u0040example.com", "n": 1.50, "o": { "b": [1, "\u003c"], "a": null }, "t": true, "u": "\ud83d"}}`)
	var sub struct{ Data json.RawMessage }
	if err := json.Unmarshal(raw, &sub); err != nil {
		t.Fatal(err)
	}
	canon, err := canonical(sub.Data)
	if err != nil {
		t.Fatal(err)
	}
	fields, err := p.Fields(string(canon))
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Raw(raw)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Data map[string]string }
	var want map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(fields), &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != 5 || !maps.Equal(got.Data, want) {
		t.Errorf("Raw hashed %v, Fields %v", got.Data, want)
	}
}

func TestRawOutputIsFresh(t *testing.T) {
	p := keyed(t, testSpec)
	raw := []byte(`{"data":{"phone":"1","a":2}}`)
	orig := bytes.Clone(raw)
	out, err := p.Raw(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, orig) {
		t.Errorf("Raw changed its input to %s", raw)
	}
	if cap(out) != len(out) {
		t.Errorf("Raw output has %d bytes of %d allocated: its size is known in advance", len(out), cap(out))
	}
}
