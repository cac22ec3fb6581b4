package worker

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/worker/files"
)

// prefetchQueue is how many files wait for a prefetch worker at most: a
// file offered beyond it is left to the files phase.
const prefetchQueue = 1024

// prefetcher fetches the files of the rows a sync reads while it reads
// them (Config.Files), so that fetching runs beside the page reading and
// the files phase after the commit finds most files fetched already. It
// only stores objects: a file is recorded by the files phase, after the
// commit of its row, as every file is. What it fetched for rows that end
// up not committed (the commit failed) is an object no row names yet,
// reused by a later fetch of the same bytes.
//
// Only rows newer than the form's stored watermark are offered: a re-read
// (the lookback, a reconcile) serves rows whose files were fetched
// before.
type prefetcher struct {
	e     *Engine
	ctx   context.Context
	queue chan fileTask
	wg    sync.WaitGroup

	mu      sync.Mutex
	pending map[string]*prefetched
}

// prefetched is one file offered: ready closes when res is set.
type prefetched struct {
	ready chan struct{}
	res   fileResult
}

func prefetchKey(form, key, url string) string { return form + "\x00" + key + "\x00" + url }

// startPrefetch starts the prefetcher of a run, nil when no files are
// kept. Stop it with stop.
func (e *Engine) startPrefetch(ctx context.Context) *prefetcher {
	fk := e.cfg.Files
	if fk == nil || fk.Fetcher == nil {
		return nil
	}
	if _, err := (sink.Optional{Sink: e.dst}).FileKeeper(); err != nil {
		return nil
	}
	p := &prefetcher{e: e, ctx: ctx, queue: make(chan fileTask, prefetchQueue), pending: map[string]*prefetched{}}
	for range max(fk.Workers, e.cfg.Concurrency) {
		p.wg.Go(func() {
			for t := range p.queue {
				res := e.fetchOne(ctx, t)
				p.mu.Lock()
				f := p.pending[prefetchKey(t.row.FormID, t.row.SubmissionKey, t.url)]
				p.mu.Unlock()
				f.res = res
				close(f.ready)
			}
		})
	}
	return p
}

// offer queues the files of a row just staged, unless the queue is full.
func (p *prefetcher) offer(row sink.Row) {
	if p.ctx.Err() != nil || row.Files == "" || row.Files == "[]" || row.Files == "{}" {
		return
	}
	entries, err := files.Entries(json.RawMessage(row.Files))
	if err != nil {
		return // the files phase says so
	}
	fr := sink.FileRow{FormID: row.FormID, SubmissionKey: row.SubmissionKey, CreatedAt: row.CreatedAt}
	for _, en := range entries {
		if en.URL == nil || *en.URL == "" || dropped(p.e.cfg.FieldPolicy, en.Input) {
			continue
		}
		k := prefetchKey(row.FormID, row.SubmissionKey, *en.URL)
		p.mu.Lock()
		if _, ok := p.pending[k]; ok {
			p.mu.Unlock()
			continue
		}
		f := &prefetched{ready: make(chan struct{})}
		p.pending[k] = f
		p.mu.Unlock()
		select {
		case p.queue <- fileTask{row: fr, entry: en, url: *en.URL}:
		default:
			p.mu.Lock()
			delete(p.pending, k)
			p.mu.Unlock()
		}
	}
}

// take returns what the prefetch of a file gave, waiting for it when it
// is under way; false when the file was not prefetched, or its fetch left
// nothing to record (the store failed, the run ended).
func (p *prefetcher) take(ctx context.Context, t fileTask) (fileResult, bool) {
	if p == nil {
		return fileResult{}, false
	}
	p.mu.Lock()
	f, ok := p.pending[prefetchKey(t.row.FormID, t.row.SubmissionKey, t.url)]
	p.mu.Unlock()
	if !ok {
		return fileResult{}, false
	}
	select {
	case <-f.ready:
	case <-ctx.Done():
		return fileResult{}, false
	}
	if f.res.copy == nil {
		return fileResult{}, false
	}
	r := f.res
	r.task = t
	r.copy.SubmissionKey = t.row.SubmissionKey
	return r, true
}

// stop ends the prefetch: the files queued but not started are dropped
// (the files phase fetches them), and it waits for those under way.
func (p *prefetcher) stop() {
	if p == nil {
		return
	}
	close(p.queue)
	p.wg.Wait()
}
