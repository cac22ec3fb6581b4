// Command bqfake serves formsync's in-memory BigQuery fake (package
// testkit/bqfake) on a loopback address, so that the BigQuery sink
// can be tried end to end without a Google Cloud project:
//
//	go run ./cmd/bqfake -addr 127.0.0.1:9050
//	FORMSYNC_SINK=bigquery FORMSYNC_BQ_PROJECT=my-project FORMSYNC_BQ_ENDPOINT=http://127.0.0.1:9050 formsync sync
//
// It speaks the REST calls formsync makes (datasets, tables, load jobs,
// queries, multi-statement transactions) and keeps everything in memory:
// what it holds is gone when it stops. It is a test double, not
// BigQuery: it checks no credentials, and it runs formsync's statements
// on SQLite, so a query of your own may not work on it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/formsync/formsync/internal/loopback"
	"github.com/formsync/formsync/testkit/bqfake"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode is the process's exit code for run's error, which it prints:
// 0 for -h too, whose usage is printed and which is no failure.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "bqfake:", err)
	return 1
}

// run serves the fake until ctx ends, printing where it listens to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bqfake", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", "127.0.0.1:9050", "loopback address to listen on (port 0 picks a free one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", *addr, err)
	}
	if !loopback.Host(host) {
		// Anyone who reaches it may read and write what it holds.
		return fmt.Errorf("-addr %q: give a loopback address (127.0.0.1, ::1 or localhost); the fake checks no credentials", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fake, err := bqfake.New(bqfake.Options{})
	if err != nil {
		ln.Close()
		return err
	}
	defer fake.Close()
	srv := &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "BigQuery fake listening on %s (in memory; stop it with Ctrl-C)\n", url)
	fmt.Fprintf(out, "  export FORMSYNC_SINK=bigquery FORMSYNC_BQ_PROJECT=my-project FORMSYNC_BQ_ENDPOINT=%s\n", url)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
