package worker

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/formsync/formsync/worker/formsapi"
)

// A form service token belongs to one account, and the service's rate
// limit is that account's. A deployment that syncs the forms of several
// accounts therefore reads each form through its own account's client:
// each has its own token, its own rate-limit bucket and its own pacing
// from the server's headers, so that an account at its limit does not
// slow another, and a token is only ever sent for its own account's forms.

// Accounts is a Source that reads each form through the Source of the
// account the form belongs to. It is safe for concurrent use when the
// account Sources are (*formsapi.Client is).
type Accounts struct {
	byForm map[string]string // form id → account

	mu      sync.RWMutex
	sources map[string]Source
}

var _ accountSource = (*Accounts)(nil)

// NewAccounts returns the Source that reads the forms of each account of
// sources through that account's Source; forms maps each form id to its
// account. A form id of an account that sources does not hold is refused.
func NewAccounts(sources map[string]Source, forms map[string]string) (*Accounts, error) {
	a := &Accounts{byForm: make(map[string]string, len(forms)), sources: maps.Clone(sources)}
	for name, src := range sources {
		if src == nil {
			return nil, fmt.Errorf("worker: account %q has no source", name)
		}
	}
	for id, name := range forms {
		if _, ok := sources[name]; !ok {
			return nil, fmt.Errorf("worker: form %q belongs to account %q, which has no source", id, name)
		}
		a.byForm[id] = name
	}
	return a, nil
}

// Page reads a page of formID through its account's Source. A form of no
// account is refused without a request: no token is sent for it.
func (a *Accounts) Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error) {
	name, ok := a.byForm[formID]
	if !ok {
		return nil, &formsapi.Response{}, fmt.Errorf("worker: form %q page %d: the form belongs to no configured account, so no token is sent for it", formID, page)
	}
	p, resp, err := a.Source(name).Page(ctx, formID, page, limit)
	if err != nil {
		err = &AccountError{Account: name, Err: err}
	}
	return p, resp, err
}

// AccountError is a failure of a form read through an account: it names
// the account, and errors.Is and errors.As see the failure through it.
type AccountError struct {
	Account string
	Err     error
}

func (e *AccountError) Error() string { return "account " + e.Account + ": " + e.Err.Error() }
func (e *AccountError) Unwrap() error { return e.Err }

// Account returns the account formID belongs to; "" for none.
func (a *Accounts) Account(formID string) string { return a.byForm[formID] }

// Source returns the Source of an account; nil for none.
func (a *Accounts) Source(name string) Source {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.sources[name]
}

// Replace makes src the Source of an existing account for the pages asked
// from then on: a client with the account's new token, when the API
// rejected the old one (a *formsapi.Client refuses every call after a
// 401).
func (a *Accounts) Replace(name string, src Source) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.sources[name]; !ok || src == nil {
		return fmt.Errorf("worker: no account %q to replace the source of", name)
	}
	a.sources[name] = src
	return nil
}
