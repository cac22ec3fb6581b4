package sink_test

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/formsync/formsync/sink"
)

// NewRow turns a decoded submission into the row a sink stores. A
// submission with an id is keyed by it; one of the older response form,
// without an id, by its content key. Both rows below are one submission,
// seen once in each response form: the content key, computed for every
// row, is how a sink re-keys the first to the second instead of storing it
// twice.
func ExampleNewRow() {
	older, _ := time.Parse(time.RFC3339Nano, "2026-03-01T10:05:00.123456Z") // six digits
	newer, _ := time.Parse(time.RFC3339Nano, "2026-03-01T10:05:00.123Z")    // three
	fields := json.RawMessage(`{"name": "Ada", "email": "ada@example.com"}`)

	a, err := sink.NewRow("contact", nil, older, false, fields, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	id := int64(48213)
	b, err := sink.NewRow("contact", &id, newer, false, fields, json.RawMessage(`[]`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a.SubmissionKey == a.ContentKey, len(a.SubmissionKey))
	fmt.Println(b.SubmissionKey)
	fmt.Println(a.ContentKey == b.ContentKey)
	fmt.Println(a.Fields, a.Files)
	// Output:
	// true 32
	// 48213
	// true
	// {"email":"ada@example.com","name":"Ada"} []
}

// ContentKey hashes created_at (to the millisecond) and the canonical JSON
// of fields and files: key order and spacing do not change it.
func ExampleContentKey() {
	at := time.Date(2026, 3, 1, 10, 5, 0, 123_000_000, time.UTC)
	f1, _ := sink.CanonicalJSON(`{"b": 2, "a": [1, {"y": true, "x": null}]}`)
	f2, _ := sink.CanonicalJSON(`{"a":[1,{"x":null,"y":true}],"b":2}`)
	fmt.Println(f1)
	fmt.Println(sink.ContentKey(at, f1, "[]") == sink.ContentKey(at.Add(456*time.Microsecond), f2, "[]"))
	// Output:
	// {"a":[1,{"x":null,"y":true}],"b":2}
	// true
}

// A Spool stages a run's rows on disk as NDJSON, so that memory does not
// grow with the rows; a sink's Commit reads them back.
func ExampleSpool() {
	dir, err := os.MkdirTemp("", "spool-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	sp, err := sink.NewSpool(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sp.Remove()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := int64(1); i <= 3; i++ {
		r, _ := sink.NewRow("contact", &i, at.Add(time.Duration(i)*time.Minute), false, json.RawMessage(`{}`), nil)
		if err := sp.Append(r); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := sp.Finish(); err != nil {
		fmt.Println(err)
		return
	}
	for r, err := range sp.Rows() {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(r.SubmissionKey, r.CreatedAt.Format(sink.TimeLayout))
	}
	// Output:
	// 1 2026-03-01T10:01:00.000000Z
	// 2 2026-03-01T10:02:00.000000Z
	// 3 2026-03-01T10:03:00.000000Z
}
