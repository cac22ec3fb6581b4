package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kustomizations are the directories a user applies. TestKustomizationsListed
// keeps the list in step with the tree, so a new overlay is tested too.
var kustomizations = []string{"backfill", "base", "overlays/accounts", "overlays/scheduler", "overlays/sharded", "overlays/webhook", "status"}

// imageComponent is the kustomize Component that sets the image, the one
// place a user changes it.
const imageComponent = "image"

const (
	appName        = "formsync"
	nameLabel      = "app.kubernetes.io/name"
	configMapName  = "formsync-config"
	tokenSecret    = "formsync-api-token"
	secretTemplate = "base/secret.example.yaml"
	nonrootUID     = 65532
	// shutdownMargin is the least time between the end of
	// FORMSYNC_SHUTDOWN_TIMEOUT and the SIGKILL at the end of the grace period.
	shutdownMargin = 5 * time.Second
	// pushTimeout is how long a one-shot command (anything but run) gives
	// its metrics push to a Pushgateway, after the commit that
	// FORMSYNC_SHUTDOWN_TIMEOUT bounds (pushMetrics in
	// cmd/formsync/internal/cli).
	pushTimeout = 10 * time.Second
)

var envNameRE = regexp.MustCompile(`\bFORMSYNC_[A-Z0-9_]+`)

// errUnknownKind is returned for a document whose kind the tests do not know:
// a new kind needs its checks written before it ships.
var errUnknownKind = errors.New("unknown kind")

// manifest is one decoded YAML document.
type manifest struct {
	Kind, Name string
	Object     any // *batchv1.CronJob, *corev1.ConfigMap, ...
}

func (m manifest) String() string { return m.Kind + "/" + m.Name }

// decodeManifest decodes one document strictly into the k8s.io/api type of
// its kind: an unknown, misspelt or miscased field is an error, as is an
// unknown kind.
func decodeManifest(doc []byte) (manifest, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return manifest{}, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	var obj any
	switch head.APIVersion + ", " + head.Kind {
	case "batch/v1, CronJob":
		obj = new(batchv1.CronJob)
	case "batch/v1, Job":
		obj = new(batchv1.Job)
	case "apps/v1, Deployment":
		obj = new(appsv1.Deployment)
	case "v1, ServiceAccount":
		obj = new(corev1.ServiceAccount)
	case "v1, Secret":
		obj = new(corev1.Secret)
	case "v1, ConfigMap":
		obj = new(corev1.ConfigMap)
	case "v1, Service":
		obj = new(corev1.Service)
	case "networking.k8s.io/v1, Ingress":
		obj = new(networkingv1.Ingress)
	default:
		return manifest{}, fmt.Errorf("%w: apiVersion %q kind %q", errUnknownKind, head.APIVersion, head.Kind)
	}
	// The API server's decoder: case-sensitive (encoding/json would take
	// readOnlyRootFileSystem for readOnlyRootFilesystem; the server drops it)
	// and strict about unknown and duplicate fields.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return manifest{}, fmt.Errorf("reading %s %q: %w", head.Kind, head.Metadata.Name, err)
	}
	strict, err := kjson.UnmarshalStrict(js, obj)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return manifest{}, fmt.Errorf("decoding %s %q strictly: %w", head.Kind, head.Metadata.Name, err)
	}
	return manifest{Kind: head.Kind, Name: head.Metadata.Name, Object: obj}, nil
}

// splitDocuments splits a multi-document YAML stream on its "---" lines and
// drops documents that hold only comments or blanks.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur []string
	flush := func() {
		for _, l := range cur {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, []byte(strings.Join(cur, "\n")))
				break
			}
		}
		cur = nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		if t := strings.TrimRight(line, " \t\r"); t == "---" || strings.HasPrefix(t, "--- ") {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return docs
}

func decodeStream(data []byte) ([]manifest, error) {
	var out []manifest
	for i, doc := range splitDocuments(data) {
		m, err := decodeManifest(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// render is `kubectl kustomize dir`, decoded; each directory is rendered once
// per test binary.
var renderCache struct {
	sync.Mutex
	out map[string]rendered
}

type rendered struct {
	text      []byte
	manifests []manifest
	err       error
}

func render(t *testing.T, dir string) ([]byte, []manifest) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not found: skipping kustomize rendering")
	}
	renderCache.Lock()
	defer renderCache.Unlock()
	r, ok := renderCache.out[dir]
	if !ok {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(t.Context(), kubectl, "kustomize", dir)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			r.err = fmt.Errorf("kubectl kustomize %s: %w\n%s", dir, err, stderr.Bytes())
		} else {
			r.text = stdout.Bytes()
			r.manifests, r.err = decodeStream(r.text)
			if r.err != nil {
				r.err = fmt.Errorf("rendered %s: %w", dir, r.err)
			}
		}
		if renderCache.out == nil {
			renderCache.out = map[string]rendered{}
		}
		renderCache.out[dir] = r
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.text, r.manifests
}

// find returns the manifests of one kind, typed.
func find[T any](ms []manifest) []*T {
	var out []*T
	for _, m := range ms {
		if o, ok := m.Object.(*T); ok {
			out = append(out, o)
		}
	}
	return out
}

// podTemplate is a pod spec found in a workload.
type podTemplate struct {
	owner   string
	tmpl    *corev1.PodTemplateSpec
	indexes int // completions of an Indexed Job, else 0
}

func podTemplates(ms []manifest) []podTemplate {
	var out []podTemplate
	job := func(owner string, js *batchv1.JobSpec) podTemplate {
		pt := podTemplate{owner: owner, tmpl: &js.Template}
		if js.CompletionMode != nil && *js.CompletionMode == batchv1.IndexedCompletion && js.Completions != nil {
			pt.indexes = int(*js.Completions)
		}
		return pt
	}
	for _, m := range ms {
		switch o := m.Object.(type) {
		case *batchv1.CronJob:
			out = append(out, job(m.String(), &o.Spec.JobTemplate.Spec))
		case *batchv1.Job:
			out = append(out, job(m.String(), &o.Spec))
		case *appsv1.Deployment:
			out = append(out, podTemplate{owner: m.String(), tmpl: &o.Spec.Template})
		}
	}
	return out
}

// cluster is what a directory's pods find in the namespace: the objects of
// the directory itself plus those of base, which every other directory
// assumes is applied (backfill renders only its Job).
func cluster(t *testing.T, dir string) []manifest {
	_, own := render(t, dir)
	if dir == "base" {
		return own
	}
	_, base := render(t, "base")
	return append(slices.Clip(own), base...)
}

// containerEnv is the environment a container sees: its envFrom ConfigMaps,
// then its env on top. Values from valueFrom are not known here and read "".
func containerEnv(t *testing.T, owner string, c corev1.Container, objs []manifest) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.SecretRef != nil {
			t.Errorf("%s container %s: envFrom a Secret puts the token in the environment; mount it as a file", owner, c.Name)
		}
		if from.ConfigMapRef == nil {
			continue
		}
		cm := configMap(objs, from.ConfigMapRef.Name)
		if cm == nil {
			t.Errorf("%s container %s: envFrom ConfigMap %q is not defined (in this directory or base)", owner, c.Name, from.ConfigMapRef.Name)
			continue
		}
		for k, v := range cm.Data {
			env[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func configMap(objs []manifest, name string) *corev1.ConfigMap {
	for _, cm := range find[corev1.ConfigMap](objs) {
		if cm.Name == name {
			return cm
		}
	}
	return nil
}

// binaryEnv is what `formsync env` prints in an environment without
// FORMSYNC_* variables: every variable the binary reads, with its default.
// The manifests are checked against the binary itself, not a copy of its
// configuration.
var binaryEnv = sync.OnceValues(func() (map[string]string, error) {
	out, err := formsyncCmd(nil, "env")
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("formsync env printed %q, not NAME=value", line)
		}
		vars[name] = value
	}
	return vars, nil
})

// formsyncBinary is formsync built once for the tests of this package.
var formsyncBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "formsync-deploy-test-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "formsync")
	// With the test binary's race flag: the packages compiled for the
	// tests are reused instead of compiled again.
	args := append(append([]string{"build"}, raceFlags...), "-o", bin, "../cmd/formsync")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building formsync: %w: %s", err, out)
	}
	return bin, nil
})

var binDir string // removed by TestMain

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// formsyncCmd runs the formsync binary with args in an environment holding
// no FORMSYNC_* variable but those of env, and returns its standard output.
func formsyncCmd(env map[string]string, args ...string) ([]byte, error) {
	bin, err := formsyncBinary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FORMSYNC_") && !strings.HasPrefix(kv, "JOB_COMPLETION_INDEX=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("formsync %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return out, fmt.Errorf("formsync %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// defaultOf is the binary's default for the variable name.
func defaultOf(t *testing.T, name string) string {
	t.Helper()
	vars, err := binaryEnv()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := vars[name]
	if !ok {
		t.Fatalf("formsync does not read %s", name)
	}
	return v
}

// effective is a variable's value in env, else the binary's default.
func effective(t *testing.T, env map[string]string, name string) string {
	t.Helper()
	if v, ok := env[name]; ok {
		return v
	}
	return defaultOf(t, name)
}

// knownEnvNames is every variable the binary reads, as a set.
func knownEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	vars, err := binaryEnv()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for n := range vars {
		known[n] = true
	}
	return known
}

// yamlFiles lists the YAML files under the deploy directory.
func yamlFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestKustomizationsListed(t *testing.T) {
	t.Parallel()
	var dirs, components []string
	for _, f := range yamlFiles(t) {
		if path.Base(f) != "kustomization.yaml" && path.Base(f) != "kustomization.yml" {
			continue
		}
		k := readKustomization(t, f)
		if k.Kind == "Component" {
			components = append(components, path.Dir(f))
			continue
		}
		dirs = append(dirs, path.Dir(f))
		// The image is set in the component alone: an images entry here
		// would be a second place to change, and one forgotten runs an
		// image that was never pushed.
		if len(k.Images) > 0 {
			t.Errorf("%s sets images: set the image in %s/kustomization.yaml only", f, imageComponent)
		}
	}
	slices.Sort(dirs)
	if !slices.Equal(dirs, kustomizations) {
		t.Errorf("kustomization directories are %q, the tests cover %q: update kustomizations", dirs, kustomizations)
	}
	if !slices.Equal(components, []string{imageComponent}) {
		t.Errorf("kustomize components are %q, want only %q", components, imageComponent)
	}
}

// kustomization is what the tests read of a kustomization.yaml.
type kustomization struct {
	Kind       string           `json:"kind"`
	Resources  []string         `json:"resources"`
	Components []string         `json:"components"`
	Images     []map[string]any `json:"images"`
}

func readKustomization(t *testing.T, file string) kustomization {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return k
}

// TestManifestFilesDecodeStrictly needs no kubectl: every resource and patch
// file decodes strictly into its type, so a misspelt field fails here too.
func TestManifestFilesDecodeStrictly(t *testing.T) {
	t.Parallel()
	for _, f := range yamlFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if path.Base(f) == "kustomization.yaml" {
			var k map[string]any
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			continue
		}
		if _, err := decodeStream(data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// resourceFiles reads the resource files a kustomization lists (not its
// patches), decoded.
func resourceFiles(t *testing.T, dir string) []manifest {
	t.Helper()
	k := readKustomization(t, path.Join(dir, "kustomization.yaml"))
	var out []manifest
	for _, r := range k.Resources {
		p := path.Join(dir, r)
		if fi, err := os.Stat(p); err != nil {
			t.Fatal(err)
		} else if fi.IsDir() {
			continue // another kustomization, checked on its own
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := decodeStream(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, ms...)
	}
	return out
}

// TestManifestFilesPods runs the pod checks on the workload files as
// written, so that they hold without kubectl too (the overlays' patches are
// covered only by rendering).
func TestManifestFilesPods(t *testing.T) {
	t.Parallel()
	base := resourceFiles(t, "base")
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			own := base
			if dir != "base" {
				own = resourceFiles(t, dir)
			}
			objs := append(slices.Clip(own), base...)
			for _, pt := range podTemplates(own) {
				checkPod(t, pt, objs)
			}
		})
	}
}

// TestEnvNamesKnown needs no kubectl: every FORMSYNC_* name written anywhere
// in the manifests (values, ConfigMap keys, comments) or the Dockerfile is a
// variable formsync reads (formsync env), so renaming one fails here.
func TestEnvNamesKnown(t *testing.T) {
	t.Parallel()
	known := knownEnvNames(t)
	files := append(yamlFiles(t), filepath.Join("..", "Dockerfile"))
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, name := range envNameRE.FindAllString(line, -1) {
				seen++
				if !known[name] {
					t.Errorf("%s:%d: %s is not a formsync variable (formsync env)", f, i+1, name)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no FORMSYNC_ names found in deploy/ or the Dockerfile: is the test reading the right files?")
	}
}

// TestSecretTemplate checks the Secret the pods mount has the shape they
// expect, without kubectl.
func TestSecretTemplate(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(secretTemplate)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := decodeStream(data)
	if err != nil {
		t.Fatalf("%s: %v", secretTemplate, err)
	}
	secrets := find[corev1.Secret](ms)
	if len(ms) != 1 || len(secrets) != 1 {
		t.Fatalf("%s: want one Secret, got %v", secretTemplate, ms)
	}
	s := secrets[0]
	if s.Name != tokenSecret {
		t.Errorf("%s: name %q, want %q", secretTemplate, s.Name, tokenSecret)
	}
	if _, ok := s.StringData["token"]; !ok {
		t.Errorf("%s: no key \"token\"", secretTemplate)
	}
	if !strings.Contains(s.StringData["token"], "REPLACE") {
		t.Errorf("%s: the token must stay a placeholder", secretTemplate)
	}
}

func TestRenderedManifests(t *testing.T) {
	t.Parallel()
	images := map[string][]string{} // image -> where
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			text, ms := render(t, dir)
			if len(ms) == 0 {
				t.Fatal("renders nothing")
			}
			checkEnvNamesIn(t, text, ms)
			objs := cluster(t, dir)
			for _, m := range ms {
				if got := objectLabels(m)[nameLabel]; got != appName {
					t.Errorf("%s: label %s=%q, want %q", m, nameLabel, got, appName)
				}
				if s, ok := m.Object.(*corev1.Secret); ok {
					t.Errorf("%s: Secrets are created with kubectl, not rendered (applying would overwrite the token)", s.Name)
				}
			}
			pts := podTemplates(ms)
			if len(pts) == 0 {
				t.Fatal("no workload rendered")
			}
			for _, pt := range pts {
				if pt.tmpl.Labels[nameLabel] != appName {
					t.Errorf("%s: pod label %s=%q, want %q", pt.owner, nameLabel, pt.tmpl.Labels[nameLabel], appName)
				}
				checkPod(t, pt, objs)
				for _, c := range pt.tmpl.Spec.Containers {
					images[c.Image] = append(images[c.Image], dir+" "+pt.owner)
				}
			}
		})
	}
	if len(images) > 1 {
		t.Errorf("the directories run different images, change them together: %v", images)
	}
}

// checkEnvNamesIn cross-checks the rendered output against formsync env: the
// whole text, and in particular every ConfigMap key (each becomes a variable
// through envFrom).
func checkEnvNamesIn(t *testing.T, text []byte, ms []manifest) {
	t.Helper()
	known := knownEnvNames(t)
	for _, name := range envNameRE.FindAllString(string(text), -1) {
		if !known[name] {
			t.Errorf("rendered manifests use %s, which formsync does not read (formsync env)", name)
		}
	}
	for _, cm := range find[corev1.ConfigMap](ms) {
		for k := range cm.Data {
			if !known[k] {
				t.Errorf("ConfigMap %s key %s is not a formsync variable (formsync env)", cm.Name, k)
			}
		}
	}
}

func objectLabels(m manifest) map[string]string {
	v := reflect.ValueOf(m.Object).Elem().FieldByName("ObjectMeta").FieldByName("Labels")
	return v.Interface().(map[string]string)
}

// checkPod asserts what every formsync pod needs, whatever runs it.
func checkPod(t *testing.T, pt podTemplate, objs []manifest) {
	t.Helper()
	spec := &pt.tmpl.Spec
	if sa := find[corev1.ServiceAccount](objs); !slices.ContainsFunc(sa, func(s *corev1.ServiceAccount) bool { return s.Name == spec.ServiceAccountName }) {
		t.Errorf("%s: serviceAccountName %q is not defined (in this directory or base)", pt.owner, spec.ServiceAccountName)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot must be true", pt.owner)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext.seccompProfile must be RuntimeDefault", pt.owner)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("%s: host namespaces are not for formsync", pt.owner)
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("%s: want exactly one container (formsync), got %d (+%d init)", pt.owner, len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	checkContainerSecurity(t, pt.owner, c, psc)
	checkResources(t, pt.owner, c)
	env := containerEnv(t, pt.owner, c, objs)
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}

	// Staging: FORMSYNC_TMP_DIR (the image sets /tmp) is a writable emptyDir
	// on a read-only root filesystem.
	tmp := env["FORMSYNC_TMP_DIR"]
	if tmp == "" {
		tmp = "/tmp"
	}
	if m, ok := mounts[tmp]; !ok {
		t.Errorf("%s: nothing is mounted at FORMSYNC_TMP_DIR %s", pt.owner, tmp)
	} else if v := volumes[m.Name]; v.EmptyDir == nil || m.ReadOnly {
		t.Errorf("%s: %s must be a writable emptyDir", pt.owner, tmp)
	}

	// The token is a read-only file from the Secret, never a variable.
	if _, ok := env["FORMSYNC_API_TOKEN"]; ok {
		t.Errorf("%s: FORMSYNC_API_TOKEN is set; give the token as a file (FORMSYNC_API_TOKEN_FILE)", pt.owner)
	}
	if dir, ok := env["FORMSYNC_API_TOKEN_DIR"]; ok && readsAPI(c.Args) {
		checkTokenDir(t, pt.owner, dir, env, mounts, volumes)
	} else if readsAPI(c.Args) {
		checkTokenFile(t, pt.owner, env["FORMSYNC_API_TOKEN_FILE"], mounts, volumes)
	} else {
		// A pod that only reads the sink holds no secret it does not use.
		if f, ok := env["FORMSYNC_API_TOKEN_FILE"]; ok {
			t.Errorf("%s: %v reads only the sink, yet FORMSYNC_API_TOKEN_FILE is set (%s)", pt.owner, c.Args, f)
		}
		for _, v := range spec.Volumes {
			if v.Secret != nil {
				t.Errorf("%s: %v reads only the sink, yet mounts Secret %s (volume %s)", pt.owner, c.Args, v.Secret.SecretName, v.Name)
			}
		}
	}

	// SIGTERM leaves FORMSYNC_SHUTDOWN_TIMEOUT to the in-flight commit;
	// SIGKILL must come later.
	timeout, err := time.ParseDuration(effective(t, env, "FORMSYNC_SHUTDOWN_TIMEOUT"))
	if err != nil {
		t.Fatalf("%s: FORMSYNC_SHUTDOWN_TIMEOUT: %v", pt.owner, err)
	}
	// A one-shot command then pushes its metrics, the run's interruption
	// among them.
	need, needs := timeout+shutdownMargin, fmt.Sprintf("FORMSYNC_SHUTDOWN_TIMEOUT %s + %s", timeout, shutdownMargin)
	if args := c.Args; len(args) == 0 || args[0] != "run" {
		need += pushTimeout
		needs += fmt.Sprintf(" + the metrics push's %s", pushTimeout)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil {
		t.Errorf("%s: terminationGracePeriodSeconds is not set", pt.owner)
	} else if time.Duration(*g)*time.Second < need {
		t.Errorf("%s: terminationGracePeriodSeconds %d is under %s", pt.owner, *g, needs)
	}

	// The configuration the pod gets loads and validates: a value that does
	// not parse (FORMSYNC_LOOKBACK=1d) fails here, not in the cluster.
	checkConfigLoads(t, pt, env)
}

func checkContainerSecurity(t *testing.T, owner string, c corev1.Container, psc *corev1.PodSecurityContext) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s container %s: no securityContext", owner, c.Name)
		return
	}
	if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		t.Errorf("%s container %s: runAsNonRoot is false", owner, c.Name)
	}
	uid := sc.RunAsUser
	if uid == nil && psc != nil {
		uid = psc.RunAsUser
	}
	if uid == nil || *uid != nonrootUID {
		t.Errorf("%s container %s: runAsUser must be %d (the image's nonroot user)", owner, c.Name, nonrootUID)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s container %s: readOnlyRootFilesystem must be true", owner, c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s container %s: allowPrivilegeEscalation must be false", owner, c.Name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s container %s: privileged", owner, c.Name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s container %s: capabilities must drop ALL and add none", owner, c.Name)
	}
	if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s container %s: seccompProfile %s, want RuntimeDefault", owner, c.Name, sc.SeccompProfile.Type)
	}
}

func checkResources(t *testing.T, owner string, c corev1.Container) {
	t.Helper()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[name]
		lim, okLim := c.Resources.Limits[name]
		switch {
		case !okReq || !okLim:
			t.Errorf("%s container %s: %s request and limit must both be set", owner, c.Name, name)
		case req.Cmp(lim) > 0:
			t.Errorf("%s container %s: %s request %s is above its limit %s", owner, c.Name, name, req.String(), lim.String())
		}
	}
	// GOMEMLIMIT, when set, keeps the Go heap under the memory limit.
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		soft, err := parseGoMemLimit(e.Value)
		lim := c.Resources.Limits[corev1.ResourceMemory]
		switch {
		case err != nil:
			t.Errorf("%s container %s: GOMEMLIMIT: %v", owner, c.Name, err)
		case soft >= lim.Value():
			t.Errorf("%s container %s: GOMEMLIMIT %s is not below the memory limit %s", owner, c.Name, e.Value, lim.String())
		}
	}
}

// parseGoMemLimit reads GOMEMLIMIT as the Go runtime does: bytes with an
// optional B, KiB, MiB, GiB or TiB suffix.
func parseGoMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte count", s)
	}
	return n * mult, nil
}

// readsAPI reports whether the formsync command line args reads the form
// API (and so needs its token); status only reads the sink.
func readsAPI(args []string) bool {
	return len(args) == 0 || args[0] != "status"
}

// checkTokenFile asserts FORMSYNC_API_TOKEN_FILE names a file that a
// read-only mount of the token Secret provides, with the key of the template.
func checkTokenFile(t *testing.T, owner, file string, mounts map[string]corev1.VolumeMount, volumes map[string]corev1.Volume) {
	t.Helper()
	if file == "" {
		t.Errorf("%s: FORMSYNC_API_TOKEN_FILE is not set", owner)
		return
	}
	dir, base := path.Split(file)
	m, ok := mounts[strings.TrimSuffix(dir, "/")]
	if !ok {
		t.Errorf("%s: FORMSYNC_API_TOKEN_FILE %s is not in a mounted directory", owner, file)
		return
	}
	if !m.ReadOnly {
		t.Errorf("%s: the token mount %s must be readOnly", owner, m.MountPath)
	}
	v := volumes[m.Name]
	if v.Secret == nil || v.Secret.SecretName != tokenSecret {
		t.Errorf("%s: %s must come from Secret %s", owner, m.MountPath, tokenSecret)
		return
	}
	key := base // without items, each key is a file of its own name
	for _, it := range v.Secret.Items {
		if it.Path == base {
			key = it.Key
		}
	}
	if key != "token" {
		t.Errorf("%s: FORMSYNC_API_TOKEN_FILE reads key %q of the Secret; %s has key \"token\"", owner, key, secretTemplate)
	}
	if v.Secret.Optional != nil && *v.Secret.Optional {
		t.Errorf("%s: the token Secret must not be optional: a missing token should stop the pod", owner)
	}
}

// checkConfigLoads has the binary check the pod's environment for the
// pod's command (formsync env -check).
func checkConfigLoads(t *testing.T, pt podTemplate, env map[string]string) {
	t.Helper()
	command := "sync"
	if args := pt.tmpl.Spec.Containers[0].Args; len(args) > 0 && (args[0] == "run" || args[0] == "status") {
		command = args[0]
	}
	podEnv := maps.Clone(env)
	// The token file is the Secret's mount (checkTokenFile): formsync reads
	// it when it checks the configuration, so a file with a token stands
	// in for it here.
	if _, ok := podEnv["FORMSYNC_API_TOKEN_FILE"]; ok {
		tok := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tok, []byte("test-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		podEnv["FORMSYNC_API_TOKEN_FILE"] = tok
	}
	standInTokenDir(t, podEnv)
	// So is the webhook's secret.
	if _, ok := podEnv["FORMSYNC_TRIGGER_SECRET_FILE"]; ok {
		secret := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		podEnv["FORMSYNC_TRIGGER_SECRET_FILE"] = secret
	}
	// The staging directory is the pod's emptyDir mount: a directory
	// stands in for it here.
	if _, ok := podEnv["FORMSYNC_TMP_DIR"]; ok {
		podEnv["FORMSYNC_TMP_DIR"] = t.TempDir()
	}
	// Placeholders the README has the user replace (PROJECT_ID) stand for
	// a valid value; formsync checks a project id's form before it
	// connects.
	for k, v := range podEnv {
		podEnv[k] = strings.ReplaceAll(v, "PROJECT_ID", "my-project")
	}
	if pt.indexes > 0 {
		// The last pod of an Indexed Job has the highest index.
		podEnv["JOB_COMPLETION_INDEX"] = strconv.Itoa(pt.indexes - 1)
	}
	if _, err := formsyncCmd(podEnv, "env", "-check", command); err != nil {
		t.Errorf("%s: the pod's configuration does not load: %v", pt.owner, err)
	}
}

// only returns the single manifest of a kind, failing otherwise.
func only[T any](t *testing.T, dir string, ms []manifest) *T {
	t.Helper()
	got := find[T](ms)
	if len(got) != 1 {
		var zero T
		t.Fatalf("%s: want one %T, got %d", dir, zero, len(got))
	}
	return got[0]
}

func TestBaseCronJob(t *testing.T) {
	t.Parallel()
	_, ms := render(t, "base")
	cj := only[batchv1.CronJob](t, "base", ms)
	if _, err := cron.ParseStandard(cj.Spec.Schedule); err != nil {
		t.Errorf("schedule %q: %v", cj.Spec.Schedule, err)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q: two passes must never overlap, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
	if cj.Spec.StartingDeadlineSeconds == nil || cj.Spec.SuccessfulJobsHistoryLimit == nil || cj.Spec.FailedJobsHistoryLimit == nil {
		t.Error("startingDeadlineSeconds and the history limits must be set")
	}
	js := cj.Spec.JobTemplate.Spec
	if js.BackoffLimit == nil || js.ActiveDeadlineSeconds == nil {
		t.Error("jobTemplate: backoffLimit and activeDeadlineSeconds must be set")
	}
	checkJobPod(t, "CronJob", js, "sync")

	sa := only[corev1.ServiceAccount](t, "base", ms)
	if gsa := sa.Annotations["iam.gke.io/gcp-service-account"]; !strings.HasSuffix(gsa, ".iam.gserviceaccount.com") {
		t.Errorf("ServiceAccount %s: Workload Identity annotation %q is not a Google service account", sa.Name, gsa)
	}
	cm := only[corev1.ConfigMap](t, "base", ms)
	if cm.Name != configMapName {
		t.Errorf("ConfigMap %q, want %q", cm.Name, configMapName)
	}
	if cm.Data["FORMSYNC_SINK"] != "bigquery" {
		t.Errorf("FORMSYNC_SINK=%q, want bigquery", cm.Data["FORMSYNC_SINK"])
	}
	for _, k := range []string{"FORMSYNC_API_BASE_URL", "FORMSYNC_FORMS", "FORMSYNC_BQ_PROJECT", "FORMSYNC_BQ_DATASET", "FORMSYNC_BQ_LOCATION"} {
		if cm.Data[k] == "" {
			t.Errorf("ConfigMap %s: %s is empty; it is what a user sets", cm.Name, k)
		}
	}
}

// checkJobPod asserts a Job's pods run the command and are not restarted in
// place (a retry is a new pod, counted by backoffLimit).
func checkJobPod(t *testing.T, owner string, js batchv1.JobSpec, command string) {
	t.Helper()
	spec := js.Template.Spec
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("%s: restartPolicy %q, want Never", owner, spec.RestartPolicy)
	}
	if args := spec.Containers[0].Args; len(args) == 0 || args[0] != command {
		t.Errorf("%s: args %q, want the %s command", owner, args, command)
	}
	if len(spec.Containers[0].Command) > 0 {
		t.Errorf("%s: command overrides the image's ENTRYPOINT; set args", owner)
	}
}

func TestShardedOverlay(t *testing.T) {
	t.Parallel()
	const dir = "overlays/sharded"
	objs := cluster(t, dir)
	_, ms := render(t, dir)
	cj := only[batchv1.CronJob](t, dir, ms)
	js := cj.Spec.JobTemplate.Spec
	if js.CompletionMode == nil || *js.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("completionMode %v, want Indexed", js.CompletionMode)
	}
	if js.Completions == nil || js.Parallelism == nil {
		t.Fatal("completions and parallelism must be set")
	}
	env := containerEnv(t, dir, js.Template.Spec.Containers[0], objs)
	if _, ok := env["FORMSYNC_SHARD_INDEX"]; ok {
		t.Error("FORMSYNC_SHARD_INDEX is set: every pod would sync the same shard; leave it to JOB_COMPLETION_INDEX")
	}
	shards, err := strconv.Atoi(effective(t, env, "FORMSYNC_SHARD_COUNT"))
	if err != nil {
		t.Fatalf("FORMSYNC_SHARD_COUNT: %v", err)
	}
	if int(*js.Completions) != shards || int(*js.Parallelism) != shards || shards < 2 {
		t.Errorf("completions %d, parallelism %d, FORMSYNC_SHARD_COUNT %d: all three must be equal (and above 1)", *js.Completions, *js.Parallelism, shards)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
	checkJobPod(t, "CronJob", js, "sync")
}

func TestSchedulerOverlay(t *testing.T) {
	t.Parallel()
	const dir = "overlays/scheduler"
	objs := cluster(t, dir)
	_, ms := render(t, dir)
	if n := len(find[batchv1.CronJob](ms)) + len(find[batchv1.Job](ms)); n != 0 {
		t.Errorf("%d CronJobs/Jobs rendered next to the scheduler: passes would run twice", n)
	}
	d := only[appsv1.Deployment](t, dir, ms)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want exactly 1 scheduler", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q, want Recreate: a rollout must not run two schedulers", d.Spec.Strategy.Type)
	}
	podLabels := d.Spec.Template.Labels
	if d.Spec.Selector == nil || !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment selector %v does not select its pods %v", d.Spec.Selector, podLabels)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Errorf("args %q, want run", c.Args)
	}
	if len(c.Command) > 0 {
		t.Error("command overrides the image's ENTRYPOINT; set args")
	}

	// The probes and the Service reach the port FORMSYNC_HTTP_ADDR listens on.
	env := containerEnv(t, dir, c, objs)
	_, portText, err := net.SplitHostPort(effective(t, env, "FORMSYNC_HTTP_ADDR"))
	if err != nil {
		t.Fatalf("FORMSYNC_HTTP_ADDR: %v", err)
	}
	port, _ := strconv.Atoi(portText)
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
	if i < 0 || int(c.Ports[i].ContainerPort) != port {
		t.Fatalf("container ports %v: want one named metrics on %d (FORMSYNC_HTTP_ADDR)", c.Ports, port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET of %s", p.name, p.path)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || (g.Port.String() != "metrics" && g.Port.IntValue() != port) {
			t.Errorf("%s probe: GET %s on port %s, want %s on metrics", p.name, g.Path, g.Port.String(), p.path)
		}
	}

	svc := only[corev1.Service](t, dir, ms)
	if !selects(svc.Spec.Selector, podLabels) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s selector %v does not select the scheduler pods %v", svc.Name, svc.Spec.Selector, podLabels)
	}
	if len(svc.Spec.Ports) != 1 || (svc.Spec.Ports[0].TargetPort.String() != "metrics" && svc.Spec.Ports[0].TargetPort.IntValue() != port) {
		t.Errorf("Service %s ports %v: want one targeting metrics", svc.Name, svc.Spec.Ports)
	}
	a := svc.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" || a["prometheus.io/port"] != strconv.Itoa(port) {
		t.Errorf("Service %s annotations %v: want prometheus.io scrape true, path /metrics, port %d", svc.Name, a, port)
	}
}

// selects reports whether every label of the selector is on the pod.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// oneJob renders dir, a one-off Job's directory, and returns its Job, which
// must run command.
func oneJob(t *testing.T, dir, command string) *batchv1.Job {
	t.Helper()
	_, ms := render(t, dir)
	if len(ms) != 1 {
		t.Errorf("%s renders %v: want only the Job, so applying it never resets base's ConfigMap", dir, ms)
	}
	j := only[batchv1.Job](t, dir, ms)
	checkJobPod(t, "Job", j.Spec, command)
	return j
}

func TestBackfillJob(t *testing.T) {
	t.Parallel()
	js := oneJob(t, "backfill", "backfill").Spec
	args := js.Template.Spec.Containers[0].Args
	if i := slices.Index(args, "--form"); i < 0 || i+1 >= len(args) || args[i+1] == "" {
		t.Errorf("args %q: want --form FORM_ID", args)
	}
	if js.BackoffLimit == nil || js.ActiveDeadlineSeconds == nil || js.TTLSecondsAfterFinished == nil {
		t.Error("backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished must be set")
	}
	if js.CompletionMode != nil && *js.CompletionMode == batchv1.IndexedCompletion {
		t.Error("a backfill names its form: it is not sharded")
	}
}

// TestStatusJob: deploy/status is the backfill Job running status once,
// under its own name so that it never replaces a backfill in flight.
func TestStatusJob(t *testing.T) {
	t.Parallel()
	j := oneJob(t, "status", "status")
	if j.Name != "formsync-status" {
		t.Errorf("Job %q, want formsync-status: a status run must not take the backfill Job's name", j.Name)
	}
	js := j.Spec
	if args := js.Template.Spec.Containers[0].Args; len(args) != 1 {
		t.Errorf("args %q, want [status]", args)
	}
	if c := js.Template.Labels["app.kubernetes.io/component"]; c != "status" {
		t.Errorf("pod component label %q, want status", c)
	}
	if js.BackoffLimit == nil {
		t.Error("backoffLimit unset, want 0: a failed status is for a person to read")
	} else if *js.BackoffLimit != 0 {
		t.Errorf("backoffLimit %d, want 0: a failed status is for a person to read", *js.BackoffLimit)
	}
	if js.ActiveDeadlineSeconds == nil || *js.ActiveDeadlineSeconds > 600 || js.TTLSecondsAfterFinished == nil {
		t.Error("activeDeadlineSeconds (at most 600) and ttlSecondsAfterFinished must be set")
	}
}

// TestDecodeManifestStrict shows the decoder rejects what the manifests must
// never contain: a misspelt field, an unknown kind.
func TestDecodeManifestStrict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		want      error // nil: any error
	}{
		{"misspelt field", "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec:\n  concurencyPolicy: Forbid\n", nil},
		{"miscased field", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n        - name: c\n          securityContext: {readOnlyRootFileSystem: true}\n", nil},
		{"duplicate key in a typed field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {type: ClusterIP, type: NodePort}\n", nil},
		{"field at the wrong level", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nFORMSYNC_SINK: bigquery\n", nil},
		{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {A: b}\ndata: {A: c}\n", nil},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", errUnknownKind},
		{"wrong apiVersion", "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: x}\n", errUnknownKind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeManifest([]byte(tc.doc))
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("decodeManifest: %v, want an error (%v)", err, tc.want)
			}
		})
	}
	ms, err := decodeStream([]byte("# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {FORMSYNC_SINK: sqlite}\n---\n"))
	if err != nil || len(ms) != 1 || ms[0].String() != "ConfigMap/x" {
		t.Errorf("decodeStream: %v, %v; want [ConfigMap/x]", ms, err)
	}
}

// TestShutdownTimeoutDefault pins where checkPod takes the default from:
// the binary (formsync env).
func TestShutdownTimeoutDefault(t *testing.T) {
	t.Parallel()
	def := defaultOf(t, "FORMSYNC_SHUTDOWN_TIMEOUT")
	if _, err := time.ParseDuration(def); err != nil {
		t.Fatalf("default of FORMSYNC_SHUTDOWN_TIMEOUT %q: %v", def, err)
	}
	if effective(t, map[string]string{}, "FORMSYNC_SHUTDOWN_TIMEOUT") != def {
		t.Error("effective does not fall back to the default")
	}
}

// TestFieldHashKeyMounted: the ConfigMap offers a field policy that hashes,
// commented out, and the path of its key file beside it. Uncommenting them
// must be all it takes: every pod that reads the API mounts that file
// read-only from a Secret, optional, so that pods without a policy start
// without the Secret. (status applies no policy; checkPod checks it mounts
// no Secret.)
func TestFieldHashKeyMounted(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("base/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*#\s*FORMSYNC_FIELD_HASH_KEY_FILE:\s*"([^"]+)"`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("base/configmap.yaml offers FORMSYNC_FIELD_POLICY but not the FORMSYNC_FIELD_HASH_KEY_FILE its hash needs")
	}
	file := string(m[1])
	dir, base := path.Split(file)
	for _, k := range kustomizations {
		t.Run(k, func(t *testing.T) {
			_, ms := render(t, k)
			for _, pt := range podTemplates(ms) {
				spec := pt.tmpl.Spec
				if !readsAPI(spec.Containers[0].Args) {
					continue
				}
				var mount *corev1.VolumeMount
				for i, vm := range spec.Containers[0].VolumeMounts {
					if vm.MountPath == strings.TrimSuffix(dir, "/") {
						mount = &spec.Containers[0].VolumeMounts[i]
					}
				}
				if mount == nil {
					t.Errorf("%s: nothing is mounted at %s, where FORMSYNC_FIELD_HASH_KEY_FILE=%s", pt.owner, dir, file)
					continue
				}
				if !mount.ReadOnly {
					t.Errorf("%s: the hash key mount %s must be readOnly", pt.owner, mount.MountPath)
				}
				var vol *corev1.Volume
				for i, v := range spec.Volumes {
					if v.Name == mount.Name {
						vol = &spec.Volumes[i]
					}
				}
				switch {
				case vol == nil || vol.Secret == nil:
					t.Errorf("%s: %s must come from a Secret", pt.owner, mount.MountPath)
				case vol.Secret.SecretName == tokenSecret:
					t.Errorf("%s: the hash key must have a Secret of its own: %s must not be optional", pt.owner, tokenSecret)
				case vol.Secret.Optional == nil || !*vol.Secret.Optional:
					t.Errorf("%s: the hash key Secret must be optional: pods without a policy that hashes run without it", pt.owner)
				case !slices.ContainsFunc(vol.Secret.Items, func(it corev1.KeyToPath) bool { return it.Path == base }):
					t.Errorf("%s: the hash key Secret projects no %s", pt.owner, base)
				}
			}
		})
	}
}

// TestWebhookOverlay: the scheduler with its webhook endpoint. The endpoint
// listens on a port of its own (FORMSYNC_TRIGGER_ADDR), its secret file is
// in a mounted Secret, and the Ingress routes /hooks/ over TLS to that port
// alone: never to the metrics and probes.
func TestWebhookOverlay(t *testing.T) {
	t.Parallel()
	const dir = "overlays/webhook"
	objs := cluster(t, dir)
	_, ms := render(t, dir)
	d := only[appsv1.Deployment](t, dir, ms)
	c := d.Spec.Template.Spec.Containers[0]
	env := containerEnv(t, dir, c, objs)
	_, portText, err := net.SplitHostPort(effective(t, env, "FORMSYNC_TRIGGER_ADDR"))
	if err != nil {
		t.Fatalf("FORMSYNC_TRIGGER_ADDR: %v", err)
	}
	port, _ := strconv.Atoi(portText)
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "hooks" })
	if i < 0 || int(c.Ports[i].ContainerPort) != port {
		t.Fatalf("container ports %v: want one named hooks on %d (FORMSYNC_TRIGGER_ADDR)", c.Ports, port)
	}
	secretFile := env["FORMSYNC_TRIGGER_SECRET_FILE"]
	mounted := false
	for _, m := range c.VolumeMounts {
		if path.Dir(secretFile) == m.MountPath {
			v := d.Spec.Template.Spec.Volumes[slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })]
			mounted = v.Secret != nil && v.Secret.SecretName == "formsync-webhook-secret" && m.ReadOnly
		}
	}
	if secretFile == "" || !mounted {
		t.Errorf("FORMSYNC_TRIGGER_SECRET_FILE=%q is not in a read-only mount of Secret formsync-webhook-secret", secretFile)
	}

	var hooks *corev1.Service
	for _, s := range find[corev1.Service](ms) {
		if s.Name == "formsync-hooks" {
			hooks = s
		}
	}
	if hooks == nil || !selects(hooks.Spec.Selector, d.Spec.Template.Labels) || len(hooks.Spec.Selector) == 0 ||
		len(hooks.Spec.Ports) != 1 || hooks.Spec.Ports[0].TargetPort.String() != "hooks" {
		t.Fatalf("Service formsync-hooks %+v: want one port targeting hooks, selecting the scheduler pods", hooks)
	}
	ing := only[networkingv1.Ingress](t, dir, ms)
	if len(ing.Spec.TLS) == 0 || len(ing.Spec.Rules) == 0 {
		t.Fatalf("Ingress %s: want TLS and a rule", ing.Name)
	}
	for _, r := range ing.Spec.Rules {
		if !slices.Contains(ing.Spec.TLS[0].Hosts, r.Host) {
			t.Errorf("Ingress rule for %q is not covered by TLS", r.Host)
		}
		for _, p := range r.HTTP.Paths {
			b := p.Backend.Service
			if p.Path != "/hooks/" || b == nil || b.Name != hooks.Name || b.Port.Name != "hooks" {
				t.Errorf("Ingress path %q to %+v: only /hooks/ to %s's hooks port", p.Path, b, hooks.Name)
			}
		}
	}
}
