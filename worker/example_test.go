package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
)

// formServer serves one form, newest first, in the newer response form.
type formServer struct {
	mu   sync.Mutex
	subs []map[string]any // newest first
}

func (f *formServer) add(id int64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := map[string]any{"id": id, "created_at": at.Format("2006-01-02T15:04:05.000Z"),
		"is_spam": false, "fields": map[string]any{"n": id}, "files": []any{}}
	f.subs = append([]map[string]any{s}, f.subs...)
}

func (f *formServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var page int
	fmt.Sscan(r.URL.Query().Get("page"), &page)
	const per = 2
	lo, hi := min((page-1)*per, len(f.subs)), min(page*per, len(f.subs))
	json.NewEncoder(w).Encode(map[string]any{
		"data": f.subs[lo:hi],
		"meta": map[string]any{"pagination": map[string]any{
			"total": len(f.subs), "count": hi - lo, "per_page": per, "current_page": page,
			"total_pages": max(1, (len(f.subs)+per-1)/per),
			"links":       map[string]any{"previous": nil, "next": nil},
		}},
	})
}

// An engine reads what is new in each form and commits it, with the
// forms' watermarks, to a sink in one transaction. The second sync reads
// one page and loads only the submission added in between.
func Example() {
	ctx := context.Background()
	api := &formServer{}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for id := int64(1); id <= 5; id++ {
		api.add(id, at.Add(time.Duration(id)*time.Minute))
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	dir, err := os.MkdirTemp("", "worker-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "formsync.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	client, err := formsapi.New(formsapi.Config{BaseURL: srv.URL, Token: "my-token", RateLimit: 1000})
	if err != nil {
		fmt.Println(err)
		return
	}
	eng, err := worker.New(client, db, worker.Config{
		Forms:  []string{"contact"},
		TmpDir: dir,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	sync := func() {
		rep, err := eng.Sync(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, f := range rep.Forms {
			fmt.Printf("%s: %d new, %d pages, order %s, watermark id %d\n",
				f.FormID, f.Inserted, f.Pages, f.Order, f.Watermark.ID)
		}
	}
	sync()
	api.add(6, at.Add(6*time.Minute))
	sync()
	// Output:
	// contact: 5 new, 3 pages, order newest_first, watermark id 5
	// contact: 1 new, 1 pages, order newest_first, watermark id 6
}
