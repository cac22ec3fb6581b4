package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestSimulateArrivalsSendWebhooks: -arrive adds a submission to every
// form each interval, and -webhook posts the service's body for each to
// the form's URL; simulate stops cleanly with them running.
func TestSimulateArrivalsSendWebhooks(t *testing.T) {
	clearEnv(t)
	var mu sync.Mutex
	got := map[string]int{}
	bad := 0
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			Payload map[string]any  `json:"payload"`
			Files   json.RawMessage `json:"files"`
		}
		mu.Lock()
		defer mu.Unlock()
		if err := json.Unmarshal(b, &body); err != nil || r.Method != http.MethodPost || body.Payload == nil || string(body.Files) != "{}" {
			bad++
		}
		got[strings.TrimPrefix(r.URL.Path, "/hooks/x/")]++
		w.WriteHeader(http.StatusAccepted)
	}))
	defer hooks.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"simulate", "-addr", "127.0.0.1:0", "-forms", "contact,signup", "-submissions", "0",
			"-arrive", "20ms", "-webhook", hooks.URL + "/hooks/x/{form}"}, &out, &out)
	}()
	count := func(form string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[form]
	}
	waitFor(t, "no three webhooks for each form", func() bool { return count("contact") >= 3 && count("signup") >= 3 })
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("simulate exit %d:\n%s", code, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if bad > 0 || len(got) != 2 {
		t.Fatalf("%d webhooks not in the service's shape; paths %v", bad, got)
	}
	if strings.Contains(out.String(), "/hooks/x") {
		t.Errorf("the output holds the webhook's path, which holds the receiver's secret:\n%s", out.String())
	}
	for _, want := range []string{"arrivals: one submission to every form each 20ms", "webhook: POST to " + hooks.URL + "/... (-webhook)", `"webhooks_sent":`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSimulateWebhookOnLoopbackOnly: the simulator posts nowhere but this
// machine, and an arrival interval is positive.
func TestSimulateWebhookOnLoopbackOnly(t *testing.T) {
	clearEnv(t)
	for _, args := range [][]string{
		{"-webhook", "http://example.com/hooks/x/{form}"},
		{"-webhook", "https://127.0.0.1:8081/hooks/x/{form}"},
		{"-webhook", "http://127.0.0.1:8081/hooks/x/contact"},
		{"-arrive", "-1s"},
	} {
		if code, _, errOut := run(t, append([]string{"simulate", "-addr", "127.0.0.1:0"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errOut)
		}
	}
}
