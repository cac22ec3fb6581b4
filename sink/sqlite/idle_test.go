package sqlite

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sinktest"
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
	const batch = 20_000
	for first := 0; first < n; first += batch {
		sp, err := sink.NewSpool(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for i := first; i < min(first+batch, n); i++ {
			id := int64(i + 1)
			r := row(t, "f", &id, t0.Add(time.Duration(i)*time.Second), false, fmt.Sprintf(`{"email":"user%d@example.com","message":"an ordinary submission"}`, i))
			if err := sp.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		sp.Finish()
		commit(t, s, sink.FormCommit{State: stateOf("f", "email", "message"), Rows: sp})
		sp.Remove()
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
// the form: 10k and 200k rows cost the same order of reads.
func TestIdleRunReadsStayBounded(t *testing.T) {
	small, large := idleRead(t, 10_000), idleRead(t, 200_000)
	t.Logf("idle run read %d bytes at 10k rows, %d bytes at 200k rows", small, large)
	if large > 3*small+64<<10 {
		t.Errorf("an idle run read %d bytes at 200k rows against %d at 10k: it grows with the table", large, small)
	}
}
