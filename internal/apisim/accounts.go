package apisim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Accounts serves the forms of several accounts of the form service at one
// address, as the service does: each account is a Server of its own, with
// its own token, plan limit and faults, and a request goes to the Server of
// the account that holds its form, which accepts only its own token. A
// form that no account holds answers 404.
//
// It also records every request that carried one account's token to a
// form (or a file of a form) of another account (Crossed): a client that
// keeps its accounts apart makes none.
type Accounts struct {
	servers map[string]*Server
	byForm  map[string]string // form id → account
	byToken map[string]string // token → account

	mu      sync.Mutex
	crossed []Crossing
}

// Crossing is a request for a form of one account that carried the token
// of another.
type Crossing struct {
	FormID       string
	FormAccount  string
	TokenAccount string
}

// NewAccounts builds a Server per account from its Options. Each account
// needs a token and forms of its own: a token or a form id shared by two
// accounts panics (a test bug).
func NewAccounts(accounts map[string]Options) *Accounts {
	a := &Accounts{servers: map[string]*Server{}, byForm: map[string]string{}, byToken: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(accounts)) {
		o := accounts[name]
		if o.Token == "" || len(o.Forms) == 0 {
			panic(fmt.Sprintf("apisim: account %q needs a token and forms of its own", name))
		}
		if other, ok := a.byToken[o.Token]; ok {
			panic(fmt.Sprintf("apisim: accounts %q and %q share a token", other, name))
		}
		a.byToken[o.Token] = name
		for _, id := range o.Forms {
			if other, ok := a.byForm[id]; ok {
				panic(fmt.Sprintf("apisim: form %q is in accounts %q and %q", id, other, name))
			}
			a.byForm[id] = name
		}
		a.servers[name] = New(o)
	}
	return a
}

// Server returns the Server of an account; nil for none.
func (a *Accounts) Server(name string) *Server { return a.servers[name] }

// Account returns the account that holds formID; "" for none.
func (a *Accounts) Account(formID string) string { return a.byForm[formID] }

// Crossed returns the requests that carried another account's token.
func (a *Accounts) Crossed() []Crossing {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.crossed)
}

func (a *Accounts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every account's files are at the address the first request came to.
	for _, s := range a.servers {
		s.learnOrigin(r)
	}
	formID, ok := formOfPath(r.URL.Path)
	name := a.byForm[formID]
	if !ok || name == "" {
		writeBody(w, http.StatusNotFound, "text/plain; charset=utf-8", []byte("404 page not found\n"))
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if other, ok := a.byToken[tok]; ok && other != name {
		a.mu.Lock()
		a.crossed = append(a.crossed, Crossing{FormID: formID, FormAccount: name, TokenAccount: other})
		a.mu.Unlock()
	}
	a.servers[name].ServeHTTP(w, r)
}

// formOfPath returns the form id of /api/forms/{formId}/submissions, or of
// a file's path, FilesPath[moved/]{form}/{id}/{name}.
func formOfPath(path string) (string, bool) {
	if rest, ok := strings.CutPrefix(path, FilesPath); ok {
		parts := strings.Split(rest, "/")
		if len(parts) == 4 && parts[0] == "moved" {
			parts = parts[1:]
		}
		return parts[0], len(parts) == 3 && parts[0] != ""
	}
	rest, ok := strings.CutPrefix(path, "/api/forms/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/submissions")
	return id, ok && id != "" && !strings.Contains(id, "/")
}
