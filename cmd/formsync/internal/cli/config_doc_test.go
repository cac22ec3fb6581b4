package cli

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConfigDocsStateDefaults: the comment of every variable of Config in
// config.go starts with its name and states its default as `formsync help`
// shows it (its default and show tags), or "Default: none" when it has none, so that a
// default changed in one place and not the other fails here.
func TestConfigDocsStateDefaults(t *testing.T) {
	docs := configDocs(t)
	ct := reflect.TypeFor[Config]()
	fields := configFields()
	if len(docs) != len(fields) {
		t.Fatalf("config.go declares %d Config fields with an envconfig tag, Config has %d", len(docs), len(fields))
	}
	for _, f := range fields {
		doc, ok := docs[f.name]
		if !ok {
			t.Errorf("%s: no field of Config in config.go has this tag", f.env())
			continue
		}
		if err := docStatesDefault(doc, f.name, ct.Field(f.index).Type); err != nil {
			t.Errorf("comment of Config.%s: %v\n\t%s", ct.Field(f.index).Name, err, doc)
		}
	}
}

// configDocs reads the doc comment of each field of Config from config.go,
// by envconfig name, with its lines joined by single spaces.
func configDocs(t *testing.T) map[string]string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var st *ast.StructType
	ast.Inspect(file, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Config" {
			st, _ = ts.Type.(*ast.StructType)
			return false
		}
		return st == nil
	})
	if st == nil {
		t.Fatal("config.go declares no struct type Config")
	}
	docs := map[string]string{}
	for _, fl := range st.Fields.List {
		if fl.Tag == nil {
			continue
		}
		tag, err := strconv.Unquote(fl.Tag.Value)
		if err != nil {
			t.Fatal(err)
		}
		name := reflect.StructTag(tag).Get("envconfig")
		if name == "" {
			continue
		}
		if len(fl.Names) != 1 {
			t.Errorf("%s: declare one field per line, each with its own comment", name)
			continue
		}
		if fl.Doc == nil {
			t.Errorf("Config.%s (%s) has no comment above it", fl.Names[0].Name, name)
		}
		docs[name] = strings.Join(strings.Fields(fl.Doc.Text()), " ")
	}
	return docs
}

// defaultSentence finds "Default X" or "Default: X" at the start of the
// comment or of a sentence in it (not "Application Default Credentials").
var defaultSentence = regexp.MustCompile(`(?:^|[.)] )Default:? `)

// docStatesDefault checks that doc, the comment of variable name (without
// the prefix) of type typ, starts with the name and states its default (its
// default tag, or show tag). A value that is not text is compared parsed, as the variable
// would be: "Default 60s" states a default of 1m, "Default 0" one of 0s.
func docStatesDefault(doc, name string, typ reflect.Type) error {
	if !strings.HasPrefix(doc, name+":") {
		return fmt.Errorf("does not start with %q", name+":")
	}
	m := defaultSentence.FindAllStringIndex(doc, -1)
	if len(m) != 1 {
		return fmt.Errorf("has %d sentences starting with Default, want one (e.g. \"Default 100.\" or \"Default: none.\")", len(m))
	}
	said := strings.TrimLeft(doc[m[0][1]:], "`\"")
	d := fieldByName(name)
	switch {
	case d.show == "" && d.def == "":
		if !strings.HasPrefix(said, "none") {
			return fmt.Errorf("states a default, but %s has none: write \"Default: none\"", name)
		}
		return nil
	case d.show != "":
		// A default that is not a value alone (TMP_DIR, SHARD_INDEX) is
		// stated as help shows it.
		if !strings.HasPrefix(said, d.show) {
			return fmt.Errorf("does not state the default as help shows it: \"Default: %s\"", d.show)
		}
		return nil
	case typ.Kind() == reflect.String:
		if !strings.HasPrefix(said, d.def) {
			return fmt.Errorf("does not state the default: \"Default %s\"", d.def)
		}
		return nil
	}
	word, _, _ := strings.Cut(said, " ")
	word = strings.TrimRight(word, ".,;:)`\"")
	got, want := reflect.New(typ).Elem(), reflect.New(typ).Elem()
	if err := setField(want, d.def); err != nil {
		return fmt.Errorf("the default %q does not parse: %v", d.def, err)
	}
	if err := setField(got, word); err != nil || !got.Equal(want) {
		return fmt.Errorf("states a default of %q, not %s's %s", word, name, d.def)
	}
	return nil
}

// TestDocStatesDefault: the check reads defaults the way people write them
// and is not fooled by a "Default" that is not the default's sentence.
func TestDocStatesDefault(t *testing.T) {
	dur, str, integer := reflect.TypeFor[time.Duration](), reflect.TypeFor[string](), reflect.TypeFor[int]()
	for _, c := range []struct {
		doc, name string
		typ       reflect.Type
		ok        bool
	}{
		{"MAX_RETRY_AFTER: cap. Default 1m.", "MAX_RETRY_AFTER", dur, true},
		{"MAX_RETRY_AFTER: cap. Default 60s.", "MAX_RETRY_AFTER", dur, true},
		{"MAX_RETRY_AFTER: cap. Default: 60s (a minute).", "MAX_RETRY_AFTER", dur, true},
		{"MAX_RETRY_AFTER: cap. Default 30s.", "MAX_RETRY_AFTER", dur, false},
		{"MAX_RETRY_AFTER: cap. Default 1.", "MAX_RETRY_AFTER", dur, false},
		{"MAX_RETRY_AFTER: cap of 1m.", "MAX_RETRY_AFTER", dur, false},
		{"LOOKBACK: behind. Default 0 (off).", "LOOKBACK", dur, true},
		{"PAGE_SIZE: limit. Default 100.", "PAGE_SIZE", integer, true},
		{"PAGE_SIZE: limit. Default 10.", "PAGE_SIZE", integer, false},
		{"PAGE_SIZE: limit. Default 100. Default 10.", "PAGE_SIZE", integer, false},
		{"CONCURRENCY: forms at once. Default 4.", "PAGE_SIZE", integer, false},
		{"SCHEDULE: cron. Default `*/15 * * * *`.", "SCHEDULE", str, true},
		{"SCHEDULE: cron. Default */5 * * * *.", "SCHEDULE", str, false},
		{"TMP_DIR: staging. Default: system temp dir.", "TMP_DIR", str, true},
		{"TMP_DIR: staging. Default: none.", "TMP_DIR", str, false},
		{"BQ_PROJECT: project, via Application Default Credentials. Default: none.", "BQ_PROJECT", str, true},
		{"BQ_PROJECT: project, via Application Default Credentials.", "BQ_PROJECT", str, false},
		{"BQ_PROJECT: project. Default my-project.", "BQ_PROJECT", str, false},
	} {
		if err := docStatesDefault(c.doc, c.name, c.typ); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok=%v", c.doc, err, c.ok)
		}
	}
}
