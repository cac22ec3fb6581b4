package apisim

import (
	"hash/fnv"
	"strconv"
	"unicode/utf8"
)

// mix is a splitmix64 generator: cheap, allocation-free, and good enough to
// turn one submission's seed into its content.
type mix struct{ s uint64 }

func (m *mix) next() uint64 {
	m.s += 0x9e3779b97f4a7c15
	z := m.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (m *mix) intn(n int) int { return int(m.next() % uint64(n)) }

func pick[T any](m *mix, xs []T) T { return xs[m.intn(len(xs))] }

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// schema is the set of inputs a form has.
type schema int

const (
	schemaContact  schema = iota // name, email, message (+ phone sometimes)
	schemaSignup                 // name, email, company, phone, plan
	schemaFeedback               // name, email, message, rating, "How did you hear about us?"
)

func schemaFor(formID string) schema {
	switch formID {
	case "contact":
		return schemaContact
	case "signup":
		return schemaSignup
	case "feedback":
		return schemaFeedback
	}
	return schema(hashString(formID) % 3)
}

// Names include non-ASCII letters and an apostrophe so that the worker's
// JSON and hashing meet them.
var (
	firstNames = []string{"Ada", "Grace", "Linus", "Zoë", "José", "Łukasz", "Amélie", "Chidi", "Mei", "Søren",
		"Priya", "Omar", "Hannah", "Ivan", "Fatima", "Kenji", "Noah", "Olivia", "Ravi", "Yuki"}
	firstASCII = []string{"ada", "grace", "linus", "zoe", "jose", "lukasz", "amelie", "chidi", "mei", "soren",
		"priya", "omar", "hannah", "ivan", "fatima", "kenji", "noah", "olivia", "ravi", "yuki"}
	lastNames = []string{"Lovelace", "Hopper", "O'Brien", "Müller", "García", "Nakamura", "Okafor", "Kowalski",
		"Smith", "Dubois", "Andersen", "Patel", "Haddad", "Ivanova", "Chen", "Rossi"}
	lastASCII = []string{"lovelace", "hopper", "obrien", "muller", "garcia", "nakamura", "okafor", "kowalski",
		"smith", "dubois", "andersen", "patel", "haddad", "ivanova", "chen", "rossi"}
	domains  = []string{"example.com", "example.org", "mail.example.net", "corp.example"}
	openings = []string{"Hello,", "Hi there!", "Good morning.", "Hey team —", "Dear support,", "Quick question:"}
	bodies   = []string{
		"I'd like to know more about your pricing.",
		"The form on the \"Contact\" page didn't load for me.",
		"Can you send me an invoice for last month?",
		"Great product, thanks! 🎉",
		"We are evaluating tools for our team of 12.\nCould we book a demo?",
		"Is there an API for exporting submissions?",
		"Please delete my account.",
		"Ich hätte gern ein Angebot.",
		"Tab\tseparated\tvalues don't import correctly.",
		"",
	}
	companies = []string{"Acme Corp", "Globex", "Initech", "Umbrella Ltd", "Stark & Sons", "Wayne Enterprises", "Hooli", ""}
	plans     = []string{"free", "pro", "team", "enterprise"}
	heardFrom = []string{"Search engine", "A friend", "Twitter / X", "Podcast", "Conference talk", "Other"}
	fileKinds = []struct{ ext, typ string }{
		{"pdf", "application/pdf"}, {"png", "image/png"}, {"jpg", "image/jpeg"}, {"csv", "text/csv"},
		{"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
	}
)

// content renders the fields object and files array of one submission. The
// reference number is derived from the id, so no two submissions of a form
// (not even ties) have the same content.
func content(seed uint64, formID string, sch schema, id int64, spec *fileSpec) (fields, files []byte) {
	fields, entries := generate(seed, formID, sch, id, spec)
	if len(entries) == 0 {
		return fields, []byte("[]")
	}
	f := make([]byte, 0, 200*len(entries))
	f = append(f, '[')
	for i, e := range entries {
		if i > 0 {
			f = append(f, ',')
		}
		f = append(f, `{"name":`...)
		f = appendJSONString(f, e.name)
		f = append(f, `,"size":`...)
		f = strconv.AppendInt(f, e.declared, 10)
		f = append(f, `,"type":`...)
		f = appendJSONString(f, e.typ)
		f = append(f, `,"url":`...)
		f = appendJSONString(f, e.url)
		f = append(f, '}')
	}
	return fields, append(f, ']')
}

// generate draws the fields object and the files of one submission; the
// files' draws come after every draw of the fields, so that FileOptions
// change the files alone.
func generate(seed uint64, formID string, sch schema, id int64, spec *fileSpec) (fields []byte, entries []fileEntry) {
	m := mix{s: seed}
	fi, li := m.intn(len(firstNames)), m.intn(len(lastNames))
	name := firstNames[fi] + " " + lastNames[li]
	email := firstASCII[fi] + "." + lastASCII[li] + strconv.Itoa(m.intn(1000)) + "@" + pick(&m, domains)
	ref := "FS-" + strconv.FormatInt(id, 10)

	b := make([]byte, 0, 256)
	b = append(b, '{')
	b = appendField(b, "name", name, true)
	b = appendField(b, "email", email, false)
	switch sch {
	case schemaContact:
		b = appendField(b, "message", pick(&m, openings)+" "+pick(&m, bodies)+" (ref "+ref+")", false)
		if m.intn(10) < 3 {
			b = appendField(b, "phone", phone(&m), false)
		}
	case schemaSignup:
		b = appendField(b, "company", pick(&m, companies), false)
		b = appendField(b, "phone", phone(&m), false)
		b = appendField(b, "plan", pick(&m, plans), false)
		b = appendField(b, "signup_ref", ref, false)
	case schemaFeedback:
		b = appendField(b, "message", pick(&m, bodies)+" (ref "+ref+")", false)
		b = appendField(b, "rating", strconv.Itoa(1+m.intn(5)), false)
		b = appendField(b, "How did you hear about us?", pick(&m, heardFrom), false)
	}
	if m.intn(100) < 7 {
		b = appendField(b, "utm_source", pick(&m, []string{"newsletter", "google", "partner"}), false)
	}
	fields = append(b, '}')

	o := &spec.opts
	has := m.intn(10) == 0
	switch {
	case o.Every < 0:
		has = false
	case o.Every > 0:
		has = id%int64(o.Every) == 0
	}
	n := 1 + m.intn(2)
	if o.PerSubmission > 0 {
		n = o.PerSubmission
	}
	if !has {
		return fields, nil
	}
	entries = make([]fileEntry, n)
	for i := range entries {
		k := pick(&m, fileKinds)
		fname := "attachment-" + strconv.FormatInt(id, 10) + "-" + strconv.Itoa(i+1) + "." + k.ext
		// Small by default (1 to 8 KiB), so that fetching every file of
		// a thousand submissions is light.
		drawn := int64(1024 + m.intn(7<<10))
		entries[i] = spec.entry(formID, id, i+1, fname, k.typ, drawn)
	}
	return fields, entries
}

func phone(m *mix) string {
	return "+1 555 " + strconv.Itoa(100+m.intn(900)) + " " + strconv.Itoa(1000+m.intn(9000))
}

func appendField(b []byte, key, value string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = appendJSONString(b, key)
	b = append(b, ':')
	return appendJSONString(b, value)
}

// appendJSONString appends s as a JSON string literal (valid UTF-8 kept raw).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
	}
	return append(b, '"')
}
