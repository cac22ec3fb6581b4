package bigquery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	bq "cloud.google.com/go/bigquery"
	"github.com/formsync/formsync/sink"
	"google.golang.org/api/iterator"
)

// A staging table holds a copy of every row its commit loaded. The
// commit deletes it when it ends, and it expires StagingExpiration after
// it was created; only a table left by a commit that crashed or was
// stopped outlives its commit, and a forgotten submission in it would
// outlive its erasure there until it expires. Purge removes it sooner.

// toScrub records rows a committed transaction forgot, for Purge.
func (s *Sink) toScrub(rows []forgetParam) {
	if len(rows) == 0 {
		return
	}
	s.scrubMu.Lock()
	defer s.scrubMu.Unlock()
	for _, r := range rows {
		if !slices.Contains(s.scrub, r) {
			s.scrub = append(s.scrub, r)
		}
	}
}

// Purge removes the rows that this Sink's commits forgot from every
// staging table formsync holds in the staging dataset (tables named
// <StagingTable>_*): one DELETE per table; then the records of their
// file copies that a RecordFiles whose check of the rows came before the
// forget appended after it (no reader sees them: their rows are gone),
// one DELETE. The worker calls it after each
// forget. A failure leaves the rows to the dataset's expiration; a later
// Purge of the same Sink tries them again.
func (s *Sink) Purge(ctx context.Context) error {
	s.scrubMu.Lock()
	rows := slices.Clone(s.scrub)
	s.scrubMu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	if err := s.guard(ctx, func(ctx context.Context) error { return s.scrubStaging(ctx, rows) }); err != nil {
		return fmt.Errorf("%w; the staging tables keep their copies of the forgotten rows until they expire, at most %v after their commit", err, s.cfg.StagingExpiration)
	}
	if err := s.guard(ctx, func(ctx context.Context) error { return s.scrubCopies(ctx, rows) }); err != nil {
		return fmt.Errorf("%w; a later purge tries again", err)
	}
	s.scrubMu.Lock()
	s.scrub = slices.DeleteFunc(s.scrub, func(r forgetParam) bool { return slices.Contains(rows, r) })
	s.scrubMu.Unlock()
	return nil
}

func (s *Sink) scrubStaging(ctx context.Context, rows []forgetParam) error {
	ds := s.client.Dataset(s.cfg.StagingDataset)
	var names []string
	err := s.retry(ctx, func() error {
		names = names[:0]
		it := ds.Tables(ctx)
		for {
			t, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return nil
			}
			if err != nil {
				return s.scope.classify("listing the staging tables", "dataset "+s.cfg.Project+"."+s.cfg.StagingDataset, err)
			}
			if strings.HasPrefix(t.TableID, s.cfg.StagingTable+"_") {
				names = append(names, t.TableID)
			}
		}
	})
	if err != nil {
		return err
	}
	params := []bq.QueryParameter{{Name: "forget", Value: rows}}
	for _, name := range names {
		var nonce [8]byte
		if _, err := rand.Read(nonce[:]); err != nil {
			return fmt.Errorf("bigquery: scrubbing staging: job id: %w", err)
		}
		sql := render("scrubStaging", tables{Staging: ref(s.cfg.Project, s.cfg.StagingDataset, name)})
		_, err := s.runStatement(ctx, "formsync_scrub_"+hex.EncodeToString(nonce[:]), "removing forgotten rows from staging table "+name, sql, params)
		if err != nil && !errors.Is(err, ErrNotFound) { // expired meanwhile
			return err
		}
	}
	return nil
}

// scrubCopies deletes the file copies of rows from
// submission_file_copies: the forget's transaction deleted those it
// found, and only a load that met the forget can have appended more.
func (s *Sink) scrubCopies(ctx context.Context, rows []forgetParam) error {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fmt.Errorf("bigquery: scrubbing file copies: job id: %w", err)
	}
	_, err := s.runStatement(ctx, "formsync_scrub_"+hex.EncodeToString(nonce[:]), "removing the file copies of forgotten rows from "+sink.FilesTable,
		render("forgetCopies", s.t), []bq.QueryParameter{{Name: "forget", Value: rows}})
	return err
}
