package apisim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/formsync/formsync/internal/loopback"
)

// WebhookTimeout bounds each webhook POST, connection included.
const WebhookTimeout = 5 * time.Second

// webhookConcurrency bounds the POSTs in flight at once.
const webhookConcurrency = 8

// FormPlaceholder is what Options.Webhook's {form} is: the form id goes
// there, as the service's per-form webhook URL names one form.
const FormPlaceholder = "{form}"

// ErrWebhook is wrapped by CheckWebhook's errors.
var ErrWebhook = errors.New("webhook URL")

// CheckWebhook reports whether tmpl may be Options.Webhook: an http URL
// on a loopback host (the simulator never sends anywhere else), with
// {form} in its path standing for the form id.
func CheckWebhook(tmpl string) error {
	if !strings.Contains(tmpl, FormPlaceholder) {
		return fmt.Errorf("%w %q: want %s where the form id goes", ErrWebhook, tmpl, FormPlaceholder)
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, FormPlaceholder, "form"))
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrWebhook, tmpl, err)
	}
	if u.Scheme != "http" || !loopback.Host(u.Hostname()) || u.User != nil {
		return fmt.Errorf("%w %q: want http://127.0.0.1:PORT/... (http, a loopback host)", ErrWebhook, tmpl)
	}
	return nil
}

// webhookBody is the body the service posts for one submission: its
// fields under payload, and files, which this simulator leaves empty.
func webhookBody(fields []byte) []byte {
	if len(fields) == 0 {
		fields = []byte("{}")
	}
	b := make([]byte, 0, len(fields)+32)
	b = append(b, `{"payload":`...)
	b = append(b, fields...)
	return append(b, `,"files":{}}`...)
}

// notify sends one webhook per added submission of formID, each in a
// goroutine of its own, once they are live (called without s.mu held). It
// never blocks the caller.
func (s *Server) notify(formID string, subs []Submission) {
	if s.opts.Webhook == "" || len(subs) == 0 {
		return
	}
	target := strings.ReplaceAll(s.opts.Webhook, FormPlaceholder, url.PathEscape(formID))
	for _, sub := range subs {
		body := webhookBody(sub.Fields)
		s.hooks.Add(1)
		go func() {
			defer s.hooks.Done()
			s.hookSlots <- struct{}{}
			defer func() { <-s.hookSlots }()
			ok := s.post(target, body)
			s.mu.Lock()
			if ok {
				s.stats.WebhooksSent++
			} else {
				s.stats.WebhooksFailed++
			}
			s.mu.Unlock()
		}()
	}
}

// post sends one webhook; true if it was answered 2xx. A failure is
// counted by the caller, never retried: the schedule of the receiving end
// is what catches up, as with the service.
func (s *Server) post(target string, body []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hookClient.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// WaitWebhooks waits until every webhook started so far has been answered
// or has failed, or ctx ends (then it returns ctx's error).
func (s *Server) WaitWebhooks(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.hooks.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
