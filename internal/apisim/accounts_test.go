package apisim

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAccountsRouteByFormAndAcceptOnlyTheirToken: each form is served by
// its account's Server, with that account's token only; a request with
// another account's token is refused and recorded; an unknown form is
// 404; RevokeAfter revokes the token after that many pages.
func TestAccountsRouteByFormAndAcceptOnlyTheirToken(t *testing.T) {
	t.Parallel()
	a := NewAccounts(map[string]Options{
		"acme":   {Token: "acme-token", Forms: []string{"a1"}, SubmissionsPerForm: 3},
		"globex": {Token: "globex-token", Forms: []string{"g1"}, SubmissionsPerForm: 3, RevokeAfter: 1},
	})
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	get := func(form, token string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/forms/"+form+"/submissions", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		form, token string
		want        int
	}{
		{"a1", "acme-token", 200},
		{"a1", "globex-token", 401}, // crossed
		{"g1", "globex-token", 200},
		{"g1", "globex-token", 401}, // revoked after one page
		{"zz", "acme-token", 404},
	} {
		if got := get(c.form, c.token); got != c.want {
			t.Errorf("form %s with %s: %d, want %d", c.form, c.token, got, c.want)
		}
	}
	if c := a.Crossed(); len(c) != 1 || c[0] != (Crossing{FormID: "a1", FormAccount: "acme", TokenAccount: "globex"}) {
		t.Errorf("Crossed = %+v, want the one request for a1 with globex's token", c)
	}
	if a.Account("g1") != "globex" || a.Server("acme").Stats().PerForm["a1"] != 2 {
		t.Errorf("routing: g1 in %q, acme served a1 %d times", a.Account("g1"), a.Server("acme").Stats().PerForm["a1"])
	}
}
