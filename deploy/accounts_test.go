package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// accountsSecret is the Secret of the accounts' tokens (overlays/accounts).
const (
	accountsSecret   = "formsync-account-tokens"
	accountsTemplate = "overlays/accounts/secret.example.yaml"
)

// checkTokenDir asserts FORMSYNC_API_TOKEN_DIR is a read-only mount of the
// accounts' Secret with every key (no items), that no single token is set
// beside it, and that every account FORMSYNC_FORMS names is a key of the
// Secret's template.
func checkTokenDir(t *testing.T, owner, dir string, env map[string]string, mounts map[string]corev1.VolumeMount, volumes map[string]corev1.Volume) {
	t.Helper()
	if f, ok := env["FORMSYNC_API_TOKEN_FILE"]; ok {
		t.Errorf("%s: FORMSYNC_API_TOKEN_FILE (%s) is set beside FORMSYNC_API_TOKEN_DIR: formsync refuses both", owner, f)
	}
	m, ok := mounts[dir]
	if !ok {
		t.Errorf("%s: nothing is mounted at FORMSYNC_API_TOKEN_DIR %s", owner, dir)
		return
	}
	if !m.ReadOnly {
		t.Errorf("%s: the tokens' mount %s must be readOnly", owner, dir)
	}
	v := volumes[m.Name]
	if v.Secret == nil || v.Secret.SecretName != accountsSecret {
		t.Errorf("%s: %s must come from Secret %s", owner, dir, accountsSecret)
		return
	}
	if len(v.Secret.Items) > 0 {
		t.Errorf("%s: the tokens' Secret lists items: every key must be a file, or a new account's token is not mounted", owner)
	}
	if v.Secret.Optional != nil && *v.Secret.Optional {
		t.Errorf("%s: the tokens' Secret must not be optional", owner)
	}
	keys := accountKeys(t)
	for _, a := range formAccounts(env["FORMSYNC_FORMS"]) {
		if !keys[a] {
			t.Errorf("%s: FORMSYNC_FORMS names account %s, which %s has no key for", owner, a, accountsTemplate)
		}
	}
}

// accountKeys are the keys of the accounts' Secret template, which must
// hold placeholders only.
func accountKeys(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(accountsTemplate)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := decodeStream(data)
	if err != nil {
		t.Fatalf("%s: %v", accountsTemplate, err)
	}
	secrets := find[corev1.Secret](ms)
	if len(secrets) != 1 || secrets[0].Name != accountsSecret {
		t.Fatalf("%s: want one Secret %s", accountsTemplate, accountsSecret)
	}
	keys := map[string]bool{}
	for k, v := range secrets[0].StringData {
		if !strings.Contains(v, "REPLACE") {
			t.Errorf("%s: key %s must stay a placeholder", accountsTemplate, k)
		}
		keys[k] = true
	}
	return keys
}

// formAccounts are the accounts of FORMSYNC_FORMS entries account:form.
func formAccounts(forms string) []string {
	var out []string
	for _, e := range strings.Split(forms, ",") {
		if a, _, ok := strings.Cut(strings.TrimSpace(e), ":"); ok {
			out = append(out, a)
		}
	}
	return out
}

// standInTokenDir replaces the pod's FORMSYNC_API_TOKEN_DIR, the Secret's
// mount, with a directory holding a token for each account of
// FORMSYNC_FORMS, so that the binary can check the configuration.
func standInTokenDir(t *testing.T, env map[string]string) {
	t.Helper()
	if _, ok := env["FORMSYNC_API_TOKEN_DIR"]; !ok {
		return
	}
	dir := t.TempDir()
	for _, a := range formAccounts(env["FORMSYNC_FORMS"]) {
		if err := os.WriteFile(filepath.Join(dir, a), []byte("test-token-"+a+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env["FORMSYNC_API_TOKEN_DIR"] = dir
}

// TestAccountsSecretTemplate: the accounts' Secret template has a key for
// each account the overlay's ConfigMap names, placeholders only.
func TestAccountsSecretTemplate(t *testing.T) {
	keys := accountKeys(t)
	data, err := os.ReadFile("overlays/accounts/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := decodeStream(data)
	if err != nil {
		t.Fatal(err)
	}
	cms := find[corev1.ConfigMap](ms)
	if len(cms) != 1 {
		t.Fatalf("want one ConfigMap patch, got %d", len(cms))
	}
	accounts := formAccounts(cms[0].Data["FORMSYNC_FORMS"])
	if len(accounts) == 0 {
		t.Fatal("the overlay's FORMSYNC_FORMS names no account")
	}
	for _, a := range accounts {
		if !keys[a] {
			t.Errorf("account %s has no key in %s", a, accountsTemplate)
		}
	}
}
