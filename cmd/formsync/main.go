// Command formsync copies form submissions from the Form Submissions Read API
// into BigQuery or SQLite, incrementally and exactly once. See the README.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/formsync/formsync/cmd/formsync/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
