package sink

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// contentRows are n rows keyed by content; every 10th row repeats the key
// of the row three before it, with is_spam flipped, as a submission read
// twice is. Some rows are longer than a sort run.
func contentRows(n int) []Row {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows []Row
	for i := range n {
		if i%10 == 9 {
			r := rows[i-3]
			r.IsSpam = !r.IsSpam
			rows = append(rows, r)
			continue
		}
		pad := strings.Repeat("p", (i*7919)%700)
		if i%97 == 50 {
			pad = strings.Repeat("l", 3*sortRunBytes) // longer than a run
		}
		fields := fmt.Sprintf(`{"n":%d,"p":"%s","q":"\"quoted\" \\ %d"}`, i, pad, i)
		created := at.Add(-time.Duration(i) * time.Second)
		key := ContentKey(created, fields, "[]")
		rows = append(rows, Row{FormID: "f", SubmissionKey: key, ContentKey: key, CreatedAt: created, Fields: fields, Files: "[]", Raw: `{"x":1}`})
	}
	return rows
}

// stage stages rows in a new spool in dir that sorts rows keyed by
// content.
func stage(t *testing.T, dir string, rows []Row) *Spool {
	t.Helper()
	s, err := NewSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.SortContentKeys()
	t.Cleanup(func() { s.Remove() })
	for _, r := range rows {
		if err := s.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	return s
}

// contentSpool stages contentRows(n) in dir.
func contentSpool(t *testing.T, dir string, n int) (*Spool, []Row) {
	t.Helper()
	rows := contentRows(n)
	return stage(t, dir, rows), rows
}

// withSortRun sorts in runs of n bytes for the rest of the test.
func withSortRun(t *testing.T, n int) {
	old := sortRunBytes
	sortRunBytes = n
	t.Cleanup(func() { sortRunBytes = old })
}

func TestRowsByKeyIsAStableSort(t *testing.T) {
	for _, run := range []int{sortRunBytes, 8 << 10, 1 << 10} {
		for _, n := range []int{0, 1, 2, 9, 10, 700} {
			t.Run(fmt.Sprintf("run=%d/rows=%d", run, n), func(t *testing.T) {
				withSortRun(t, run)
				dir := t.TempDir()
				s, staged := contentSpool(t, dir, n)
				if s.OnlyContentKeys() != (n > 0) {
					t.Errorf("OnlyContentKeys = %v", s.OnlyContentKeys())
				}
				want := slices.Clone(staged)
				slices.SortStableFunc(want, func(a, b Row) int { return cmp.Compare(a.SubmissionKey, b.SubmissionKey) })
				var got []Row
				for r, err := range s.RowsByKey() {
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, r)
				}
				if len(got) != len(want) {
					t.Fatalf("%d rows, want %d", len(got), len(want))
				}
				for i := range want {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Fatalf("row %d: key %s spam %v, want key %s spam %v", i, got[i].SubmissionKey, got[i].IsSpam, want[i].SubmissionKey, want[i].IsSpam)
					}
				}
				onlySpool(t, dir, s)
			})
		}
	}
}

func TestRowsByKeyStoppedEarlyLeavesNoFile(t *testing.T) {
	withSortRun(t, 4<<10)
	dir := t.TempDir()
	s, _ := contentSpool(t, dir, 300)
	n := 0
	for _, err := range s.RowsByKey() {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 5 {
			break
		}
	}
	onlySpool(t, dir, s)
}

func TestRowsByKeyReportsACorruptLine(t *testing.T) {
	withSortRun(t, 4<<10)
	dir := t.TempDir()
	s, _ := contentSpool(t, dir, 100)
	b, err := os.ReadFile(s.f.Name())
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(string(b), `"created_at":"2`)
	f, err := os.OpenFile(s.f.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("X"), int64(i+len(`"created_at":"`)))
	f.Close()
	var last error
	for _, err := range s.RowsByKey() {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "in key order") {
		t.Errorf("error %v, want one about decoding in key order", last)
	}
}

// Rows keyed by content staged before the first row with an id are sorted
// by key in runs; the rows with ids, and every row after the first of
// them, keep the order they were staged in.
func TestRowsKeepsRowsWithIDsInOrder(t *testing.T) {
	withSortRun(t, 4<<10)
	content := contentRows(200)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tail []Row
	for i := range 50 {
		r := content[i]
		if i%2 == 0 {
			id := int64(1000 - i)
			r = Row{FormID: "f", SubmissionID: &id, SubmissionKey: fmt.Sprint(id), ContentKey: r.ContentKey, CreatedAt: at, Fields: "{}", Files: "[]"}
		}
		tail = append(tail, r)
	}
	s := stage(t, t.TempDir(), slices.Concat(content, tail))
	if s.OnlyContentKeys() {
		t.Error("OnlyContentKeys with ids staged")
	}
	var got []Row
	for r, err := range s.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 250 {
		t.Fatalf("%d rows, want 250", len(got))
	}
	if !reflect.DeepEqual(got[200:], tail) {
		t.Error("rows staged from the first id on are not in the order staged")
	}
	head := slices.Clone(got[:200])
	slices.SortFunc(head, func(a, b Row) int { return cmp.Compare(a.SubmissionKey, b.SubmissionKey) })
	want := slices.Clone(content)
	slices.SortFunc(want, func(a, b Row) int { return cmp.Compare(a.SubmissionKey, b.SubmissionKey) })
	for i := range want {
		if head[i].SubmissionKey != want[i].SubmissionKey {
			t.Fatalf("the rows keyed by content are not those staged: %s, want %s", head[i].SubmissionKey, want[i].SubmissionKey)
		}
	}
	for _, err := range s.RowsByKey() {
		if err == nil {
			t.Fatal("RowsByKey read a spool with ids")
		}
	}
}

func TestOnlyContentKeys(t *testing.T) {
	t.Parallel()
	s, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	s.SortContentKeys()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if s.OnlyContentKeys() || s.KeyOrdered() {
		t.Error("an empty spool holds only content keys")
	}
	s.Append(Row{FormID: "f", SubmissionKey: "c", CreatedAt: at, Fields: "{}", Files: "[]"})
	if !s.OnlyContentKeys() || !s.KeyOrdered() {
		t.Error("a row without id: not only content keys")
	}
	id := int64(7)
	s.Append(Row{FormID: "f", SubmissionID: &id, SubmissionKey: "7", CreatedAt: at, Fields: "{}", Files: "[]"})
	if s.OnlyContentKeys() || s.KeyOrdered() {
		t.Error("a row with an id: still only content keys")
	}
}

// A spool not asked to sort keeps rows keyed by content in the order they
// were staged, and cannot be read in key order.
func TestSpoolSortsOnlyWhenAsked(t *testing.T) {
	withSortRun(t, 4<<10)
	s, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	rows := contentRows(100)
	for _, r := range rows {
		if err := s.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	if !s.OnlyContentKeys() || s.KeyOrdered() {
		t.Errorf("OnlyContentKeys %v, KeyOrdered %v", s.OnlyContentKeys(), s.KeyOrdered())
	}
	var got []Row
	for r, err := range s.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Error("rows keyed by content not read back in the order staged")
	}
	for _, err := range s.RowsByKey() {
		if err == nil {
			t.Fatal("RowsByKey read a spool that was not sorted")
		}
	}
}

func TestWireKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line, key string
		ok        bool
	}{
		{`{"form_id":"f","submission_id":null,"submission_key":"abc","content_key":"abc"}`, "abc", true},
		{`{"form_id":"f\",\"submission_key\":\"x","submission_id":"1","submission_key":"1","content_key":""}`, "1", true},
		{`{"form_id":"f","submission_id":null,"submission_key":"a\"b","content_key":""}`, `a\"b`, true},
		{`{"form_id":"f","submission_id":null,"submission_key":"abc`, "", false},
		{`{"form_id":"f","key":"abc"}`, "", false},
	} {
		off, n, ok := wireKey([]byte(tc.line))
		if ok != tc.ok || ok && tc.line[off:off+n] != tc.key {
			t.Errorf("wireKey(%s) = %q, %v; want %q, %v", tc.line, tc.line[off:off+n], ok, tc.key, tc.ok)
		}
	}
}

// onlySpool fails the test unless the spool is the only file in dir: the
// runs of a sort are gone.
func onlySpool(t *testing.T, dir string, s *Spool) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 1 || names[0] != s.f.Name() {
		t.Errorf("files left in the spool's directory: %v", names)
	}
}

// A spool file cut short under its runs is an error, not fewer rows.
func TestRowsByKeyReportsATruncatedFile(t *testing.T) {
	withSortRun(t, 4<<10)
	s, _ := contentSpool(t, t.TempDir(), 100)
	if err := os.Truncate(s.f.Name(), s.Size()/2); err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range s.RowsByKey() {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "reading a sorted run") {
		t.Errorf("error %v, want one about reading a sorted run", last)
	}
}
