package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/state"
)

// Open creates the database file and its schema; Commit stores a form's
// staged rows and its new state in one transaction. The same commit made
// again changes nothing, and one that carries a revision the file has moved
// past (another writer committed the form meanwhile) is refused whole.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlite-example")
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

	// What a run hands over: the rows read, staged in a spool, and the
	// form's new state with the watermark of the newest row.
	stage := func() (*sink.Spool, state.Watermark) {
		sp, err := sink.NewSpool(dir)
		if err != nil {
			panic(err)
		}
		at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		var w state.Watermark
		for id := int64(1); id <= 3; id++ {
			created := at.Add(time.Duration(id) * time.Minute)
			r, err := sink.NewRow("contact", &id, created, false, json.RawMessage(`{"email":"x@example.com"}`), nil)
			if err != nil {
				panic(err)
			}
			if err := sp.Append(r); err != nil {
				panic(err)
			}
			w = w.Advance(created, id, r.SubmissionKey)
		}
		if err := sp.Finish(); err != nil {
			panic(err)
		}
		return sp, w
	}

	commit := func() error {
		stored, err := db.ReadState(ctx, []string{"contact"})
		if err != nil {
			return err
		}
		st, ok := stored["contact"]
		if !ok {
			st = state.New("contact") // never committed: revision 0
		}
		sp, w := stage()
		defer sp.Remove()
		st.Watermark = w
		res, err := db.Commit(ctx, &sink.Commit{Forms: []sink.FormCommit{{State: st, Rows: sp}}})
		if err != nil {
			return err
		}
		c := res["contact"]
		fmt.Printf("inserted %d, updated %d\n", c.Inserted, c.Updated)
		return nil
	}
	if err := commit(); err != nil { // first load
		fmt.Println(err)
		return
	}
	if err := commit(); err != nil { // the same rows again: nothing changes
		fmt.Println(err)
		return
	}

	stored, _ := db.ReadState(ctx, []string{"contact"})
	st := stored["contact"]
	fmt.Println("rows:", st.Rows, "watermark:", st.Watermark.CreatedAt.Format(time.TimeOnly), "revision:", st.Revision)

	st.Revision-- // a state read before the last commit
	_, err = db.Commit(ctx, &sink.Commit{Forms: []sink.FormCommit{{State: st}}})
	fmt.Println("stale state refused:", errors.Is(err, sink.ErrStateConflict))
	// Output:
	// inserted 3, updated 0
	// inserted 0, updated 0
	// rows: 3 watermark: 10:03:00 revision: 2
	// stale state refused: true
}
