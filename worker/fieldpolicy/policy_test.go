package fieldpolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustParse(t testing.TB, spec string) *Policy {
	t.Helper()
	p, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return p
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
		needsKey   bool
	}{
		{"email=hash", "email=hash", true},
		{"email=hash,phone=drop,*password*=drop", "email=hash,phone=drop,*password*=drop", true},
		{"  Email = HASH ,\tPhone=Drop\n", "email=hash,phone=drop", true},
		{"phone=drop,notes=keep", "phone=drop,notes=keep", false},
		{"*=drop", "*=drop", false},
		{"email_ok=keep,*email*=hash", "email_ok=keep,*email*=hash", true},
		{"first name=drop", "first name=drop", false},
		{"a.b[0]=keep", "a.b[0]=keep", false},
		{"ÉCOLE=drop", "école=drop", false},
	} {
		p := mustParse(t, tc.spec)
		if got := p.String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.spec, got, tc.want)
		}
		if got := p.NeedsKey(); got != tc.needsKey {
			t.Errorf("Parse(%q).NeedsKey() = %v", tc.spec, got)
		}
		// The normal form parses back to itself.
		if again := mustParse(t, p.String()).String(); again != tc.want {
			t.Errorf("Parse(%q) again = %q", tc.want, again)
		}
	}
}

func TestParseEmpty(t *testing.T) {
	for _, spec := range []string{"", " ", "\t\n "} {
		p, err := Parse(spec)
		if p != nil || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want nil, nil", spec, p, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	type problem struct{ item, says string }
	for _, tc := range []struct {
		spec string
		want []problem
	}{
		{"email=hash,", []problem{{"", "empty rule"}}},
		{"email=hash,,phone=drop", []problem{{"", "empty rule"}}},
		{",", []problem{{"", "empty rule"}, {"", "empty rule"}}},
		{"email", []problem{{"email", `no "="`}}},
		{"=hash", []problem{{"=hash", "no pattern"}}},
		{" = hash", []problem{{"= hash", "no pattern"}}},
		{"email=", []problem{{"email=", "no action"}}},
		{"email=hsh", []problem{{"email=hsh", `unknown action "hsh": want hash, drop or keep`}}},
		{"email=hash=drop", []problem{{"email=hash=drop", `unknown action "hash=drop"`}}},
		{"email=hash,EMAIL=drop", []problem{{"EMAIL=drop", `pattern "email" is already given by rule "email=hash"`}}},
		{"*Pass*=drop,*pass*=drop", []problem{{"*pass*=drop", "already given"}}},
		// Every problem at once, in the order written.
		{"email,=drop,x=nope,,x=hash,x=drop", []problem{
			{"email", `no "="`}, {"=drop", "no pattern"}, {"x=nope", "unknown action"},
			{"", "empty rule"}, {"x=drop", "already given"},
		}},
	} {
		p, err := Parse(tc.spec)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", tc.spec, p)
			continue
		}
		if p != nil {
			t.Errorf("Parse(%q) returned a policy with its error", tc.spec)
		}
		var got []*ParseError
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var pe *ParseError
			if !errors.As(e, &pe) {
				t.Fatalf("Parse(%q): %v is not a *ParseError", tc.spec, e)
			}
			got = append(got, pe)
		}
		if len(got) != len(tc.want) {
			t.Errorf("Parse(%q) = %d problems, want %d:\n%v", tc.spec, len(got), len(tc.want), err)
			continue
		}
		for i, w := range tc.want {
			if got[i].Item != w.item || !strings.Contains(got[i].Problem, w.says) {
				t.Errorf("Parse(%q) problem %d = %q: %q, want %q: …%s…", tc.spec, i, got[i].Item, got[i].Problem, w.item, w.says)
			}
			if !strings.Contains(got[i].Error(), "field policy") {
				t.Errorf("%q does not say it is about the field policy", got[i].Error())
			}
		}
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Keep: "keep", Hash: "hash", Drop: "drop", 7: "Action(7)", -1: "Action(-1)"} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d).String() = %q, want %q", int(a), got, want)
		}
	}
	if Action(0) != Keep {
		t.Error("the zero Action is not Keep")
	}
}

func TestMatching(t *testing.T) {
	for _, tc := range []struct {
		spec string
		name string
		want Action
	}{
		{"email=hash", "email", Hash},
		{"email=hash", "EMAIL", Hash},
		{"EMAIL=hash", "eMaIl", Hash},
		{"email=hash", "emails", Keep},
		{"email=hash", "my_email", Keep},
		{"email=hash", "", Keep},
		{"*password*=drop", "password", Drop},
		{"*password*=drop", "new_Password_2", Drop},
		{"*password*=drop", "passwor", Keep},
		{"*password*=drop", "pass_word", Keep},
		{"e*l=drop", "el", Drop},
		{"e*l=drop", "email", Drop},
		{"e*l=drop", "e-mail", Drop},
		{"e*l=drop", "emails", Keep},
		{"e*l=drop", "mail", Keep},
		{"e*l*l=drop", "ell", Drop},
		{"e*l*l=drop", "elxl", Drop},
		{"e*l*l=drop", "elx", Keep},
		{"*=drop", "", Drop},
		{"*=drop", "anything at all", Drop},
		{"**=drop", "x", Drop},
		{"*a*a*=hash", "banana", Hash},
		{"*a*a*a*a=hash", "banana", Keep},
		{"*ab=hash", "aab", Hash},
		{"*aab=hash", "aaab", Hash},
		// No character but * is special.
		{"a.b=drop", "axb", Keep},
		{"a?=drop", "ab", Keep},
		{"a?=drop", "a?", Drop},
		{"[x]=drop", "x", Keep},
		{"[x]=drop", "[X]", Drop},
		// Case is folded the way encoding/json folds keys.
		{"école=drop", "ÉCOLE", Drop},
		{"k=drop", "\u212a", Drop},   // Kelvin sign
		{"s*=drop", "\u017fx", Drop}, // long s
		// Lower-casing İ (dotted capital I) would give a plain i, which
		// folds with I: the pattern keeps it.
		{"İsim=drop", "İsim", Drop},
		{"İsim=drop", "isim", Keep},
		{"İsim=drop", "Isim", Keep},
		// The first rule that matches decides.
		{"email_ok=keep,*email*=hash", "email_ok", Keep},
		{"email_ok=keep,*email*=hash", "Email_OK", Keep},
		{"email_ok=keep,*email*=hash", "work_email", Hash},
		{"*=hash,phone=drop", "phone", Hash},
		{"phone=drop,*=hash", "phone", Drop},
		{"phone=drop,*=hash", "name", Hash},
	} {
		if got := mustParse(t, tc.spec).Action(tc.name); got != tc.want {
			t.Errorf("Parse(%q).Action(%q) = %v, want %v", tc.spec, tc.name, got, tc.want)
		}
		// Names as bytes match alike.
		p := mustParse(t, tc.spec)
		if got := actionOf(p, []byte(tc.name)); got != tc.want {
			t.Errorf("Parse(%q): actionOf(%q as bytes) = %v, want %v", tc.spec, tc.name, got, tc.want)
		}
	}
}

func TestRules(t *testing.T) {
	p := mustParse(t, "Email=HASH,phone=drop")
	want := []Rule{{"email", Hash}, {"phone", Drop}}
	got := p.Rules()
	if !slices.Equal(got, want) {
		t.Fatalf("Rules() = %v, want %v", got, want)
	}
	got[0].Action = Keep
	if p.Action("email") != Hash {
		t.Error("changing what Rules returned changed the policy")
	}
}

func TestNames(t *testing.T) {
	p := mustParse(t, "phone=drop,*password*=drop,email=hash")
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"email", "name"}, []string{"email", "name"}},
		{[]string{"email", "name", "phone"}, []string{"email", "name"}},
		{[]string{"a", "password", "phone", "z"}, []string{"a", "z"}},
		{[]string{"password", "phone"}, []string{}},
		{[]string{"phone"}, []string{}},
	} {
		in := slices.Clone(tc.in)
		got := p.Names(in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Names(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Names(%q) changed its input to %q", tc.in, in)
		}
		if slices.Equal(tc.in, tc.want) && len(in) > 0 && &got[0] != &in[0] {
			t.Errorf("Names(%q) copied its input though it dropped nothing", tc.in)
		}
	}
}

// Every method of no policy works and changes nothing.
func TestNoPolicy(t *testing.T) {
	key := []byte("0123456789abcdef")
	for name, p := range map[string]*Policy{"nil": nil, "zero": {}, "nil with key": (*Policy)(nil).WithKey(key)} {
		t.Run(name, func(t *testing.T) {
			if p.Rules() != nil || p.String() != "" || p.Identity() != "" || p.NeedsKey() || p.Validate() != nil {
				t.Error("no policy has rules, a name, an identity, or needs a key")
			}
			if a := p.Action("password"); a != Keep {
				t.Errorf("Action = %v", a)
			}
			if h := p.HashValue([]byte(`"x"`)); h != "" {
				t.Errorf("HashValue = %q", h)
			}
			obj := `{"email":"x@example.com","password":"x"}`
			if out, err := p.Fields(obj); out != obj || err != nil {
				t.Errorf("Fields = %q, %v", out, err)
			}
			raw := []byte(`{"data": {"password": "x"}}`)
			if out, err := p.Raw(raw); &out[0] != &raw[0] || len(out) != len(raw) || err != nil {
				t.Errorf("Raw = %q, %v", out, err)
			}
			names := []string{"password"}
			if got := p.Names(names); &got[0] != &names[0] {
				t.Error("Names copied")
			}
			if v, err := p.Lookup("password", "x"); v != "x" || err != nil {
				t.Errorf("Lookup = %q, %v", v, err)
			}
		})
	}
}

func TestRuleFor(t *testing.T) {
	t.Parallel()
	p, err := Parse("Email=keep,phone*=drop,*=hash")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{"EMAIL": {"email", "keep"}, "phone_2": {"phone*", "drop"}, "dob": {"*", "hash"}} {
		if pat, act := p.RuleFor(name); pat != want[0] || act != want[1] {
			t.Errorf("RuleFor(%q) = %q, %q; want %q, %q", name, pat, act, want[0], want[1])
		}
	}
	var none *Policy
	if pat, act := none.RuleFor("x"); pat != "" || act != "keep" {
		t.Errorf("no policy: %q, %q", pat, act)
	}
}
