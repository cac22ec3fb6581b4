package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
	bqv2 "google.golang.org/api/bigquery/v2"
)

// listTables is tables.list of a dataset of the fake, as BigQuery answers
// it (the Go client's iterator does not show expirations).
func listTables(t *testing.T, fake *bqfake.Server, project, dataset string) []*bqv2.TableListTables {
	t.Helper()
	resp, err := http.Get(fake.URL() + "/bigquery/v2/projects/" + project + "/datasets/" + dataset + "/tables")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list bqv2.TableList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Tables
}

// TestStagingTablesExpireInADatasetMadeElsewhere: the staging dataset was
// made beforehand (by Terraform, say) without a default table expiration.
// A commit's staging table is deleted once the commit is over, committed
// or not; one left behind (the run stopped mid-commit) expires on its own.
func TestStagingTablesExpireInADatasetMadeElsewhere(t *testing.T) {
	t.Parallel()
	fake := bqfake.Start(t, bqfake.Options{})
	cfg := testConfig(fake)
	body := `{"datasetReference":{"datasetId":"formsync_test_staging"},"location":"US"}`
	resp, err := http.Post(fake.URL()+"/bigquery/v2/projects/"+cfg.Project+"/datasets", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("making the staging dataset: %v %v", resp, err)
	}
	resp.Body.Close()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := &bundle{fake: fake, sink: s, cfg: cfg, t0: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	at := b.t0.Add(time.Hour)
	rows := func(from int) []sink.Row {
		return []sink.Row{b.row(t, "f", int64(from), from, false), b.row(t, "f", int64(from+1), from+1, false)}
	}

	b.mustCommit(t, at, formRows{formState("f", rows(1), "email"), rows(1)})
	fake.FailNext(bqfake.OpScript, http.StatusBadRequest, "invalidQuery")
	if _, err := b.commit(t, at, formRows{formState("f", rows(3), "email"), rows(3)}); err == nil {
		t.Fatal("a commit whose transaction failed succeeded")
	}
	fake.FailNext(bqfake.OpLoadJob, http.StatusBadRequest, "invalid")
	if _, err := b.commit(t, at, formRows{formState("f", rows(5), "email"), rows(5)}); err == nil {
		t.Fatal("a commit whose load failed succeeded")
	}
	if got := listTables(t, fake, cfg.Project, "formsync_test_staging"); len(got) != 0 {
		t.Errorf("%d staging tables after the commits, want none: each is deleted once its commit is over", len(got))
	}

	// A run stopped while its transaction runs leaves its table.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	remove := fake.OnStatement(func(kind string) {
		if kind == "SCRIPT" {
			cancel()
		}
	})
	c := &sink.Commit{SyncedAt: at, Forms: []sink.FormCommit{{State: formState("f", rows(7), "email"), Rows: sinktest.Spool(t, rows(7)...)}}}
	c.Forms[0].State.Revision = readState(t, s, "f")["f"].Revision
	if _, err := s.Commit(ctx, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit stopped mid-way: %v, want context.Canceled", err)
	}
	remove()
	left := listTables(t, fake, cfg.Project, "formsync_test_staging")
	if len(left) != 1 {
		t.Fatalf("%d staging tables after a stopped commit, want its own", len(left))
	}
	for _, tb := range left {
		if tb.ExpirationTime == 0 {
			t.Errorf("staging table %s has no expiration", tb.TableReference.TableId)
			continue
		}
		if got := time.Duration(tb.ExpirationTime-tb.CreationTime) * time.Millisecond; got < cfg.withDefaults().StagingExpiration-time.Minute || got > cfg.withDefaults().StagingExpiration+time.Minute {
			t.Errorf("staging table %s expires %v after it was made, want %v", tb.TableReference.TableId, got, cfg.withDefaults().StagingExpiration)
		}
	}
}
