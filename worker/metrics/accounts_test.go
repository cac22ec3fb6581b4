package metrics

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// TestAccountMetrics: with several accounts, each form's account, the
// requests by account and the rejected tokens are exposed.
func TestAccountMetrics(t *testing.T) {
	t.Parallel()
	m := New()
	m.ObserveAccountRequest("acme", formsapi.Event{Status: http.StatusOK})
	m.ObserveAccountRequest("globex", formsapi.Event{Status: http.StatusUnauthorized})
	m.ObserveRun(&worker.Report{
		Forms: []worker.FormReport{
			{FormID: "a1", Account: "acme", Inserted: 3},
			{FormID: "g1", Account: "globex", Err: formsapi.ErrUnauthorized},
			{FormID: "solo"}, // a single token: no account series
		},
		Rejected: map[string]error{"globex": errors.New("rejected")},
	}, 0)
	want := `
# HELP formsync_account_api_requests_total Forms API request attempts, retries included, by account and HTTP status ("error" when no response arrived), when forms are read through several accounts.
# TYPE formsync_account_api_requests_total counter
formsync_account_api_requests_total{account="acme",status="200"} 1
formsync_account_api_requests_total{account="globex",status="401"} 1
# HELP formsync_account_token_rejected 1 when the API rejected the account's token (401) in the last run, its forms failed; 0 when it was accepted.
# TYPE formsync_account_token_rejected gauge
formsync_account_token_rejected{account="acme"} 0
formsync_account_token_rejected{account="globex"} 1
# HELP formsync_form_account_info 1 for each form and the account it is read through, when forms are read through several accounts (FORMSYNC_API_TOKEN_DIR): join on form to see any form metric by account.
# TYPE formsync_form_account_info gauge
formsync_form_account_info{account="acme",form="a1"} 1
formsync_form_account_info{account="globex",form="g1"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"formsync_account_api_requests_total", "formsync_account_token_rejected", "formsync_form_account_info"); err != nil {
		t.Error(err)
	}
}
