package cli

import (
	"fmt"
	"maps"
	"slices"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/worker/fieldpolicy"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/trigger"
)

// load reads, once, what the configuration names in files or has to
// parse: the API token of FORMSYNC_API_TOKEN_FILE, every account's token
// of FORMSYNC_API_TOKEN_DIR, the field policy with the key of
// FORMSYNC_FIELD_HASH_KEY_FILE, and the pins of FORMSYNC_FIELD_TYPES. The
// log's redactor (Config.tokens) and the API clients (Config.Token,
// newSource) both take the tokens from here, so that the token a client
// sends is always one the log redacts, whatever happens to the files
// after the start. What cannot be read or parsed is kept by variable in
// loadProblems, for Validate to report to the commands that read it.
//
// LoadConfig calls it; nothing else reads these files, except renewRejected,
// which registers every token it reads with the redactor before use.
func (c *Config) load() {
	c.loadProblems = problems{}
	c.token, c.tokenErr, c.accountTokens = "", nil, nil
	if c.APITokenFile != "" {
		c.token, c.tokenErr = readTokenFile(c.APITokenFile)
	}
	if c.APITokenDir != "" {
		tokens, err := readTokenDir(c.APITokenDir)
		c.accountTokens = tokens
		if err != nil {
			c.loadProblems.add("API_TOKEN_DIR", "FORMSYNC_API_TOKEN_DIR=%q: %v", c.APITokenDir, err)
		}
	}
	c.triggerSecret = ""
	if c.TriggerSecretFile != "" {
		secret, err := readTokenFile(c.TriggerSecretFile)
		if err == nil {
			err = trigger.CheckSecret(string(secret))
		}
		if err != nil {
			c.loadProblems.add("TRIGGER_SECRET_FILE", "FORMSYNC_TRIGGER_SECRET_FILE=%q: %v", c.TriggerSecretFile, err)
		} else {
			c.triggerSecret = secret
		}
	}
	c.policy = c.loadPolicy(&c.loadProblems)
	c.pins = nil
	if c.FieldTypes != "" {
		pins, errs := parseFieldTypes(c.FieldTypes)
		for _, e := range errs {
			c.loadProblems.add("FIELD_TYPES", "FORMSYNC_FIELD_TYPES: %v", e)
		}
		if errs == nil {
			c.pins = pins
		}
	}
}

// loadPolicy parses the field policy and reads its key: a policy that
// hashes without a usable key is a problem, and no policy.
func (c *Config) loadPolicy(p *problems) *fieldpolicy.Policy {
	pol, err := fieldpolicy.Parse(c.FieldPolicy)
	if err != nil {
		for _, leaf := range config.Problems(err) {
			p.add("FIELD_POLICY", "FORMSYNC_FIELD_POLICY=%q: %v", c.FieldPolicy, leaf)
		}
		return nil
	}
	if !pol.NeedsKey() {
		return pol
	}
	if c.FieldHashKeyFile == "" {
		p.add("FIELD_HASH_KEY_FILE", "FORMSYNC_FIELD_POLICY=%q hashes fields: set FORMSYNC_FIELD_HASH_KEY_FILE to a file holding a secret key of at least 16 bytes (e.g. a mounted Secret; 'openssl rand -hex 32 > hash-key' makes one)", c.FieldPolicy)
		return nil
	}
	key, err := fieldpolicy.LoadKey(c.FieldHashKeyFile)
	if err != nil {
		p.add("FIELD_HASH_KEY_FILE", "FORMSYNC_FIELD_HASH_KEY_FILE=%q: %v", c.FieldHashKeyFile, err)
		return nil
	}
	return pol.WithKey(key)
}

// reportLoaded adds the load step's problems of the variables named.
func (c *Config) reportLoaded(p *problems, names ...string) {
	for _, name := range names {
		for _, msg := range c.loadProblems.byVar[name] {
			p.add(name, "%s", msg)
		}
	}
}

// tokens are every token the load step read, for the log's redaction:
// FORMSYNC_API_TOKEN's, its file's, every account's, and the webhook
// endpoint's secret.
func (c *Config) tokens() []formsapi.Secret {
	out := []formsapi.Secret{c.APIToken, c.token, c.triggerSecret}
	for _, name := range slices.Sorted(maps.Keys(c.accountTokens)) {
		out = append(out, c.accountTokens[name])
	}
	return slices.DeleteFunc(out, func(s formsapi.Secret) bool { return s == "" })
}

// Token is the API token the client sends: FORMSYNC_API_TOKEN, or what the
// load step read from FORMSYNC_API_TOKEN_FILE. It reads no file.
func (c *Config) Token() (formsapi.Secret, error) {
	if c.APITokenFile == "" {
		return c.APIToken, nil
	}
	if c.tokenErr != nil {
		return "", fmt.Errorf("FORMSYNC_API_TOKEN_FILE=%q: %w", c.APITokenFile, c.tokenErr)
	}
	return c.token, nil
}
