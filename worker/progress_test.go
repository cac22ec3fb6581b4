package worker_test

import (
	"sync"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// TestSyncReportsProgress: a first sync and a reconcile report every page
// they read, against the pages the form spans; a sync since the watermark
// reports its pages without a total, which it cannot know.
func TestSyncReportsProgress(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Order: apisim.NewestFirst, Forms: []string{"f"}, SubmissionsPerForm: 250}, memSink(t))
	h.Config.PageSize = 20
	var mu sync.Mutex
	var got []worker.Progress
	h.Config.Progress = func(p worker.Progress) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p)
	}
	eng := newEngine(t, h, client(t, h, nil))
	if _, err := eng.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	const pages = 13 // 250 at 20 a page
	if len(got) != pages {
		t.Fatalf("first sync: %d progress reports, want one a page (%d): %+v", len(got), pages, got)
	}
	for i, p := range got {
		if p.FormID != "f" || p.Pages != i+1 || p.PagesTotal != pages {
			t.Errorf("first sync report %d: %+v, want page %d of %d", i, p, i+1, pages)
		}
	}
	if last := got[pages-1]; last.Rows != 250 || last.ETA != 0 {
		t.Errorf("last report %+v: want every submission read (250) and no time left", last)
	}

	got = nil
	if _, err := eng.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].PagesTotal != 0 {
		t.Errorf("sync since the watermark: reports %+v, want pages with no total", got)
	}

	got = nil
	if _, err := eng.Reconcile(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if len(got) < pages || got[0].PagesTotal < pages {
		t.Errorf("reconcile: reports %+v, want each page of %d", got, pages)
	}
}
