package cli

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/files"
)

// openFiles opens the files store FORMSYNC_FILES_STORE names and the
// fetchers that bring files into it (one per account when the forms are
// read through several): nil, nil when it is unset. Close the store.
func openFiles(ctx context.Context, cfg Config) (*worker.Files, *files.Store, error) {
	if cfg.FilesStore == "" {
		return nil, nil, nil
	}
	store, err := files.OpenStore(ctx, cfg.FilesStore, files.StoreOptions{})
	if err != nil {
		return nil, nil, err
	}
	fetcher := func(token string) (*files.Fetcher, error) {
		return files.NewFetcher(cfg.fetcherConfig(token))
	}
	token := ""
	if cfg.APITokenDir == "" {
		t, err := cfg.Token()
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		token = string(t)
	}
	f, err := fetcher(token)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	fk := &worker.Files{Store: store, Fetcher: f, Workers: files.DefaultConcurrency, Scope: cfg.sinkScope()}
	for name, tok := range cfg.accountTokens {
		af, err := fetcher(string(tok))
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		if fk.Accounts == nil {
			fk.Accounts = map[string]worker.FileFetcher{}
		}
		fk.Accounts[name] = af
	}
	return fk, store, nil
}

// sinkScope names the database the rows are in, for the files store's
// record of the forms caught up: "sqlite:" and the file's absolute path,
// or "bigquery:" and the project and dataset.
func (c *Config) sinkScope() string {
	if c.Sink == "bigquery" {
		return "bigquery:" + c.BQProject + "." + c.BQDataset
	}
	path, err := filepath.Abs(c.SQLitePath)
	if err != nil {
		path = c.SQLitePath
	}
	return "sqlite:" + path
}

// fetcherConfig is the files fetcher's share of the configuration: the
// API's origin, the only one the token goes to.
func (c *Config) fetcherConfig(token string) files.FetcherConfig {
	origin := ""
	if u, err := url.Parse(c.APIBaseURL); err == nil && u.Host != "" {
		origin = u.Scheme + "://" + u.Host
	}
	return files.FetcherConfig{
		APIOrigin: origin,
		Token:     token,
		MaxBytes:  int64(c.FilesMaxBytes),
		AddressPolicy: files.AddressPolicy{
			AllowLoopback: c.FilesAllowLoopback,
			AllowPrivate:  c.FilesAllowPrivate,
		},
	}
}

// filesHint is what status says of files that will expire when no files
// store is configured.
func filesHint(rows int) string {
	return fmt.Sprintf("%d stored submissions name files that the service deletes 30 days after upload; set FORMSYNC_FILES_STORE (gs://bucket/prefix or file:///path) to keep them", rows)
}
