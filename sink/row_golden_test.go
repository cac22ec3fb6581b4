package sink

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// contentKeysFile holds, for a corpus of fields and files, the canonical
// JSON and content key NewRow made of them when the corpus was
// written. A content key is what recognises a submission that has no id,
// in every sink, across runs and versions: the bytes must never change.
//
//	go test ./sink -run TestContentKeysGolden -update   # only to add inputs
const contentKeysFile = "testdata/contentkeys.golden"

// goldenAt is the created_at of every row in the corpus but those given
// their own.
var goldenAt = time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))

// goldenInput is one line of the corpus: what NewRow is given.
type goldenInput struct {
	fields, files string
	at            time.Time
}

// goldenInputs is the corpus: hand-picked documents (every escape, number
// shape, duplicate key, invalid UTF-8, nesting to MaxDepth) and documents
// from a fixed pseudo-random generator, as fields and as files.
func goldenInputs() []goldenInput {
	var docs []string
	docs = append(docs, canonicalCases...)
	docs = append(docs,
		``, ` null `, `{"k\u00e9":1,"b":{"z":1,"a":2},"a":[]}`, `{"é":1,"e":2,"\u00e9":3}`, `{"a":`,
		`{"n":[0,-0,1.0,1.50,-1.5e+300,1E-7,2e400,-2E-400,123456789012345678901234567890,-9223372036854775809,0.000001]}`,
		`{"id":9007199254740993,"x":-9007199254740993,"f":1e21,"g":1e-7}`,
		`{"emoji":"🎉 \ud83c\udf89","cjk":"日本語","rtl":"שלום","zwj":"👩‍💻","comb":"e\u0301"}`,
		`{"esc":"\"\\\/\b\f\n\r\t\u0000\u0001\u001F\u007f\u0080\u00ff\uFFFF\uFFFE"}`,
		`{"html":"<script>alert('x')</script> &amp; \u003c\u003e\u0026"}`,
		`{"sep":"\u2028\u2029`+"\u2028\u2029"+`"}`,
		`{"sur":"\ud800\udc00 \udbff\udfff \ud800 \udc00 \ud800\ud800 \ud800x"}`,
		"{\"bad\":\"\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 \x80\"}",
		"{\"\xff\":1,\"\\ufffd\":2,\"\ufffd\":3}",
		`{"b":1,"a":2,"b":3,"a":{"y":1,"x":2,"y":3}}`,
		`{"A":1,"a":2,"B":3,"_":4,"0":5,"~":6,"é":7,"Z":8}`,
		`{"a":{"b":{"c":{"d":{"e":[[[[{"f":null}]]]]}}}}}`,
		"\t\r\n {\t\"a\"\r:\n[ 1 ,\t2 ] }\n",
		`{"Name":"Zoë O'Brien","Email":"zoe@example.com","How did you hear about us?":"Twitter / X","rating":5}`,
		`{"files":{"cv":{"name":"a.pdf","url":"https://x/a.pdf?a=1&b=2"}}}`,
		`[{"b":1,"a":2},{"name":"x.pdf","size":12}]`,
		`{"cv":[{"n":"a"}],"photo":{"name":"p.png"}}`,
		`{"a":1}x`, `{"a":1,}`, `{"a":01}`, `{"a":"\x"}`, `{"a":"tab	inside"}`, `[1,2`, `"x"`, `3`, `true`,
	)
	deep := `{"a":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`
	docs = append(docs, deep, `{"a":`+strings.Repeat("[", MaxDepth)+strings.Repeat("]", MaxDepth)+`}`)
	g := goldenGen{rand.New(rand.NewPCG(1, 2))}
	for range 300 {
		docs = append(docs, g.object(0))
	}
	for range 60 {
		docs = append(docs, g.array(0))
	}

	var in []goldenInput
	for i, d := range docs {
		in = append(in, goldenInput{fields: d, files: `[]`, at: goldenAt})
		if i%3 == 0 {
			in = append(in, goldenInput{fields: `{"a":1}`, files: d, at: goldenAt})
		}
	}
	for i, us := range []int64{0, 1, 999, 1000, 1767225600123456, -1, -62135596800000000, 253402300799999999} {
		in = append(in, goldenInput{fields: docs[len(docs)-1-i], files: `{"cv":{"name":"a.pdf"}}`, at: time.UnixMicro(us)})
	}
	return in
}

// goldenGen writes JSON documents from a fixed seed: keys from a small set
// (so that they repeat and sort in every order), strings made of every
// kind of piece, numbers in every shape, and space anywhere.
type goldenGen struct{ r *rand.Rand }

var (
	goldenKeys = []string{"a", "b", "B", "email", "name", "é", `\u00e9`, "e", "", " ", `a\u0000`, "a\x00b", "k\xff",
		`\ud83d\ude00`, "😀", `\"q\"`, `\\`, "z", "Zoë", "message", "_id", "1", "10", "2"}
	goldenPieces = []string{"hello", " ", "Ünïcödé", "日本", "🎉", `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\ude00`,
		`\n`, `\t`, `\r`, `\b`, `\f`, `\/`, `\\`, `\"`, `\u0000`, `\u001f`, `\u007f`, `\u2028`, "\u2028", "\u2029",
		"\xff", "\xe2\x82", "\xc3", "<", ">", "&", "'", "\u007f", "\u0085", "\ufeff", "\ufffd", `\uD83D\uDE00`, `\uabcd`}
	goldenNumbers = []string{"0", "-0", "7", "-42", "3.14", "1.50", "0.000001", "1e3", "1E+3", "-2.5e-7", "1e400",
		"-1e-400", "123456789012345678901234567890", "9007199254740993", "-9223372036854775809", "0.1e1", "100"}
)

func (g goldenGen) space() string {
	if g.r.IntN(4) != 0 {
		return ""
	}
	return [...]string{" ", "\n", "\t", "\r\n  "}[g.r.IntN(4)]
}

func (g goldenGen) str() string {
	var b strings.Builder
	b.WriteByte('"')
	for range g.r.IntN(5) {
		b.WriteString(goldenPieces[g.r.IntN(len(goldenPieces))])
	}
	b.WriteByte('"')
	return b.String()
}

func (g goldenGen) value(depth int) string {
	n := 7
	if depth >= 4 {
		n = 5
	}
	switch g.r.IntN(n) {
	case 0, 1:
		return g.str()
	case 2:
		return goldenNumbers[g.r.IntN(len(goldenNumbers))]
	case 3:
		return [...]string{"true", "false", "null"}[g.r.IntN(3)]
	case 4:
		return g.str()
	case 5:
		return g.object(depth + 1)
	default:
		return g.array(depth + 1)
	}
}

func (g goldenGen) object(depth int) string {
	var b strings.Builder
	b.WriteString("{" + g.space())
	for i := range g.r.IntN(7) {
		if i > 0 {
			b.WriteString("," + g.space())
		}
		b.WriteString(`"` + goldenKeys[g.r.IntN(len(goldenKeys))] + `"` + g.space() + ":" + g.space() + g.value(depth) + g.space())
	}
	b.WriteString("}")
	return b.String()
}

func (g goldenGen) array(depth int) string {
	var b strings.Builder
	b.WriteString("[" + g.space())
	for i := range g.r.IntN(5) {
		if i > 0 {
			b.WriteString("," + g.space())
		}
		b.WriteString(g.value(depth) + g.space())
	}
	b.WriteString("]")
	return b.String()
}

// goldenLine is what NewRow made of in: canonical fields and files,
// content key and field names, or the error; AppendCanonical's output for
// the fields alone, or its error.
func goldenLine(in goldenInput) string {
	q := strconv.Quote
	cols := []string{q(in.fields), q(in.files), strconv.FormatInt(in.at.UnixMicro(), 10)}
	r, err := NewRow("f", nil, in.at, false, []byte(in.fields), []byte(in.files))
	var names []string
	if err == nil {
		var nerr error
		if names, nerr = storedNames(r.Fields); nerr != nil {
			panic(fmt.Sprintf("stored fields %q: %v", r.Fields, nerr))
		}
	}
	if err != nil {
		// Where an error points is not recorded, only which value it is in.
		which, _, _ := strings.Cut(err.Error(), ":")
		cols = append(cols, "error", q(which), strconv.FormatBool(errors.Is(err, ErrTooDeep)))
	} else {
		cols = append(cols, r.ContentKey, q(r.Fields), q(r.Files), q(strings.Join(names, "\x00")))
	}
	if c, err := AppendCanonical(nil, []byte(in.fields)); err != nil {
		cols = append(cols, "error")
	} else {
		cols = append(cols, q(string(c)))
	}
	return strings.Join(cols, "\t")
}

// TestContentKeysGolden holds content keys and canonical JSON to the bytes
// recorded in testdata, input for input.
func TestContentKeysGolden(t *testing.T) {
	inputs := goldenInputs()
	if *update {
		var b bytes.Buffer
		b.WriteString("# fields\tfiles\tcreated_at (µs)\tcontent key\tfields\tfiles\tnames\tAppendCanonical(fields)\n")
		for _, in := range inputs {
			b.WriteString(goldenLine(in) + "\n")
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(contentKeysFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(contentKeysFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n, keys := 0, 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		fields, err1 := strconv.Unquote(cols[0])
		files, err2 := strconv.Unquote(cols[1])
		us, err3 := strconv.ParseInt(cols[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("line %d: %v", n+2, err)
		}
		if got := goldenLine(goldenInput{fields, files, time.UnixMicro(us)}); got != line {
			t.Errorf("line %d differs:\n got  %s\n want %s", n+2, got, line)
		}
		if cols[3] != "error" {
			keys++
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < len(inputs) || keys < len(inputs)/2 {
		t.Fatalf("%d lines, %d content keys, for %d inputs", n, keys, len(inputs))
	}
	t.Logf("%d inputs, %d content keys", n, keys)
}
