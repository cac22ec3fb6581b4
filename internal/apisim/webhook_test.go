package apisim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookSink records the webhooks it is sent, by path.
type hookSink struct {
	mu     sync.Mutex
	bodies map[string][]json.RawMessage
	status int
	sim    *Server // when set, each webhook checks its submission is served
	unseen int     // webhooks that came before their submission was served
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body struct {
		Payload map[string]any `json:"payload"`
	}
	json.Unmarshal(b, &body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bodies == nil {
		h.bodies = map[string][]json.RawMessage{}
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	h.bodies[r.URL.Path] = append(h.bodies[r.URL.Path], b)
	if h.sim != nil {
		form := strings.TrimPrefix(r.URL.Path, "/hooks/s3cret/")
		live := false
		for _, s := range h.sim.Submissions(form) {
			var f map[string]any
			json.Unmarshal(s.Fields, &f)
			if equalJSON(f, body.Payload) {
				live = true
			}
		}
		if !live {
			h.unseen++
		}
	}
	w.WriteHeader(max(h.status, http.StatusAccepted))
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func waitHooks(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitWebhooks(ctx); err != nil {
		t.Fatalf("webhooks still in flight: %v", err)
	}
}

func TestWebhookPerAddedSubmission(t *testing.T) {
	t.Parallel()
	sink := &hookSink{}
	hooks := httptest.NewServer(sink)
	defer hooks.Close()
	sim := New(Options{Forms: []string{"contact", "signup"}, SubmissionsPerForm: 5, Webhook: hooks.URL + "/hooks/s3cret/{form}"})
	sink.sim = sim

	added := sim.Add("contact", 3)
	added = append(added, sim.AddAt("signup", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), 2)...)
	if c, ok := sim.AddCopy("contact", added[0].ID); !ok {
		t.Fatal("AddCopy refused a live id")
	} else {
		added = append(added, c)
	}
	waitHooks(t, sim)

	st := sim.Stats()
	if st.WebhooksSent != 6 || st.WebhooksFailed != 0 {
		t.Fatalf("sent %d, failed %d webhooks; want 6 and 0", st.WebhooksSent, st.WebhooksFailed)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if n, m := len(sink.bodies["/hooks/s3cret/contact"]), len(sink.bodies["/hooks/s3cret/signup"]); n != 4 || m != 2 {
		t.Fatalf("contact got %d webhooks, signup %d; want 4 and 2 (the initial submissions none)", n, m)
	}
	if sink.unseen != 0 {
		t.Fatalf("%d webhooks came before their submission was served", sink.unseen)
	}
	// The service's shape: the fields under payload, files empty, nothing else.
	for _, b := range sink.bodies["/hooks/s3cret/signup"] {
		var body map[string]json.RawMessage
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range body {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(keys, []string{"files", "payload"}) || string(body["files"]) != "{}" {
			t.Fatalf("body %s: want only payload and files {}", b)
		}
		if !slices.ContainsFunc(added, func(s Submission) bool {
			var x, y any
			json.Unmarshal(s.Fields, &x)
			json.Unmarshal(body["payload"], &y)
			return equalJSON(x, y)
		}) {
			t.Fatalf("payload %s is no added submission's fields", body["payload"])
		}
	}
}

func TestWebhookFailuresCountedNotRetried(t *testing.T) {
	t.Parallel()
	sink := &hookSink{status: http.StatusServiceUnavailable}
	hooks := httptest.NewServer(sink)
	defer hooks.Close()
	// A listener that is closed: nothing answers there.
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()

	for _, tc := range []struct {
		name, url string
		posts     int
	}{
		{"answered 503", hooks.URL + "/h/{form}", 4},
		{"nothing listening", goneURL + "/h/{form}", 0},
	} {
		sim := New(Options{Forms: []string{"contact"}, SubmissionsPerForm: NoSubmissions, Webhook: tc.url})
		sim.Add("contact", 4)
		waitHooks(t, sim)
		if st := sim.Stats(); st.WebhooksSent != 0 || st.WebhooksFailed != 4 {
			t.Errorf("%s: sent %d, failed %d; want 0 and 4", tc.name, st.WebhooksSent, st.WebhooksFailed)
		}
		if got := len(sim.Submissions("contact")); got != 4 {
			t.Errorf("%s: %d submissions live; want 4 whatever the webhook did", tc.name, got)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if n := len(sink.bodies["/h/contact"]); n != 4 {
		t.Fatalf("the failing endpoint got %d posts; want 4 (no retries)", n)
	}
}

func TestWebhookMutationsSend(t *testing.T) {
	t.Parallel()
	sink := &hookSink{}
	hooks := httptest.NewServer(sink)
	defer hooks.Close()
	sim := New(Options{Forms: []string{"contact"}, SubmissionsPerForm: 5, MutateEvery: 1, AddPerMutation: 2,
		Webhook: hooks.URL + "/h/{form}"})
	api := httptest.NewServer(sim)
	defer api.Close()
	req, _ := http.NewRequest(http.MethodGet, api.URL+"/api/forms/contact/submissions", nil)
	req.Header.Set("Authorization", "Bearer "+sim.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitHooks(t, sim)
	if st := sim.Stats(); st.WebhooksSent != 2 {
		t.Fatalf("sent %d webhooks after a mutation that added 2", st.WebhooksSent)
	}
}

func TestCheckWebhook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8081/hooks/x/{form}", true},
		{"http://localhost:8081/{form}", true},
		{"http://[::1]:8081/{form}", true},
		{"http://127.0.0.1:8081/hooks/x/contact", false}, // no {form}
		{"https://127.0.0.1:8081/{form}", false},
		{"http://example.com/{form}", false},
		{"http://10.0.0.1/{form}", false},
		{"http://user:pw@127.0.0.1/{form}", false},
		{"127.0.0.1:8081/{form}", false},
	} {
		err := CheckWebhook(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckWebhook(%q) = %v; want ok %v", tc.url, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrWebhook) {
			t.Errorf("CheckWebhook(%q) = %v; want it to wrap ErrWebhook", tc.url, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New took a webhook off loopback")
		}
	}()
	New(Options{Webhook: "http://example.com/{form}"})
}
