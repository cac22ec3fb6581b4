package worker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// viewless reports the view of one form as not made in every commit of
// that form, as a sink does while a table of the user's holds its name.
type viewless struct {
	enginetest.Sink
	form string
}

var errViewTaken = errors.New("view form_f cannot be made: table form_f holds that name")

func (s *viewless) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	res, err := s.Sink.Commit(ctx, c)
	if counts, ok := res[s.form]; ok && err == nil {
		counts.View = errViewTaken
		res[s.form] = counts
	}
	return res, err
}

// TestViewNotMadeIsLogged: a view the sink could not make is the user's to
// fix (rename their table), so the worker logs it: once per sync however
// many parts the sync committed, once per backfill checkpoint, and after a
// forget; never for a form whose view was made.
func TestViewNotMadeIsLogged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var logs bytes.Buffer
	h := enginetest.NewHarness(t, apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"f", "g"}, SubmissionsPerForm: 120}, &viewless{Sink: memSink(t), form: "f"})
	h.Config.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h.Config.PartRows = 40
	warnings := func() (f, g int) {
		t.Helper()
		for line := range strings.Lines(logs.String()) {
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "view of a form could not be made") {
				continue
			}
			switch {
			case strings.Contains(line, "form=f ") && strings.Contains(line, errViewTaken.Error()):
				f++
			case strings.Contains(line, "form=g "):
				g++
			default:
				t.Errorf("a warning that names neither form with its error: %s", line)
			}
		}
		logs.Reset()
		return f, g
	}

	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "f"); fr.Parts == 0 || fr.Inserted != 120 {
		t.Fatalf("f: %d parts, %d inserted; want parts, 120", fr.Parts, fr.Inserted)
	}
	if f, g := warnings(); f != 1 || g != 0 {
		t.Errorf("sync in parts: %d warnings for f and %d for g, want 1 and 0", f, g)
	}

	bf, err := h.Engine().Backfill(ctx, "f", worker.BackfillOptions{CheckpointRows: 50})
	if err != nil {
		t.Fatal(err)
	}
	if f, g := warnings(); bf.Checkpoints < 2 || f != bf.Checkpoints || g != 0 {
		t.Errorf("backfill of %d checkpoints: %d warnings for f and %d for g, want one a checkpoint", bf.Checkpoints, f, g)
	}

	rows, err := h.Sink.ReadRows(ctx, "f")
	if err != nil || len(rows) == 0 {
		t.Fatalf("rows of f: %d, %v", len(rows), err)
	}
	if _, err := h.Engine().Forget(ctx, "f", sink.Match{Keys: []string{rows[0].SubmissionKey}}, false); err != nil {
		t.Fatal(err)
	}
	if f, g := warnings(); f != 1 || g != 0 {
		t.Errorf("forget: %d warnings for f and %d for g, want 1 and 0", f, g)
	}
}
