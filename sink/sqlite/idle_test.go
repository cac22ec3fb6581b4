package sqlite

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/sinktest"
)

// readChars is this process's rchar from /proc/self/io: bytes read through
// read syscalls, which is how SQLite reads pages its cache does not hold.
func readChars(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io here (%v): cannot count the bytes SQLite reads", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// idleRead is the bytes a run with nothing new reads from a fresh
// connection (as on a new CronJob pod) to a database holding n rows of one
// form: the state read, an empty commit, the state read again.
func idleRead(t *testing.T, n int) int64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idle.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	// A first commit creates the form's state and view; the rest of the
	// rows are generated inside SQLite, which is much quicker than staging
	// them (and what is measured is only the idle run).
	first := int64(1)
	commit(t, s, sink.FormCommit{State: stateOf("f", "email", "message"), Rows: sinktest.Spool(t,
		row(t, "f", &first, t0, false, `{"email":"user0@example.com","message":"an ordinary submission"}`))})
	_, err = s.db.ExecContext(t.Context(), `
		WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO submissions (form_id, submission_id, submission_key, created_at, is_spam, fields, files, raw, synced_at)
		SELECT 'f', i, CAST(i AS TEXT), strftime('%Y-%m-%dT%H:%M:%f000Z', '2026-03-01T12:00:00', '+' || i || ' seconds'), 0,
			json_object('email', 'user' || i || '@example.com', 'message', 'an ordinary submission'), '[]', NULL,
			'2026-03-01T13:00:00.000000Z'
		FROM n`, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), `UPDATE sync_state SET row_count = ? WHERE form_id = 'f'`, n); err != nil {
		t.Fatal(err)
	}
	s.Close()

	before := readChars(t)
	s, err = Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	states, err := s.ReadState(t.Context(), []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	st := states["f"]
	st.LastSuccessAt = t0.Add(time.Hour)
	if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadState(t.Context(), []string{"f"}); err != nil {
		t.Fatal(err)
	}
	return readChars(t) - before
}

// A run with nothing new reads a few pages of the database, however large
// the form: 10k and 200k rows cost the same order of reads. The default
// run compares 1k and 20k rows (the same ratio; SQLite under the race
// detector builds 200k rows slowly, and 40k took 80 s on two busy cores),
// the slow run (FORMSYNC_SLOW_TESTS=1) 10k and 200k. It reads the
// process's I/O counters, so it never runs in parallel.
func TestIdleRunReadsStayBounded(t *testing.T) {
	n1, n2 := 1_000, 20_000
	if enginetest.SlowTests() {
		n1, n2 = 10_000, 200_000
	}
	small, large := idleRead(t, n1), idleRead(t, n2)
	t.Logf("idle run read %d bytes at %d rows, %d bytes at %d rows", small, n1, large, n2)
	if large > 3*small+64<<10 {
		t.Errorf("an idle run read %d bytes at %d rows against %d at %d: it grows with the table", large, n2, small, n1)
	}
}
