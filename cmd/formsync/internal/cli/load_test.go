package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/worker/formsapi"
)

// TestRotatedTokenFileNeverLogged: the token file is rotated (a Secret
// updated in place) between the start, where the log's redactor is made,
// and the first request. Whatever token the client sends, no log line
// carries it: the redactor and the client take their token from one read.
func TestRotatedTokenFileNeverLogged(t *testing.T) {
	clearEnv(t)
	const first, second = "tok-first-0123456789", "tok-second-9876543210"
	file := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(file, []byte(first+"\n"), 0o600))

	var mu sync.Mutex
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("FORMSYNC_API_BASE_URL", srv.URL)
	t.Setenv("FORMSYNC_API_TOKEN_FILE", file)
	t.Setenv("FORMSYNC_FORMS", "contact")
	t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "f.db"))
	t.Setenv("FORMSYNC_TMP_DIR", t.TempDir())
	t.Setenv("FORMSYNC_LOG_FORMAT", "json")

	cfg, _ := LoadConfig()
	var out, logs bytes.Buffer
	e := newEnv(&out, &logs, cfg) // the start: what Main does
	must(t, os.WriteFile(file, []byte(second+"\n"), 0o600))

	if code := runSync(context.Background(), e, nil); code != exitFailed {
		t.Fatalf("sync against a 401: exit %d, want %d\n%s", code, exitFailed, logs.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) == 0 {
		t.Fatalf("no request reached the API:\n%s", logs.String())
	}
	for _, tok := range sent {
		e.log.Error("the token in use", "token", tok, "header", "Bearer "+tok)
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the log carries the token in use %q:\n%s", tok, logs.String())
		}
	}
}

// TestValidateChangesNothing: Validate reports; the configuration the
// commands use is what LoadConfig returned, checked or not.
func TestValidateChangesNothing(t *testing.T) {
	apiEnv(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	must(t, os.WriteFile(key, []byte("0123456789abcdef0123"), 0o600))
	tok := filepath.Join(dir, "token")
	must(t, os.WriteFile(tok, []byte("file-token"), 0o600))
	t.Setenv("FORMSYNC_API_TOKEN", "")
	t.Setenv("FORMSYNC_API_TOKEN_FILE", tok)
	t.Setenv("FORMSYNC_FIELD_POLICY", "email=hash")
	t.Setenv("FORMSYNC_FIELD_HASH_KEY_FILE", key)
	t.Setenv("FORMSYNC_FIELD_TYPES", `{"a":{"zip":"string"}}`)
	cfg, err := LoadConfig()
	must(t, err)
	if cfg.policy == nil || cfg.pins == nil || cfg.token != "file-token" {
		t.Fatalf("LoadConfig did not load the policy, pins and token: %v %v %q", cfg.policy, cfg.pins, cfg.token)
	}
	before := cfg
	for name := range commandNeeds {
		if err := cfg.Validate(needs(name)); err != nil {
			t.Errorf("Validate(%s): %v", name, err)
		}
	}
	if !reflect.DeepEqual(before, cfg) {
		t.Errorf("Validate changed the configuration:\nbefore %+v\nafter  %+v", before, cfg)
	}
}

// TestLibraryFieldsMapped: every variable whose field tag names a library
// field reaches that field through clientConfig, engineConfig or
// bigQuery, which set each one by name (no reflection: grep finds where
// FORMSYNC_PAGE_SIZE's Config.PageSize goes). A variable tagged but not
// mapped fails here.
func TestLibraryFieldsMapped(t *testing.T) {
	var c Config
	cv := reflect.ValueOf(&c).Elem()
	for i, f := range configFields() {
		v := cv.Field(f.index)
		switch p := v.Addr().Interface().(type) {
		case *string:
			*p = "s" + f.name
		case *formsapi.Secret:
			*p = formsapi.Secret("s" + f.name)
		case *[]string:
			*p = []string{"s" + f.name}
		case *int:
			*p = 1000 + i
		case *float64:
			*p = float64(1000 + i)
		case *time.Duration:
			*p = time.Duration(1000+i) * time.Second
		case *bool:
			*p = true
		}
	}
	c.ShardCount = 2 // StartJitter is set for a sharded run only
	libs := map[string]reflect.Value{
		"formsapi": reflect.ValueOf(c.clientConfig(c.APIToken, nil)),
		"worker":   reflect.ValueOf(c.engineConfig(c.Forms, nil)),
		"bigquery": reflect.ValueOf(c.bigQuery()),
	}
	mapped := 0
	for _, f := range configFields() {
		if f.lib == "" {
			continue
		}
		got := libs[f.lib].FieldByName(f.libField).Interface()
		if want := cv.Field(f.index).Interface(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s sets %s.Config.%s to %v, want %v: map it in the library's config function", f.env(), f.lib, f.libField, got, want)
		}
		mapped++
	}
	if mapped < 20 {
		t.Errorf("only %d variables set a library field", mapped)
	}
}
