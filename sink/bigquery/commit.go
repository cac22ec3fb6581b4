package bigquery

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/formsync/formsync/sink/internal/sqlname"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// maxFreshIDs bounds how many job ids a commit skips because a job with
// that id already existed before the commit started.
const maxFreshIDs = 50

// Commit applies c: every form's staged rows are upserted into submissions
// on (form_id, submission_key) and every form's state is written to
// sync_state, together or not at all.
//
// The rows of all forms go to BigQuery in one load job (into the staging
// table), then one multi-statement transaction merges them and the states.
// A commit with no rows runs no load job and no submissions MERGE; when, in
// addition, no form's state changed except LastSuccessAt it runs no DML at
// all. Per-form views are (re)created, before the transaction, only for
// forms whose field names changed.
func (s *Sink) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	if c == nil || len(c.Forms) == 0 {
		return sink.Result{}, nil
	}
	// A form listed twice keeps its last state; its rows all count.
	order := []string{}
	states := map[string]state.Form{}
	var spools []*sink.Spool
	var nRows int
	for _, fc := range c.Forms {
		if err := fc.State.Validate(); err != nil {
			return nil, fmt.Errorf("bigquery: commit: %w", err)
		}
		if _, ok := states[fc.State.FormID]; !ok {
			order = append(order, fc.State.FormID)
		}
		states[fc.State.FormID] = fc.State
		if fc.Rows != nil && fc.Rows.Len() > 0 {
			if err := fc.Rows.Finish(); err != nil {
				return nil, fmt.Errorf("bigquery: commit: form %s: %w", fc.State.FormID, err)
			}
			spools = append(spools, fc.Rows)
			nRows += fc.Rows.Len()
		}
	}
	syncedAt := c.SyncedAt
	if syncedAt.IsZero() {
		syncedAt = s.cfg.Now()
	}
	syncedAt = syncedAt.UTC().Truncate(time.Microsecond)

	s.commitMu.Lock()
	defer s.commitMu.Unlock()

	res := make(sink.Result, len(order))
	for _, id := range order {
		res[id] = sink.Counts{}
	}
	prev, err := s.ReadState(ctx, order)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, id := range order {
		p, ok := prev[id]
		next := states[id]
		if !ok || !sameState(p, next) {
			changed = true
		}
		if !ok || !sameFields(p.FieldNames, next.FieldNames) {
			view := s.cfg.Project + "." + s.cfg.Dataset + "." + sqlname.ViewName(id)
			if err := s.runDDL(ctx, "creating the view of form "+id, "view "+view, viewSQL(s.cfg.Project, s.cfg.Dataset, id, next.FieldNames)); err != nil {
				return nil, err
			}
		}
	}
	if nRows == 0 && !changed {
		return res, nil
	}
	base := commitID(s.cfg, syncedAt, order, states, c.Forms)
	params := []bq.QueryParameter{{Name: "synced_at", Value: syncedAt}}
	sp := make([]stateParam, 0, len(order))
	for _, id := range order {
		p, err := newStateParam(states[id])
		if err != nil {
			return nil, fmt.Errorf("bigquery: encoding state of form %s: %w", id, err)
		}
		sp = append(sp, p)
	}
	params = append(params, bq.QueryParameter{Name: "states", Value: sp})

	if nRows == 0 {
		if _, err := s.runStatement(ctx, base+"_state", "writing sync state", render("writeState", s.t), params); err != nil {
			return nil, err
		}
		return res, nil
	}

	if err := s.load(ctx, base, spools); err != nil {
		return nil, err
	}
	from, to := createdRange(spools)
	params = append(params,
		bq.QueryParameter{Name: "created_from", Value: from},
		// A row loaded from the older response form keeps its
		// microseconds; the newer form prints milliseconds only, so
		// its content-keyed twin may be up to 1 ms later.
		bq.QueryParameter{Name: "created_to", Value: to.Add(time.Millisecond)},
	)
	job, err := s.runStatement(ctx, base+"_txn", "merging staged rows and sync state", render("commit", s.t), params)
	if err != nil {
		return nil, err
	}
	err = s.readAll(ctx, "reading commit counts", s.jobResource(job.ID()), job.Read, func() {
		for _, id := range order {
			res[id] = sink.Counts{}
		}
	}, func(v []bq.Value) error {
		if len(v) != 3 {
			return fmt.Errorf("bigquery: commit counts: got %d columns, want 3", len(v))
		}
		id := vString(v[0])
		if _, ok := res[id]; !ok {
			return fmt.Errorf("bigquery: commit counts: staged rows of form %q, which is not in the commit", id)
		}
		res[id] = sink.Counts{Inserted: vInt(v[1]), Updated: vInt(v[2])}
		return nil
	})
	if err != nil {
		// The transaction is committed: the rows and states are in.
		return nil, fmt.Errorf("bigquery: commit applied but its counts could not be read: %w", err)
	}
	return res, nil
}

// commitID derives the job ids of a commit from its content, so that a
// retried request finds the job a lost response had created.
func commitID(cfg Config, syncedAt time.Time, order []string, states map[string]state.Form, forms []sink.FormCommit) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", cfg.Project, cfg.Dataset, cfg.StagingTable)
	binary.Write(h, binary.BigEndian, syncedAt.UnixMicro())
	for _, fc := range forms {
		n, size := 0, int64(0)
		if fc.Rows != nil {
			n, size = fc.Rows.Len(), fc.Rows.Size()
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", fc.State.FormID, n, size)
	}
	return "formsync_" + hex.EncodeToString(h.Sum(nil)[:12])
}

func createdRange(spools []*sink.Spool) (from, to time.Time) {
	for i, sp := range spools {
		a, b := sp.CreatedRange()
		if i == 0 || a.Before(from) {
			from = a
		}
		if i == 0 || b.After(to) {
			to = b
		}
	}
	return from.UTC(), to.UTC()
}

// load runs the one load job of a commit: every spool, concatenated, into
// the staging table (WRITE_TRUNCATE), under job ids base_load_N. The client
// never retries an upload from a reader, so runJob's retries are the only
// ones.
func (s *Sink) load(ctx context.Context, base string, spools []*sink.Spool) error {
	table := "table " + s.cfg.Project + "." + s.cfg.Dataset + "." + s.cfg.StagingTable
	_, err := s.runJob(ctx, base+"_load", "loading staged rows into "+table, func(id string) (*bq.Job, error) {
		return s.startLoad(ctx, id, spools)
	})
	return err
}

func (s *Sink) startLoad(ctx context.Context, id string, spools []*sink.Spool) (*bq.Job, error) {
	readers := make([]io.Reader, 0, len(spools))
	for _, sp := range spools {
		rc, err := sp.Open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		readers = append(readers, rc)
	}
	src := bq.NewReaderSource(io.MultiReader(readers...))
	src.SourceFormat = bq.JSON
	src.Schema = stagingSchema()
	l := s.dataset().Table(s.cfg.StagingTable).LoaderFrom(src)
	l.WriteDisposition = bq.WriteTruncate
	l.CreateDisposition = bq.CreateIfNeeded
	l.JobID = id
	l.AddJobIDSuffix = false
	l.Location = s.cfg.Location
	if s.cfg.UploadChunkSize > 0 {
		l.MediaOptions = []googleapi.MediaOption{googleapi.ChunkSize(s.cfg.UploadChunkSize)}
	}
	return l.Run(ctx)
}

// runStatement runs one query job (a statement or a script) to completion
// under job ids base_N.
func (s *Sink) runStatement(ctx context.Context, base, op, sql string, params []bq.QueryParameter) (*bq.Job, error) {
	return s.runJob(ctx, base, op, func(id string) (*bq.Job, error) {
		q := s.query(sql, params...)
		q.JobID = id
		q.AddJobIDSuffix = false
		return q.Run(ctx)
	})
}

// runJob starts a job with start and waits for it, retrying under job ids
// base_1, base_2, ...: the id stays the same while it is unknown whether
// BigQuery created the job (a 409 duplicate then means it did: attach and
// wait), and moves to the next once a job with it ran and failed, or
// existed before this call (an earlier run with the same content), since a
// job id is never reused.
func (s *Sink) runJob(ctx context.Context, base, op string, start func(id string) (*bq.Job, error)) (*bq.Job, error) {
	attempt := 1
	tried := map[string]bool{}
	var done *bq.Job
	err := s.retry(ctx, func() error {
		for range maxFreshIDs {
			id := fmt.Sprintf("%s_%d", base, attempt)
			again := tried[id]
			tried[id] = true
			job, err := start(id)
			if err != nil && isDuplicate(err) {
				if !again {
					attempt++
					continue
				}
				job, err = s.client.JobFromIDLocation(ctx, id, s.cfg.Location)
			}
			if err != nil {
				return s.scope.classify(op, s.jobResource(id), err)
			}
			if err := s.waitJob(ctx, job); err != nil {
				attempt++
				return s.scope.classify(op, s.jobResource(id), err)
			}
			done = job
			return nil
		}
		return s.scope.classify(op, base, fmt.Errorf("%d job ids in a row exist already", maxFreshIDs))
	})
	return done, err
}
