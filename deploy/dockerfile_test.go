package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

const dockerfilePath = "../Dockerfile"

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int    // first line, 1-based
	cmd  string // upper case: FROM, RUN, ...
	args string
}

func (in instruction) String() string { return fmt.Sprintf("line %d: %s %s", in.line, in.cmd, in.args) }

// stage is one FROM and the instructions under it.
type stage struct {
	image, name string
	from        instruction
	body        []instruction
}

// parseDockerfile splits a Dockerfile into its stages. It knows the syntax
// this repository uses: comments, `\` continuations (with comment lines inside
// them dropped, as Docker does), FROM image [AS name], and global ARGs
// substituted into FROM.
func parseDockerfile(text string) (global []instruction, stages []stage, err error) {
	var instrs []instruction
	var cur []string
	start := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimSpace(line)
		// Comments and blank lines, also inside a continuation, are dropped.
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur == nil {
			start = i + 1
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur = append(cur, body)
			continue
		}
		cur = append(cur, line)
		joined := strings.TrimSpace(strings.Join(cur, " "))
		cur = nil
		cmd, args, _ := strings.Cut(joined, " ")
		instrs = append(instrs, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
	}
	if cur != nil {
		return nil, nil, fmt.Errorf("line %d: continuation at the end of the file", start)
	}
	globalArgs := map[string]string{}
	for _, in := range instrs {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--platform=") })
			if len(f) != 1 && (len(f) != 3 || !strings.EqualFold(f[1], "AS")) {
				return nil, nil, fmt.Errorf("%v: want FROM image [AS name]", in)
			}
			image, err := expand(f[0], globalArgs)
			if err != nil {
				return nil, nil, fmt.Errorf("%v: %w", in, err)
			}
			s := stage{image: image, from: in}
			if len(f) == 3 {
				s.name = f[2]
			}
			stages = append(stages, s)
		case len(stages) == 0:
			if in.cmd != "ARG" {
				return nil, nil, fmt.Errorf("%v: only ARG may come before the first FROM", in)
			}
			name, def, _ := strings.Cut(in.args, "=")
			globalArgs[name] = def
			global = append(global, in)
		default:
			s := &stages[len(stages)-1]
			s.body = append(s.body, in)
		}
	}
	if len(stages) == 0 {
		return nil, nil, errors.New("no FROM")
	}
	return global, stages, nil
}

func readDockerfile(t *testing.T) []stage {
	t.Helper()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	_, stages, err := parseDockerfile(string(data))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return stages
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expand substitutes $NAME and ${NAME}; an unknown name is an error rather
// than the empty string, so a test never builds with a silently empty value.
func expand(s string, vars map[string]string) (string, error) {
	if strings.Contains(s, "${") && !varRE.MatchString(s) {
		return "", fmt.Errorf("%q: only ${NAME} substitutions are understood", s)
	}
	var missing []string
	out := varRE.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if missing != nil {
		return "", fmt.Errorf("%q: %s not declared (ARG or ENV)", s, strings.Join(missing, ", "))
	}
	return out, nil
}

// shellWords splits a shell-form command line into words the way /bin/sh
// would for a simple command: quotes, backslashes and variable expansion.
// Anything that needs a real shell (;, &&, |, redirections, $(...)) is an
// error: the build line must stay one plain command to be run here.
func shellWords(s string, vars map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	flushVar := func(text string) error {
		v, err := expand(text, vars)
		w.WriteString(v)
		return err
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			inWord = true
			var seg strings.Builder
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
					if s[i] == '$' {
						seg.WriteString("$$") // a literal $; see below
						continue
					}
				} else if s[i] == '`' || (s[i] == '$' && i+1 < len(s) && s[i+1] == '(') {
					return nil, fmt.Errorf("command substitution in %q", s)
				}
				seg.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			parts := strings.Split(seg.String(), "$$")
			for k, p := range parts {
				if k > 0 {
					w.WriteByte('$')
				}
				if err := flushVar(p); err != nil {
					return nil, err
				}
			}
		case c == '\\':
			if i+1 < len(s) {
				i++
				w.WriteByte(s[i])
				inWord = true
			}
		case strings.IndexByte(";&|<>()`", c) >= 0:
			return nil, fmt.Errorf("%q needs a shell (%c): keep the go build RUN one plain command", s, c)
		case c == '$':
			if i+1 < len(s) && s[i+1] == '(' {
				return nil, fmt.Errorf("command substitution in %q", s)
			}
			m := varRE.FindString(s[i:])
			if m == "" || !strings.HasPrefix(s[i:], m) {
				return nil, fmt.Errorf("%q: cannot expand at %q", s, s[i:])
			}
			if err := flushVar(m); err != nil {
				return nil, err
			}
			i += len(m) - 1
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// goBuild is the build stage's `go build` RUN, resolved.
type goBuild struct {
	env    []string // NAME=value: the stage's ENV, then the command's own
	args   []string // after "go"
	output string   // the -o value
	at     instruction
}

// findGoBuild resolves the build RUN of the stage that holds it, with build
// args overriding the ARG defaults as `docker build --build-arg` does.
func findGoBuild(stages []stage, buildArgs map[string]string) (goBuild, stage, error) {
	var found []goBuild
	var in stage
	for _, s := range stages {
		vars := map[string]string{}
		var env []string
		for _, ins := range s.body {
			switch ins.cmd {
			case "ARG":
				name, def, _ := strings.Cut(ins.args, "=")
				if v, ok := buildArgs[name]; ok {
					def = v
				}
				vars[name] = strings.Trim(def, `"`)
			case "ENV":
				words, err := shellWords(ins.args, vars)
				if err != nil {
					return goBuild{}, s, fmt.Errorf("%v: %w", ins, err)
				}
				if len(words) == 2 && !strings.Contains(words[0], "=") { // ENV NAME value
					words = []string{words[0] + "=" + words[1]}
				}
				for _, kv := range words {
					name, v, _ := strings.Cut(kv, "=")
					vars[name] = v
					env = append(env, kv)
				}
			case "RUN":
				if !strings.Contains(ins.args, "go build") {
					continue
				}
				words, err := shellWords(ins.args, vars)
				if err != nil {
					return goBuild{}, s, fmt.Errorf("%v: %w", ins, err)
				}
				b := goBuild{env: slices.Clone(env), at: ins}
				for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
					b.env = append(b.env, words[0])
					words = words[1:]
				}
				if len(words) < 2 || words[0] != "go" || words[1] != "build" {
					return goBuild{}, s, fmt.Errorf("%v: want [NAME=value ...] go build ...", ins)
				}
				b.args = words[1:]
				for i, a := range b.args {
					if a == "-o" && i+1 < len(b.args) {
						b.output = b.args[i+1]
					} else if v, ok := strings.CutPrefix(a, "-o="); ok {
						b.output = v
					}
				}
				if b.output == "" {
					return goBuild{}, s, fmt.Errorf("%v: go build has no -o", ins)
				}
				found = append(found, b)
				in = s
			}
		}
	}
	if len(found) != 1 {
		return goBuild{}, in, fmt.Errorf("want exactly one RUN with go build, found %d", len(found))
	}
	return found[0], in, nil
}

// withOutput returns the build arguments writing to out instead of -o's path.
func (b goBuild) withOutput(out string) []string {
	args := slices.Clone(b.args)
	for i, a := range args {
		if a == "-o" {
			args[i+1] = out
		} else if strings.HasPrefix(a, "-o=") {
			args[i] = "-o=" + out
		}
	}
	return args
}

// execForm decodes an exec-form (JSON array) argument; ok is false for shell
// form.
func execForm(args string) ([]string, bool) {
	var v []string
	if err := json.Unmarshal([]byte(args), &v); err != nil || len(v) == 0 {
		return nil, false
	}
	return v, true
}

func lastOf(body []instruction, cmd string) []instruction {
	var out []instruction
	for _, in := range body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// TestDockerfile checks the image's shape from the text; it needs no Docker.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := readDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stage(s): want a build stage and a runtime stage", len(stages))
	}
	b, buildStage, err := findGoBuild(stages, nil)
	if err != nil {
		t.Fatal(err)
	}
	final := stages[len(stages)-1]
	if buildStage.from == final.from {
		t.Fatal("the binary is built in the runtime stage")
	}

	// The toolchain image is the Go release go.mod names.
	if !strings.HasPrefix(buildStage.image, "golang:") {
		t.Errorf("build stage FROM %s: want an official golang image", buildStage.image)
	}
	goVersion := goModVersion(t)
	if tag := strings.TrimPrefix(buildStage.image, "golang:"); tag != goVersion && !strings.HasPrefix(tag, goVersion+"-") && !strings.HasPrefix(tag, goVersion+".") {
		t.Errorf("build stage FROM %s: want Go %s, as go.mod says", buildStage.image, goVersion)
	}
	// Modules are a layer of their own: go.mod and go.sum are copied and
	// downloaded before the sources.
	var copyMod, download, copyAll, arg = -1, -1, -1, -1
	for i, in := range buildStage.body {
		switch {
		case in.cmd == "COPY" && strings.Contains(in.args, "go.mod") && strings.Contains(in.args, "go.sum"):
			copyMod = i
		case in.cmd == "RUN" && strings.Contains(in.args, "go mod download"):
			download = i
		case in.cmd == "COPY" && strings.HasPrefix(in.args, ". "):
			copyAll = i
		case in.cmd == "ARG" && strings.HasPrefix(in.args, "VERSION"):
			arg = i
		}
	}
	if copyMod < 0 || download < copyMod || copyAll < download {
		t.Error("build stage: want COPY go.mod go.sum, then RUN go mod download, then COPY . . (a cached module layer)")
	}
	if arg < 0 || arg < copyAll {
		t.Error("build stage: want ARG VERSION after COPY . . (a new version must not invalidate the module layer)")
	}
	if !slices.Contains(b.env, "CGO_ENABLED=0") {
		t.Errorf("%v: want CGO_ENABLED=0 (a static binary for distroless/static)", b.at)
	}
	for _, want := range []string{"-trimpath", "./cmd/formsync"} {
		if !slices.Contains(b.args, want) {
			t.Errorf("%v: want %s", b.at, want)
		}
	}
	if !strings.Contains(b.at.args, "formsapi.Version=${VERSION}") {
		t.Errorf("%v: want -X github.com/formsync/formsync/worker/formsapi.Version=${VERSION}", b.at)
	}

	// Runtime: distroless static, nonroot, no shell.
	switch {
	case strings.HasPrefix(final.image, "gcr.io/distroless/static") && strings.HasSuffix(final.image, ":nonroot"):
	case final.image == "scratch":
		if !slices.ContainsFunc(lastOf(final.body, "COPY"), func(in instruction) bool { return strings.Contains(in.args, "ca-certificates") }) {
			t.Error("FROM scratch without CA certificates: HTTPS to the API and BigQuery would fail")
		}
	default:
		t.Errorf("runtime FROM %s: want gcr.io/distroless/static-debian12:nonroot (or scratch with CA certificates)", final.image)
	}
	if runs := lastOf(final.body, "RUN"); len(runs) > 0 {
		t.Errorf("%v: the runtime image has no shell", runs[0])
	}
	users := lastOf(final.body, "USER")
	if len(users) == 0 {
		t.Error("runtime stage: no USER; the image would run as root")
	} else if u := users[len(users)-1].args; !strings.HasPrefix(u, "nonroot") && !strings.HasPrefix(u, "65532") {
		t.Errorf("%v: want USER nonroot:nonroot (65532, the runAsUser of the manifests)", users[len(users)-1])
	}
	entry := lastOf(final.body, "ENTRYPOINT")
	if len(entry) != 1 {
		t.Fatalf("runtime stage: %d ENTRYPOINTs, want 1", len(entry))
	}
	ep, ok := execForm(entry[0].args)
	if !ok {
		t.Fatalf("%v: want exec form [\"/formsync\"]: the shell form needs a shell and swallows SIGTERM", entry[0])
	}
	cmds := lastOf(final.body, "CMD")
	if len(cmds) != 1 {
		t.Fatalf("runtime stage: %d CMDs, want 1", len(cmds))
	}
	if c, ok := execForm(cmds[0].args); !ok || !slices.Equal(c, []string{"sync"}) {
		t.Errorf("%v: want CMD [\"sync\"]", cmds[0])
	}

	// The ENTRYPOINT is the binary the build stage wrote.
	copied := false
	for _, in := range lastOf(final.body, "COPY") {
		f := strings.Fields(in.args)
		if len(f) == 3 && (f[0] == "--from="+buildStage.name || f[0] == "--from=0") && f[1] == b.output {
			dst := f[2]
			if strings.HasSuffix(dst, "/") {
				dst += path.Base(b.output)
			}
			copied = dst == ep[0] || (!strings.Contains(ep[0], "/") && path.Base(dst) == ep[0])
		}
	}
	if !copied {
		t.Errorf("ENTRYPOINT %q is not the binary copied from %s (built at %s)", ep, buildStage.name, b.output)
	}

	// What the manifests rely on: the port of FORMSYNC_HTTP_ADDR, and /tmp
	// as the staging directory.
	_, port, err := net.SplitHostPort(defaultOf(t, "FORMSYNC_HTTP_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lastOf(final.body, "EXPOSE"), func(in instruction) bool { return slices.Contains(strings.Fields(in.args), port) }) {
		t.Errorf("runtime stage: want EXPOSE %s (FORMSYNC_HTTP_ADDR's default)", port)
	}
	if !slices.ContainsFunc(lastOf(final.body, "ENV"), func(in instruction) bool { return in.args == "FORMSYNC_TMP_DIR=/tmp" }) {
		t.Error("runtime stage: want ENV FORMSYNC_TMP_DIR=/tmp (the manifests mount an emptyDir there)")
	}
}

// goModVersion is the major.minor of go.mod's go directive.
func goModVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestParseDockerfile(t *testing.T) {
	t.Parallel()
	const text = "# syntax=docker/dockerfile:1\nARG GO=1.26\nFROM golang:${GO} AS build\n" +
		"ARG VERSION=dev\nENV GOFLAGS=-mod=readonly\nRUN CGO_ENABLED=0 go build \\\n" +
		"    # a comment inside a continuation is dropped\n" +
		"    -ldflags \"-s -w -X 'main.v=${VERSION}'\" \\\n    -o /out/app ./cmd/app\n" +
		"FROM scratch\nCOPY --from=build /out/app /app\nENTRYPOINT [\"/app\"]\n"
	_, stages, err := parseDockerfile(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) != 2 || stages[0].image != "golang:1.26" || stages[0].name != "build" || stages[1].image != "scratch" {
		t.Fatalf("stages %+v", stages)
	}
	b, _, err := findGoBuild(stages, map[string]string{"VERSION": "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"build", "-ldflags", "-s -w -X 'main.v=v1.2.3'", "-o", "/out/app", "./cmd/app"}
	if !slices.Equal(b.args, wantArgs) || b.output != "/out/app" || !slices.Equal(b.env, []string{"GOFLAGS=-mod=readonly", "CGO_ENABLED=0"}) {
		t.Errorf("go build: env %q args %q output %q; want args %q", b.env, b.args, b.output, wantArgs)
	}
	for _, bad := range []string{"go build ./x && rm -rf /", "go build -o $(pwd)/x .", "go build -ldflags \"-X v=${UNDECLARED}\" .", "go build . | tee log"} {
		if _, err := shellWords(bad, map[string]string{}); err == nil {
			t.Errorf("shellWords(%q): no error", bad)
		}
	}
}

// TestDockerfileBuild runs the Dockerfile's own go build line on this
// machine (there is no Docker engine in CI) and checks what the image
// depends on: a static binary (distroless/static has no libc), the stamped
// version, and the commands the manifests run.
func TestDockerfileBuild(t *testing.T) {
	t.Parallel()
	// The image's flags (-trimpath, static, linux) share no compiled
	// package with the tests: from an empty build cache this compiles
	// every dependency once more, minutes on a small machine.
	slow(t, "compiles formsync and its dependencies with the image's flags")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	const version = "v0.0.0-deploytest.1"
	b, _, err := findGoBuild(readDockerfile(t), map[string]string{"VERSION": version})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "formsync")
	// The image's flags (CGO_ENABLED=0, -trimpath) share no compiled
	// package with the tests' build: every dependency is compiled again,
	// which takes minutes on two cores busy with other packages' tests.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, b.withOutput(bin)...)
	build.Dir = ".." // the build context is the repository root
	// The image is linux; its build context has no .git (.dockerignore), so
	// no VCS stamp.
	build.Env = append(os.Environ(), "GOOS=linux", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false"))
	build.Env = append(build.Env, b.env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(b.args, " "), err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the binary is not ELF: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %s program header: it is dynamically linked and cannot run on distroless/static", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q", libs)
	}
	if f.Section(".symtab") != nil {
		t.Error("the binary has a symbol table: -ldflags -s did not apply")
	}

	if runtime.GOOS != "linux" {
		t.Skip("built a linux binary; running it needs linux")
	}
	// The binary's view, as in the image: no FORMSYNC_* configuration.
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		var o, e bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"FORMSYNC_TMP_DIR=" + t.TempDir()}
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatalf("formsync %s: %v", strings.Join(args, " "), err)
		}
		return o.String(), e.String(), code
	}

	out, errOut, code := run("version")
	if code != 0 || strings.TrimSpace(out) != "formsync "+version {
		t.Errorf("formsync version: exit %d, stdout %q (stderr %q); want exit 0 and %q", code, out, errOut, "formsync "+version)
	}
	out, errOut, code = run("help")
	if code != 0 {
		t.Errorf("formsync help: exit %d, stderr %q", code, errOut)
	}
	for _, c := range manifestCommands(t) {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(c) + `\s`).MatchString(out) {
			t.Errorf("formsync help does not list %q, which the manifests run", c)
		}
	}
	// The backfill flags the manifests' comments document.
	_, errOut, code = run("backfill", "-h")
	for _, flag := range []string{"-form", "-since", "-until", "-dry-run"} {
		if code != 0 || !strings.Contains(errOut, flag) {
			t.Errorf("formsync backfill -h: exit %d, want 0 and flag %s in:\n%s", code, flag, errOut)
		}
	}
	// The Jobs' podFailurePolicy does not retry exit 2, a configuration
	// error, which is what sync without configuration is.
	if _, errOut, code = run("sync"); code != 2 {
		t.Errorf("formsync sync without configuration: exit %d, want 2 (podFailurePolicy FailJob); stderr:\n%s", code, errOut)
	}
}

// manifestCommands lists the subcommands the manifests run (args[0] of every
// container), read from the files so that no kubectl is needed.
func manifestCommands(t *testing.T) []string {
	t.Helper()
	var cmds []string
	for _, f := range yamlFiles(t) {
		if path.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := decodeStream(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, pt := range podTemplates(ms) {
			for _, c := range pt.tmpl.Spec.Containers {
				if len(c.Args) > 0 && !slices.Contains(cmds, c.Args[0]) {
					cmds = append(cmds, c.Args[0])
				}
			}
		}
	}
	if len(cmds) < 3 {
		t.Fatalf("found commands %q in the manifests, want at least sync, run and backfill", cmds)
	}
	slices.Sort(cmds)
	return cmds
}

// dockerignore is the build context filter: Docker's rules for the patterns
// this repository uses (*, ?, **, a leading /, ! exceptions; a pattern that
// matches a directory excludes what is under it).
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func parseDockerignore(text string) dockerignore {
	var d dockerignore
	for _, line := range strings.Split(text, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		negate := strings.HasPrefix(p, "!")
		p = strings.Trim(strings.TrimPrefix(p, "!"), "/")
		var re strings.Builder
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		d = append(d, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile("^" + re.String() + "$"), negate})
	}
	return d
}

// ignores reports whether the slash-separated path, relative to the context
// root, is left out of the build context.
func (d dockerignore) ignores(p string) bool {
	ignored := false
	for _, pat := range d {
		for prefix := p; prefix != "."; prefix = path.Dir(prefix) {
			if pat.re.MatchString(prefix) {
				ignored = !pat.negate
				break
			}
		}
	}
	return ignored
}

// TestDockerignore keeps every input of `go build ./cmd/formsync` in the
// build context and the repository's history and local databases out of it.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	d := parseDockerignore(string(data))
	for _, p := range []string{".git/config", "formsync-demo.db", "formsync-demo.db-wal", "sink/sqlite/x.db", "worker/testdata/page.json", "testkit/bqfake/server.go"} {
		if !d.ignores(p) {
			t.Errorf(".dockerignore keeps %s in the build context", p)
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH: cannot list the build's inputs")
	}
	list := exec.CommandContext(t.Context(), goTool, "list", "-deps",
		"-f", `{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`,
		"./cmd/formsync")
	list.Dir = ".."
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, filepath.ToSlash(rel))
	}
	if len(inputs) < 10 {
		t.Fatalf("go list found only %q", inputs)
	}
	for _, p := range inputs {
		if d.ignores(p) {
			t.Errorf(".dockerignore leaves out %s, which go build ./cmd/formsync needs", p)
		}
	}
}

func TestDockerignoreRules(t *testing.T) {
	t.Parallel()
	d := parseDockerignore("# comment\n.git\n**/*.db\n/bin/\ndocs/*.md\n!docs/keep.md\n")
	for p, want := range map[string]bool{
		".git": true, ".git/objects/ab": true, "a.db": true, "x/y/a.db": true, "a.dbx": false,
		"bin/formsync": true, "cmd/bin/x": false, "docs/a.md": true, "docs/keep.md": false, "docs/sub/a.md": false,
		"cmd/formsync/main.go": false,
	} {
		if got := d.ignores(p); got != want {
			t.Errorf("ignores(%q) = %v, want %v", p, got, want)
		}
	}
}
