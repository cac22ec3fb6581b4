package bqfake

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
)

// Mode is how a Front answers.
type Mode int

const (
	// Pass hands every request to the fake.
	Pass Mode = iota
	// Refuse closes the Front's port: connections are refused.
	Refuse
	// Hang accepts requests and never answers them (until the client
	// gives up or the Front is closed).
	Hang
	// Unavailable answers every request 503 backendError.
	Unavailable
)

// Request is one request a Front received, as sent.
type Request struct {
	Method string
	// URL is the path and query.
	URL  string
	Body []byte
}

// Front is a loopback server in front of a fake that can be made to fail
// as an unreachable BigQuery does, and records every request it
// receives, so that a test can check what left the client.
type Front struct {
	fake    *Server
	handler http.Handler
	addr    string

	mu       sync.Mutex
	mode     Mode
	ln       net.Listener // nil while refusing
	srv      *http.Server
	requests []Request
	hung     chan struct{} // closed by Close: releases hung requests
	// when switches to whenMode at the first request it matches.
	when     func(Request) bool
	whenMode Mode
}

// StartFront serves a Front for fake on a loopback port in mode, closed
// when the test ends. A Front started in Refuse has a port that nothing
// listens on.
func StartFront(tb TB, fake *Server, mode Mode) *Front {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("bqfake: front: %v", err)
		return nil
	}
	f := &Front{fake: fake, handler: fake.Handler(), addr: ln.Addr().String(), hung: make(chan struct{})}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)}
	f.ln = ln
	go f.srv.Serve(ln)
	tb.Cleanup(f.Close)
	if mode != Pass {
		if err := f.Set(mode); err != nil {
			tb.Fatalf("bqfake: front: %v", err)
		}
	}
	return f
}

// URL is the Front's base URL, to use as the fake's.
func (f *Front) URL() string { return "http://" + f.addr }

// Set changes how the Front answers from now on. Leaving Refuse listens
// on the same port again.
func (f *Front) Set(mode Mode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case mode == Refuse && f.ln != nil:
		// Closing the server closes the listener and every connection, so
		// that kept-alive connections are refused too.
		f.srv.Close()
		f.ln = nil
	case mode != Refuse && f.ln == nil:
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return err
		}
		f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)}
		f.ln = ln
		go f.srv.Serve(ln)
	}
	f.mode = mode
	return nil
}

// SetWhen makes the Front switch to mode at the first request that match
// reports, that request included: an outage that begins at a given step
// (match an upload to fail a commit's load).
func (f *Front) SetWhen(mode Mode, match func(Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.when, f.whenMode = match, mode
}

// Requests returns the requests received so far, in order.
func (f *Front) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Close stops the Front and releases requests it holds.
func (f *Front) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.hung:
	default:
		close(f.hung)
	}
	if f.ln != nil {
		f.srv.Close()
		f.ln = nil
	}
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	req := Request{Method: r.Method, URL: r.URL.RequestURI(), Body: body}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	if f.when != nil && f.when(req) {
		f.when = nil
		f.mu.Unlock()
		if err := f.Set(f.whenMode); err != nil {
			panic(err)
		}
		f.mu.Lock()
	}
	mode := f.mode
	f.mu.Unlock()
	switch mode {
	case Hang:
		select {
		case <-r.Context().Done():
		case <-f.hung:
		}
		return
	case Unavailable:
		writeError(w, &apiError{status: http.StatusServiceUnavailable, reason: "backendError", message: "bqfake: front: unavailable"})
		return
	case Refuse:
		// The switch to Refuse closed the listener at this request:
		// BigQuery never sees it, and the connection drops unanswered.
		panic(http.ErrAbortHandler)
	}
	f.handler.ServeHTTP(w, r)
}
