package fieldpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/formsync/formsync/internal/jsonscan"
)

// fuzzSpecs are the policies the fuzz tests apply: the test policy, one
// that drops everything, one that hashes everything, and one whose rules
// overlap.
var fuzzSpecs = []string{testSpec, "*=drop", "*=hash", "a*=hash,*b=drop,*=keep"}

func fuzzPolicies(t testing.TB) []*Policy {
	var ps []*Policy
	for _, spec := range fuzzSpecs {
		ps = append(ps, keyed(t, spec))
	}
	return ps
}

func FuzzFields(f *testing.F) {
	for _, seed := range []string{
		`{"company":"Acme Ltd","email":"jane.doe@example.com","message":"Hello, I would like a quote.","name":"Jane Doe","newsletter":true,"phone":"+44 20 7946 0958"}`,
		`{"email":"x@example.com","message":"hi \u003cb\u003e","n":1.5}`,
		`{"a_password":"x","b":[1,{"c":"d"}],"email_ok":false,"n":-1.5e3,"phone":null}`,
		`{"EMAIL":"X@EXAMPLE.COM","my\npassword":"x","\u2028":"\ufffd"}`,
		`{"ab":{"b":1},"b":"\ud83d\ude00","x":{}}`,
		`{}`, `{ "phone" : 1 , "z" : 2 }`, `{"b":1,"a":2}`,
		`[1]`, `"x"`, `null`, `{"email":}`, `{"a":1,}`, ``,
	} {
		f.Add(seed)
	}
	policies := fuzzPolicies(f)
	f.Fuzz(func(t *testing.T, obj string) {
		for _, p := range policies {
			checkFields(t, p, obj)
		}
	})
}

func checkFields(t *testing.T, p *Policy, obj string) {
	out, err := p.Fields(obj)
	isObject := json.Valid([]byte(obj)) && strings.TrimLeft(obj, " \t\r\n")[0] == '{'
	if !isObject {
		if err == nil {
			t.Fatalf("%q: Fields(%q) = %q, want an error", p, obj, out)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: Fields(%q): %v", p, obj, err)
	}
	if !json.Valid([]byte(out)) {
		t.Fatalf("%q: Fields(%q) = %q, not JSON", p, obj, out)
	}
	// Fields is given canonical JSON and must keep it canonical.
	canon, err := canonical([]byte(obj))
	if err != nil {
		t.Skip("beyond encoding/json:", err)
	}
	out, err = p.Fields(string(canon))
	if err != nil {
		t.Fatalf("%q: Fields(%s): %v", p, canon, err)
	}
	if again, _ := canonical([]byte(out)); string(again) != out {
		t.Fatalf("%q: Fields(%s) = %s, not canonical", p, canon, out)
	}
	if checkMembers(t, p, members(t, canon), members(t, []byte(out)), false) == 0 && out != string(canon) {
		t.Fatalf("%q: Fields(%s) = %s, though the policy changes nothing", p, canon, out)
	}
}

func FuzzRaw(f *testing.F) {
	for _, seed := range []string{
		`{"id":"17","form_id":"contact","data":{"name":"Jane Doe","email":"jane.doe@example.com","phone":"+44 20 7946 0958","message":"Hello!"},"files":{"cv":{"name":"a.pdf","url":"https://x/a.pdf"}},"is_spam":0,"created_at":"2026-01-01T00:00:00.000Z"}`,
		`{"id":5,"fields":{"email":"x@example.com","password":"hunter2"},"files":[],"created_at":"2026-01-01T00:00:00Z"}`,
		"{\n  \"data\": {\n    \"em\\u0061il\": \"x\\u0040example.com\",\n    \"phone\": \"1\"\n  }\n}\n",
		`{"fields":{"f":1,"phone":2},"data":{"d":1,"a_password":"x"}}`,
		`{"Data":{"phone":"1"},"data":{"phone":"2"},"fieldſ":{"email":"x"}}`,
		`{"data":{"email":{ "z" : [1, "\u003c"], "a" : null },"ab":"\ud83d"}}`,
		`{"data":[{"email":"x"}],"fields":null,"email":"x"}`,
		`{}`, `[]`, `"x"`, `1`, `null`, ` {"data":{}} `,
		`{"data":{"email":}}`, `{"data":{"phone":"1"}`, `{"data":{"phone":"1"}} x`, ``,
	} {
		f.Add([]byte(seed))
	}
	policies := fuzzPolicies(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, p := range policies {
			checkRaw(t, p, raw)
		}
	})
}

func checkRaw(t *testing.T, p *Policy, raw []byte) {
	out, err := p.Raw(raw)
	if !json.Valid(raw) {
		if err == nil || out != nil {
			t.Fatalf("%q: Raw(%q) = %q, %v; want an error", p, raw, out, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: Raw(%q): %v", p, raw, err)
	}
	if !json.Valid(out) {
		t.Fatalf("%q: Raw(%q) = %q, not JSON", p, raw, out)
	}
	if bytes.TrimLeft(raw, " \t\r\n")[0] != '{' {
		if !bytes.Equal(out, raw) {
			t.Fatalf("%q: Raw(%q) = %q, though it is not an object", p, raw, out)
		}
		return
	}
	in, got := members(t, raw), members(t, out)
	if len(in) != len(got) {
		t.Fatalf("%q: Raw(%q) = %q: %d members, want %d", p, raw, out, len(got), len(in))
	}
	changed := 0
	for i, m := range in {
		if got[i].name != m.name {
			t.Fatalf("%q: Raw(%q) = %q: member %d is %q, want %q", p, raw, out, i, got[i].name, m.name)
		}
		if holdsValues(m) {
			changed += checkMembers(t, p, members(t, m.value), members(t, got[i].value), true)
		} else if !bytes.Equal(got[i].value, m.value) {
			t.Fatalf("%q: Raw(%q) = %q: member %q changed", p, raw, out, m.name)
		}
	}
	if changed == 0 && !bytes.Equal(out, raw) {
		t.Fatalf("%q: Raw(%q) = %q, though the policy changes nothing", p, raw, out)
	}
}

// holdsValues reports whether Raw applies the policy to the member m: an
// object named fields or data in any case, as encoding/json would decode
// it.
func holdsValues(m member) bool {
	return m.value[0] == '{' && (strings.EqualFold(m.name, "fields") || strings.EqualFold(m.name, "data"))
}

// checkMembers checks that got is in with the policy applied: every
// member dropped is gone, every hashed value is the hash of the clear one
// (of its canonical form for an object or array in a raw submission), and
// every other member is byte for byte as it was. It returns how many
// members the policy changed.
func checkMembers(t *testing.T, p *Policy, in, got []member, raw bool) (changed int) {
	t.Helper()
	j := 0
	for _, m := range in {
		action := p.Action(m.name)
		if action == Drop {
			changed++
			continue
		}
		if j >= len(got) || got[j].name != m.name {
			t.Fatalf("%q: member %q missing from %s", p, m.name, describe(got))
		}
		g := got[j].value
		j++
		if action == Keep {
			if !bytes.Equal(g, m.value) {
				t.Fatalf("%q: kept member %q is %s, was %s", p, m.name, g, m.value)
			}
			continue
		}
		changed++
		clear := m.value
		if raw && (clear[0] == '{' || clear[0] == '[') {
			var err error
			if clear, err = canonical(clear); err != nil {
				t.Fatal(err)
			}
		}
		want := `"` + p.HashValue(clear) + `"`
		if string(g) != want || bytes.Equal(g, m.value) {
			t.Fatalf("%q: hashed member %q is %s, want %s (the hash of %s)", p, m.name, g, want, clear)
		}
		// A hash that happens to contain a short clear value made of hex
		// digits shows nothing.
		text := clear
		if s, ok := jsonscan.String(clear); ok {
			text = jsonscan.AppendUnquote(nil, s)
		}
		if len(text) > 0 && !isHex(text) && bytes.Contains(g[1:len(g)-1], text) {
			t.Fatalf("%q: hashed member %q shows its clear value %s", p, m.name, clear)
		}
	}
	if j != len(got) {
		t.Fatalf("%q: members %s added", p, describe(got[j:]))
	}
	return changed
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !strings.ContainsRune("0123456789abcdef", rune(c)) {
			return false
		}
	}
	return true
}

// member is one member of an object as encoding/json reads it: the name
// unescaped, the value as written.
type member struct {
	name  string
	value json.RawMessage
}

// members lists the members of the object obj in order, duplicates
// included, which a map would merge.
func members(t *testing.T, obj []byte) []member {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q is not an object: %v %v", obj, tok, err)
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var m member
		m.name = tok.(string)
		if err := dec.Decode(&m.value); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

func describe(ms []member) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%q:%s ", m.name, m.value)
	}
	return b.String()
}

// FuzzMatch holds match to a regular expression doing the same: * as .*,
// every other character literal, case folded.
func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"*password*", "new_Password_2"}, {"e*l", "email"}, {"e*l", "emails"}, {"*", ""},
		{"*a*a*a*a", "banana"}, {"*aab", "aaab"}, {"a.b", "axb"}, {"k", "\u212a"}, {"ÉCOLE*", "école du soir"},
		{"**x*", "xx"}, {"[x]", "[X]"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			t.Skip("regexp reads invalid UTF-8 otherwise")
		}
		parts := strings.Split(pattern, "*")
		for i, part := range parts {
			parts[i] = regexp.QuoteMeta(part)
		}
		re := regexp.MustCompile(`(?is)\A` + strings.Join(parts, ".*") + `\z`)
		if got, want := match(foldString(pattern), name), re.MatchString(name); got != want {
			t.Errorf("match(%q, %q) = %v, want %v", pattern, name, got, want)
		}
	})
}
