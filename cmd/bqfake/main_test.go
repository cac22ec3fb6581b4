package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/state"
)

// TestServesTheSink: the sink opens, commits and reads back against the
// served fake, and the command stops when its context ends.
func TestServesTheSink(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, w); w.Close() }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, r)
	url, _, ok := strings.Cut(strings.TrimPrefix(line, "BigQuery fake listening on "), " ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q: want the URL it listens on", line)
	}

	s, err := bigquery.Open(ctx, bigquery.Config{Project: "my-project", Endpoint: url, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := int64(1)
	row, err := sink.NewRow("f", &id, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), false, []byte(`{"email":"a@example.com"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := sink.NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Remove()
	if err := sp.Append(row); err != nil {
		t.Fatal(err)
	}
	if err := sp.Finish(); err != nil {
		t.Fatal(err)
	}
	st := state.New("f")
	st.FieldNames = []string{"email"}
	res, err := s.Commit(ctx, &sink.Commit{Forms: []sink.FormCommit{{State: st, Rows: sp}}})
	if err != nil || res["f"].Inserted != 1 {
		t.Fatalf("commit: %+v, %v", res, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop when its context ended")
	}
}

func TestRefusesAddressesBeyondLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:9050", ":9050", "10.0.0.1:9050", "[::2]:9050", "example.com:9050", "localhost.example.com:9050"} {
		if err := run(t.Context(), []string{"-addr", addr}, io.Discard); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("-addr %s: %v, want it refused", addr, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // stops as soon as it listens
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "LOCALHOST:0"} {
		if err := run(ctx, []string{"-addr", addr}, io.Discard); err != nil {
			t.Errorf("-addr %s: %v, want it served", addr, err)
		}
	}
}

// TestHelpIsNoFailure: -h prints the flags and exits 0; a bad flag exits 1
// with its error.
func TestHelpIsNoFailure(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	err := run(t.Context(), []string{"-h"}, &out)
	if code := exitCode(err, &errOut); code != 0 || !strings.Contains(out.String(), "-addr") || errOut.Len() != 0 {
		t.Errorf("-h: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	errOut.Reset()
	err = run(t.Context(), []string{"-nope"}, io.Discard)
	if code := exitCode(err, &errOut); code != 1 || !strings.Contains(errOut.String(), "bqfake:") {
		t.Errorf("-nope: exit %d, stderr %q", code, errOut.String())
	}
}
