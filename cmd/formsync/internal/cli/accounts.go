package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// A deployment syncs the forms of several accounts when
// FORMSYNC_API_TOKEN_DIR names a directory of token files, one per
// account, named after it: a Kubernetes Secret with one key per account,
// mounted as a directory. FORMSYNC_FORMS then names each form's account,
// account:form. Each account is read through a client of its own (its
// token, its rate limit, its pacing): worker.Accounts.

// accountName is what an account may be called: a Secret key (letters,
// digits, '-', '_', '.'), not starting with '.', which would be one of the
// hidden entries (..data) Kubernetes keeps in a mounted Secret.
var accountName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// splitAccounts splits FORMS entries written account:form into the form
// ids, in order, and each form's account. An entry without an account
// keeps its text as the id and has account "" (validateAccounts says so).
// A form listed under a second account is left out of the ids: one
// problem is enough for it.
func splitAccounts(entries []string) (ids []string, account map[string]string) {
	account = map[string]string{}
	for _, e := range entries {
		name, id, ok := strings.Cut(e, ":")
		if !ok {
			name, id = "", e
		}
		name, id = strings.TrimSpace(name), strings.TrimSpace(id)
		if prev, seen := account[id]; seen && prev != name {
			continue
		}
		account[id] = name
		ids = append(ids, id)
	}
	return ids, account
}

// validateAccounts checks FORMSYNC_API_TOKEN_DIR, every token the load
// step read from it, and the accounts of FORMSYNC_FORMS.
func (c *Config) validateAccounts(p *problems, forms bool) {
	if c.APIToken != "" || c.APITokenFile != "" {
		p.add("API_TOKEN_DIR", "FORMSYNC_API_TOKEN_DIR and FORMSYNC_API_TOKEN or FORMSYNC_API_TOKEN_FILE are all set: with a token per account, unset the single token")
	}
	if forms {
		for _, msg := range accountProblems(c.formEntries) {
			p.add("FORMS", "FORMSYNC_FORMS: %s", msg)
		}
	}
	c.reportLoaded(p, "API_TOKEN_DIR")
	tokens := c.accountTokens
	// A token the client would refuse to send (two lines, a "Bearer "
	// prefix) is a problem like the rest, named with its account and file.
	for _, name := range slices.Sorted(maps.Keys(tokens)) {
		for _, leaf := range config.Problems(formsapi.Config{Token: tokens[name]}.Validate()) {
			if fe, ok := leaf.(*config.FieldError); ok && fe.Field == "Token" {
				p.add("API_TOKEN_DIR", "FORMSYNC_API_TOKEN_DIR=%q: account %s (file %s): %v", c.APITokenDir, name, filepath.Join(c.APITokenDir, name), fe.Err)
			}
		}
	}
	if c.loadProblems.has("API_TOKEN_DIR") {
		// The directory or one of its files could not be read: said
		// once; a missing account would only repeat it.
		return
	}
	// Every account the forms name needs its token; the command's forms
	// (one, for a backfill) need an account.
	for _, name := range c.accounts() {
		if _, ok := tokens[name]; !ok {
			p.add("API_TOKEN_DIR", "FORMSYNC_API_TOKEN_DIR=%q: account %s has no token file: add the key %s to the Secret mounted there (a file %s holding the account's token)",
				c.APITokenDir, name, name, filepath.Join(c.APITokenDir, name))
		}
	}
	for _, id := range c.Forms {
		if c.formAccount[id] == "" && !forms {
			p.add("API_TOKEN_DIR", "form %q has no account: with FORMSYNC_API_TOKEN_DIR, list it in FORMSYNC_FORMS as account:%s so that its account's token is used", id, id)
		}
	}
}

// accountProblems checks the accounts of the FORMS entries: each names
// one, of a usable name, and no form is under two.
func accountProblems(entries []string) []string {
	var out []string
	under := map[string]string{}
	for i, e := range entries {
		name, id, ok := strings.Cut(e, ":")
		name, id = strings.TrimSpace(name), strings.TrimSpace(id)
		switch {
		case e == "":
			continue // formIDProblems says it
		case !ok:
			out = append(out, fmt.Sprintf("entry %d %q names no account: with FORMSYNC_API_TOKEN_DIR each form is written account:form (e.g. acme:%s)", i+1, e, e))
			continue
		case !accountName.MatchString(name):
			out = append(out, fmt.Sprintf("entry %d %q: account %q is not a token file name: use letters, digits, '-', '_' and '.', not first", i+1, e, name))
			continue
		}
		if prev, seen := under[id]; seen && prev != name {
			out = append(out, fmt.Sprintf("form id %q is configured under accounts %s and %s: a form belongs to one account, list it under its own", id, prev, name))
			continue
		}
		under[id] = name
	}
	return out
}

// accounts are the accounts the configured forms name, sorted.
func (c *Config) accounts() []string {
	set := map[string]bool{}
	for _, name := range c.formAccount {
		if name != "" && accountName.MatchString(name) {
			set[name] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// unusedTokens are the token files of the directory that no configured
// form's account uses: harmless, but often an account name misspelt in
// FORMSYNC_FORMS or in the Secret.
func (c *Config) unusedTokens() []string {
	var out []string
	used := c.accounts()
	for _, name := range slices.Sorted(maps.Keys(c.accountTokens)) {
		if !slices.Contains(used, name) {
			out = append(out, name)
		}
	}
	return out
}

// readTokenDir reads every token file of dir, by account. Entries whose
// name starts with '.' (the ..data and timestamped directories of a
// mounted Secret) and directories are not accounts. A file that is not a
// regular file (a FIFO, a device) is refused without being opened.
func readTokenDir(dir string) (map[string]formsapi.Secret, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("no such directory: mount the Secret of the accounts' tokens there")
		}
		return nil, fmt.Errorf("cannot read the directory: %w", unwrapPath(err))
	}
	tokens := map[string]formsapi.Secret{}
	var errs []error
	for _, de := range entries {
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path) // a Secret's keys are symbolic links
		if err != nil {
			errs = append(errs, fmt.Errorf("token file %s: %w", name, unwrapPath(err)))
			continue
		}
		if fi.IsDir() {
			continue
		}
		if !fi.Mode().IsRegular() {
			errs = append(errs, fmt.Errorf("token file %s is not a regular file (%s): it must hold the account's token", name, fi.Mode().Type()))
			continue
		}
		if !accountName.MatchString(name) {
			errs = append(errs, fmt.Errorf("token file %q is not named as an account can be: use letters, digits, '-', '_' and '.', not first", name))
			continue
		}
		tok, err := readTokenFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("token file %s: %w", name, err))
			continue
		}
		tokens[name] = tok
	}
	return tokens, errors.Join(errs...)
}

// newSource is the Source of the configured forms: one client for
// FORMSYNC_API_TOKEN(_FILE), or a client per account routed by form
// (worker.Accounts) for FORMSYNC_API_TOKEN_DIR, each the only one that
// sends its account's token. observe receives every request attempt, with
// its account ("" for the single token).
func newSource(cfg Config, observe func(account string, ev formsapi.Event)) (worker.Source, error) {
	clientObserver := func(account string) func(formsapi.Event) {
		if observe == nil {
			return nil
		}
		return func(ev formsapi.Event) { observe(account, ev) }
	}
	if cfg.APITokenDir == "" {
		return newClient(cfg, clientObserver(""))
	}
	tokens := cfg.accountTokens // read by the load step, with the redactor's
	sources := map[string]worker.Source{}
	for _, name := range cfg.accounts() {
		tok, ok := tokens[name]
		if !ok {
			return nil, fmt.Errorf("FORMSYNC_API_TOKEN_DIR=%q: account %s has no token file", cfg.APITokenDir, name)
		}
		client, err := formsapi.New(cfg.clientConfig(tok, clientObserver(name)))
		if err != nil {
			return nil, fmt.Errorf("account %s: %w", name, err)
		}
		sources[name] = client
	}
	forms := map[string]string{}
	for id, name := range cfg.formAccount {
		if name != "" {
			forms[id] = name
		}
	}
	return worker.NewAccounts(sources, forms)
}
