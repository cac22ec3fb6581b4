package bigquery

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestCommitInDespiteItsJobFailing: BigQuery ends a script's job in error
// after its COMMIT TRANSACTION (the counts SELECT that follows failed), or
// the job's results cannot be read. The commit is in: Commit reports it as
// done, with the counts it would have read, rather than as a conflict with
// itself (the rerun's revision check finds the revisions it moved), and nothing is
// applied twice.
func TestCommitInDespiteItsJobFailing(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	rows := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
	at := b.t0.Add(time.Hour)

	// Each step commits with one fault injected when its script starts,
	// and says what Commit must report.
	steps := []struct {
		name  string
		fault bqfake.Op
		fc    func() sink.FormCommit
		want  sink.Counts
	}{
		{"rows, job failed after COMMIT", bqfake.OpScriptCommitted, func() sink.FormCommit {
			return sink.FormCommit{State: formState("f", rows), Rows: sinktest.Spool(t, rows...)}
		}, sink.Counts{Inserted: 2}},
		{"state only, job failed after COMMIT", bqfake.OpScriptCommitted, func() sink.FormCommit {
			return sink.FormCommit{State: formState("f", rows)}
		}, sink.Counts{}},
		{"forget, job failed after COMMIT", bqfake.OpScriptCommitted, func() sink.FormCommit {
			return sink.FormCommit{State: formState("f", rows), Forget: []string{rows[0].SubmissionKey}}
		}, sink.Counts{Forgotten: 1}},
		{"rows, results unreadable", bqfake.OpQueryResults, func() sink.FormCommit {
			more := b.row(t, "f", 3, 3, false)
			rows = append(rows, more)
			changed := b.row(t, "f", 2, 2, true)
			return sink.FormCommit{State: formState("f", rows), Rows: sinktest.Spool(t, more, changed)}
		}, sink.Counts{Inserted: 1, Updated: 1}},
	}
	for i, step := range steps {
		before := readState(t, b.sink, "f")["f"].Revision
		fc := step.fc()
		fc.State.Revision = before
		// A failure after COMMIT can only hit the commit's script; the
		// results' read is failed once the script has run (OnStatement
		// fires then), so that it is the script's results that fail.
		queued, remove := false, func() {}
		if step.fault == bqfake.OpQueryResults {
			remove = b.fake.OnStatement(func(kind string) {
				if kind == "SCRIPT" && !queued {
					queued = true
					b.fake.FailNext(step.fault, http.StatusBadRequest, "invalid") // not retried: read once
				}
			})
		} else {
			queued = true
			b.fake.FailNext(step.fault, http.StatusInternalServerError, "backendError")
		}
		res, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: at.Add(time.Duration(i) * time.Minute), Forms: []sink.FormCommit{fc}})
		remove()
		if !queued || b.fake.Pending(step.fault) != 0 {
			t.Fatalf("%s: the fault did not fire", step.name)
		}
		if err != nil {
			t.Fatalf("%s: Commit: %v, want the commit reported as done", step.name, err)
		}
		if got := res["f"]; got != step.want {
			t.Errorf("%s: counts %+v, want %+v", step.name, got, step.want)
		}
		if got := readState(t, b.sink, "f")["f"].Revision; got != before+1 {
			t.Errorf("%s: revision %d -> %d, want one commit", step.name, before, got)
		}
	}
	checkRows(t, b.sink, "f", []sink.Row{b.row(t, "f", 2, 2, true), rows[2]})
}

// TestFailedCommitIsNotTakenForIn: a transaction that failed and rolled
// back, or that another process's commit beat, is reported as failed: the
// stored last_commit names another commit.
func TestFailedCommitIsNotTakenForIn(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	b.mustCommit(t, b.t0, formRows{formState("f", rows), rows})

	b.fake.FailNext(bqfake.OpScript, http.StatusBadRequest, "invalidQuery") // rolled back, not retried
	more := []sink.Row{b.row(t, "f", 2, 2, false)}
	if _, err := b.commit(t, b.t0.Add(time.Hour), formRows{formState("f", append(rows, more...)), more}); err == nil {
		t.Fatal("a rolled back transaction reported as done")
	}
	checkRows(t, b.sink, "f", rows)

	stale := formState("f", rows)
	stale.Revision = readState(t, b.sink, "f")["f"].Revision
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("f", rows), nil}) // another process's
	_, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(3 * time.Hour), Forms: []sink.FormCommit{{State: stale}}})
	if !errors.Is(err, sink.ErrStateConflict) {
		t.Fatalf("commit at a stale revision: %v, want ErrStateConflict", err)
	}
}

// TestLastCommitNamesTheCommit: every state a commit writes says which
// commit wrote it (the prefix of its job ids) and what it did.
func TestLastCommitNamesTheCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	rows := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
	b.mustCommit(t, b.t0, formRows{formState("f", rows), rows}, formRows{formState("g", nil), nil})

	got := map[string]map[string]any{}
	q := b.sink.query(render("readCommits", b.sink.t), bq.QueryParameter{Name: "form_ids", Value: []string{"f", "g"}})
	it, err := q.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for {
		var row []bq.Value
		if err := it.Next(&row); errors.Is(err, iterator.Done) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(vString(row[1])), &m); err != nil {
			t.Fatalf("last_commit of %v: %v", row[0], err)
		}
		got[vString(row[0])] = m
	}
	f, g := got["f"], got["g"]
	id, _ := f["id"].(string)
	if !strings.HasPrefix(id, "formsync_") || g["id"] != id {
		t.Errorf("last_commit ids %v and %v, want one commit id", f["id"], g["id"])
	}
	if f["inserted"] != 2.0 || f["updated"] != 0.0 || g["inserted"] != 0.0 {
		t.Errorf("last_commit f %v, g %v", f, g)
	}
}

// TestCommitInButCountsReplaced: a commit whose job failed after its COMMIT
// is in, but another process committed one of its forms before the sink
// read the states back: the counts of that form are gone, and Commit says
// so rather than reporting counts it does not know (or a conflict).
func TestCommitInButCountsReplaced(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	other := b.second(t)
	rf, rg := []sink.Row{b.row(t, "f", 1, 1, false)}, []sink.Row{b.row(t, "g", 2, 2, false)}
	b.fake.FailNext(bqfake.OpScriptCommitted, http.StatusInternalServerError, "backendError")
	fired := false
	remove := b.fake.OnStatement(func(kind string) {
		if kind != "SCRIPT" || fired {
			return
		}
		fired = true
		// The failed script has committed: another process commits g.
		g := formState("g", rg)
		g.Revision = 1
		if _, err := other.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(time.Minute), Forms: []sink.FormCommit{{State: g}}}); err != nil {
			t.Errorf("the other process's commit: %v", err)
		}
	})
	_, err := b.commit(t, b.t0, formRows{formState("f", rf), rf}, formRows{formState("g", rg), rg})
	remove()
	if err == nil || !strings.Contains(err.Error(), "applied, but its counts of forms [g] were replaced") {
		t.Fatalf("Commit: %v, want one saying the commit is in but g's counts were replaced", err)
	}
	checkRows(t, b.sink, "f", rf)
	checkRows(t, b.sink, "g", rg)
}
