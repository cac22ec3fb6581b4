package bigquery

import (
	"errors"
	"testing"

	"github.com/formsync/formsync/sink/internal/sqlname"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// readView reads a form's view through the fake (SELECT * is a shape the
// fake accepts for tests), one map per row, sorted by submission_key.
func readView(t *testing.T, b *bundle, form string) []map[string]bq.Value {
	t.Helper()
	q := b.sink.query("SELECT * FROM " + ref(b.cfg.Project, b.cfg.Dataset, sqlname.ViewName(form)))
	it, err := q.Read(t.Context())
	if err != nil {
		t.Fatalf("reading view: %v", err)
	}
	var out []map[string]bq.Value
	for {
		row := map[string]bq.Value{}
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j]["submission_key"].(string) < out[j-1]["submission_key"].(string); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func googleErr(code int, reason string) error {
	e := &googleapi.Error{Code: code, Message: "boom"}
	if reason != "" {
		e.Errors = []googleapi.ErrorItem{{Reason: reason, Message: "boom"}}
	}
	return e
}
