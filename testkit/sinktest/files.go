package sinktest

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
)

// runFiles adds the checks of sink.FileKeeper to Run: with has, every
// promise of FileRows, RecordFiles and NamedDigests; without, that the
// sink is not one.
func runFiles(run func(string, func(*testing.T, Sink)), has bool) {
	run("OptionalFileKeeper", func(t *testing.T, s Sink) { testFileKeeper(t, s, has) })
	if !has {
		return
	}
	run("FilesRecordedThenRead", testFilesRecorded)
	run("FilesReplacedByKey", testFilesReplaced)
	run("FilesOfRowsNotStoredDropped", testFilesRowNotStored)
	run("FilesForgottenWithTheirRow", testFilesForget)
	run("FilesRemovedWithTheFormsRows", testFilesRemove)
	run("FileRowsWhichAndInWhatOrder", testFileRowsOrder)
	run("FilesNamedDigests", testFilesNamedDigests)
	run("FilesFollowRekeyAndTwins", testFilesRekey)
}

// testFileKeeper: a sink said to keep files (sinktest.KeepsFiles) is a
// sink.FileKeeper, and one not said to is not.
func testFileKeeper(t *testing.T, s Sink, has bool) {
	k, err := sink.Optional{Sink: s}.FileKeeper()
	switch {
	case !has && !errors.Is(err, errors.ErrUnsupported):
		t.Fatalf("a sink not said to keep files (sinktest.KeepsFiles) is a FileKeeper (%T, %v); want errors.ErrUnsupported", k, err)
	case has && err != nil:
		t.Fatalf("a sink said to keep files (sinktest.KeepsFiles) is not a FileKeeper: %v", err)
	}
}

// fileRow builds a row with files the way the engine does.
func fileRow(t testing.TB, formID string, id *int64, at time.Time, fields, files string) sink.Row {
	t.Helper()
	r, err := sink.NewRow(formID, id, at, false, json.RawMessage(fields), json.RawMessage(files))
	if err != nil {
		t.Fatal(err)
	}
	r.Raw = rawOf(r)
	return r
}

// filesOf is a files array naming urls.
func filesOf(urls ...string) string {
	var files []map[string]any
	for i, u := range urls {
		files = append(files, map[string]any{"name": "f" + string(rune('a'+i)), "url": u, "size": 100 + i})
	}
	b, _ := json.Marshal(files)
	return string(b)
}

// Files of the tests, and digests.
const (
	urlA = "https://files.example/uploads/a.png"
	urlB = "https://files.example/uploads/b.pdf"
	urlC = "https://files.example/uploads/c.txt"

	digest1 = "1111111111111111111111111111111111111111111111111111111111111111"
	digest2 = "2222222222222222222222222222222222222222222222222222222222222222"
	digest3 = "3333333333333333333333333333333333333333333333333333333333333333"
)

// storedCopy is the copy of a file stored with digest, recorded at t0
// plus minutes.
func storedCopy(r sink.Row, url, digest string, minutes int) sink.FileCopy {
	at := t0.Add(time.Duration(minutes) * time.Minute)
	return sink.FileCopy{
		FormID: r.FormID, SubmissionKey: r.SubmissionKey, URL: url,
		SHA256: digest, ObjectURI: "gs://bucket/formsync/" + digest, Size: 1234, ContentType: "image/png",
		StoredAt: at, RecordedAt: at.Add(time.Second),
	}
}

// failedCopy is the copy of a file not stored, for why.
func failedCopy(r sink.Row, url, why string, minutes int) sink.FileCopy {
	return sink.FileCopy{
		FormID: r.FormID, SubmissionKey: r.SubmissionKey, URL: url, Reason: why,
		RecordedAt: t0.Add(time.Duration(minutes) * time.Minute),
	}
}

// fileKeeper is the sink as a FileKeeper.
func fileKeeper(t *testing.T, s Sink) sink.FileKeeper {
	t.Helper()
	k, err := sink.Optional{Sink: s}.FileKeeper()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func record(t *testing.T, k sink.FileKeeper, copies ...sink.FileCopy) {
	t.Helper()
	if err := k.RecordFiles(t.Context(), copies); err != nil {
		t.Fatalf("RecordFiles: %v", err)
	}
}

func fileRows(t *testing.T, k sink.FileKeeper, formIDs ...string) []sink.FileRow {
	t.Helper()
	got, err := k.FileRows(t.Context(), formIDs, time.Time{})
	if err != nil {
		t.Fatalf("FileRows(%q): %v", formIDs, err)
	}
	return got
}

// asFileRow is what FileRows gives of a stored row with copies.
func asFileRow(r sink.Row, copies ...sink.FileCopy) sink.FileRow {
	return sink.FileRow{FormID: r.FormID, SubmissionKey: r.SubmissionKey, CreatedAt: r.CreatedAt,
		Deleted: !r.DeletedAt.IsZero(), Files: r.Files, Copies: copies}
}

// noCopiesAlike makes a nil and an empty list of copies equal.
var noCopiesAlike = cmp.Comparer(func(a, b []sink.FileCopy) bool {
	return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b)
})

func checkFileRows(t *testing.T, k sink.FileKeeper, formIDs []string, want ...sink.FileRow) {
	t.Helper()
	got := fileRows(t, k, formIDs...)
	if diff := cmp.Diff(want, got, noCopiesAlike); diff != "" {
		t.Errorf("FileRows(%q) (-want +got):\n%s", formIDs, diff)
	}
}

// named is the digests NamedDigests says some copy names.
func named(t *testing.T, k sink.FileKeeper, digests ...string) []string {
	t.Helper()
	got, err := k.NamedDigests(t.Context(), digests)
	if err != nil {
		t.Fatalf("NamedDigests: %v", err)
	}
	var out []string
	for d, ok := range got {
		if ok {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func checkNamed(t *testing.T, k sink.FileKeeper, digests []string, want ...string) {
	t.Helper()
	if got := named(t, k, digests...); !slices.Equal(got, want) {
		t.Errorf("NamedDigests(%d digests) names %q, want %q", len(digests), got, want)
	}
}

func testFilesRecorded(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	a1 := fileRow(t, "a", ID(1), t0, `{"x":"1"}`, filesOf(urlB, urlA))
	a2 := fileRow(t, "a", ID(2), t0.Add(time.Second), `{"x":"2"}`, filesOf(urlC))
	b1 := fileRow(t, "b", ID(1), t0, `{"y":"1"}`, filesOf(urlA))
	f.commit(map[string][]sink.Row{"a": {a1, a2}, "b": {b1}})
	checkFileRows(t, k, nil, asFileRow(a1), asFileRow(a2), asFileRow(b1))

	// Recorded out of URL order, in two calls.
	a1B := failedCopy(a1, urlB, sink.FileFailed, 5)
	a1A := storedCopy(a1, urlA, digest1, 6)
	b1A := storedCopy(b1, urlA, digest2, 7)
	b1A.Size, b1A.ContentType = 0, "" // an empty file, of no type given
	record(t, k, a1B)
	record(t, k, b1A, a1A)
	checkFileRows(t, k, nil, asFileRow(a1, a1A, a1B), asFileRow(a2), asFileRow(b1, b1A))
	checkFileRows(t, k, []string{"b"}, asFileRow(b1, b1A))
	checkFileRows(t, k, []string{"a", "never-synced"}, asFileRow(a1, a1A, a1B), asFileRow(a2))
	checkFileRows(t, k, []string{"never-synced"})

	// A copy recorded without its time is recorded at the sink's, in
	// UTC to the microsecond.
	untimed := failedCopy(a2, urlC, sink.FileExpired, 0)
	untimed.RecordedAt = time.Time{}
	record(t, k, untimed)
	got := fileRows(t, k, "a")
	if len(got) != 2 || len(got[1].Copies) != 1 {
		t.Fatalf("FileRows(a) after a copy of row 2: %+v", got)
	}
	at := got[1].Copies[0].RecordedAt
	if at.IsZero() || at.Location() != time.UTC || !at.Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("a copy recorded without its time reads back recorded at %v, want the sink's time in UTC to the microsecond", at)
	}
	untimed.RecordedAt = at
	if diff := cmp.Diff(untimed, got[1].Copies[0]); diff != "" {
		t.Errorf("copy of row 2 (-want +got):\n%s", diff)
	}
	// Recording nothing is no error.
	record(t, k)
}

func testFilesReplaced(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	a1 := fileRow(t, "a", ID(1), t0, `{}`, filesOf(urlA, urlB))
	f.commit(map[string][]sink.Row{"a": {a1}})
	record(t, k, failedCopy(a1, urlA, sink.FileFailed, 1), storedCopy(a1, urlB, digest2, 1))
	// The retry stores it; the other file's copy stays.
	now := storedCopy(a1, urlA, digest1, 2)
	record(t, k, now)
	checkFileRows(t, k, nil, asFileRow(a1, now, storedCopy(a1, urlB, digest2, 1)))
	checkNamed(t, k, []string{digest1, digest2}, digest1, digest2)
	// Stored, then found expired (the store lost it, a refetch failed):
	// the digest is named no more.
	gone := failedCopy(a1, urlA, sink.FileExpired, 3)
	record(t, k, gone)
	checkFileRows(t, k, nil, asFileRow(a1, gone, storedCopy(a1, urlB, digest2, 1)))
	checkNamed(t, k, []string{digest1, digest2}, digest2)
}

func testFilesRowNotStored(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	a1 := fileRow(t, "a", ID(1), t0, `{}`, filesOf(urlA))
	a2 := fileRow(t, "a", ID(2), t0, `{}`, filesOf(urlA))
	f.commit(map[string][]sink.Row{"a": {a1}})
	ghostForm := a1
	ghostForm.FormID = "never-synced"
	record(t, k, storedCopy(a2, urlA, digest2, 1), storedCopy(a1, urlA, digest1, 1), storedCopy(ghostForm, urlA, digest3, 1))
	checkFileRows(t, k, nil, asFileRow(a1, storedCopy(a1, urlA, digest1, 1)))
	checkFileRows(t, k, []string{"never-synced"})
	checkNamed(t, k, []string{digest1, digest2, digest3}, digest1)
	// Its row stored later, it has no copy until one is recorded.
	f.commit(map[string][]sink.Row{"a": {a2}})
	checkFileRows(t, k, nil, asFileRow(a1, storedCopy(a1, urlA, digest1, 1)), asFileRow(a2))
}

func testFilesForget(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	r1 := fileRow(t, "a", ID(1), t0, `{"email":"ada@example.com"}`, filesOf(urlA))
	r2 := fileRow(t, "a", ID(2), t0.Add(time.Second), `{"email":"bob@example.com"}`, filesOf(urlA, urlB))
	f.commit(map[string][]sink.Row{"a": {r1, r2}})
	// Both submissions carry the same file (digest1); r2 one more.
	record(t, k, storedCopy(r1, urlA, digest1, 1), storedCopy(r2, urlA, digest1, 1), storedCopy(r2, urlB, digest2, 1))
	checkNamed(t, k, []string{digest1, digest2}, digest1, digest2)

	f.mustCommitOne("a", nil, func(fc *sink.FormCommit) {
		fc.Forget = []string{r2.SubmissionKey}
		fc.State.Forgotten = forgotten(t, fc.State, r2)
	})
	checkFileRows(t, k, nil, asFileRow(r1, storedCopy(r1, urlA, digest1, 1)))
	checkNamed(t, k, []string{digest1, digest2}, digest1)
	// A copy fetched before the forget and recorded after it is dropped.
	record(t, k, storedCopy(r2, urlB, digest2, 2))
	checkNamed(t, k, []string{digest1, digest2}, digest1)
	checkFileRows(t, k, nil, asFileRow(r1, storedCopy(r1, urlA, digest1, 1)))

	// The last row naming digest1 forgotten too: nothing names it.
	f.mustCommitOne("a", nil, func(fc *sink.FormCommit) {
		fc.Forget = []string{r1.SubmissionKey}
		fc.State.Forgotten = forgotten(t, fc.State, r1)
	})
	checkFileRows(t, k, nil)
	checkNamed(t, k, []string{digest1, digest2})
}

func testFilesRemove(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	a1 := fileRow(t, "a", ID(1), t0, `{}`, filesOf(urlA))
	b1 := fileRow(t, "b", ID(1), t0, `{}`, filesOf(urlA))
	f.commit(map[string][]sink.Row{"a": {a1}, "b": {b1}})
	record(t, k, storedCopy(a1, urlA, digest1, 1), storedCopy(b1, urlA, digest2, 1))

	// The state alone: the rows stay, and their copies with them.
	f.remove(sink.Removal{FormID: "a", Revision: f.state("a").Revision})
	checkFileRows(t, k, nil, asFileRow(a1, storedCopy(a1, urlA, digest1, 1)), asFileRow(b1, storedCopy(b1, urlA, digest2, 1)))
	// A dry run removes nothing.
	f.remove(sink.Removal{FormID: "a", Rows: true, DryRun: true})
	checkNamed(t, k, []string{digest1, digest2}, digest1, digest2)
	// The rows: their copies go, the other form's stay.
	f.remove(sink.Removal{FormID: "a", Rows: true})
	checkFileRows(t, k, nil, asFileRow(b1, storedCopy(b1, urlA, digest2, 1)))
	checkNamed(t, k, []string{digest1, digest2}, digest2)
	// Synced again from nothing, the row has no copy.
	f.commit(map[string][]sink.Row{"a": {a1}})
	checkFileRows(t, k, []string{"a"}, asFileRow(a1))
}

// testFileRowsOrder: FileRows leaves out rows whose files name nothing
// ([] or {}), includes rows marked deleted upstream, flagged, and orders
// by form, created_at, then submission key, whatever the keys' order.
func testFileRowsOrder(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	later := fileRow(t, "a", ID(1), t0.Add(time.Hour), `{}`, filesOf(urlA))
	tie2 := fileRow(t, "a", ID(20), t0, `{}`, filesOf(urlB))
	tie1 := fileRow(t, "a", ID(3), t0, `{}`, `{"photo":{"name":"p.jpg","url":"`+urlC+`"}}`)
	gone := fileRow(t, "a", nil, t0.Add(time.Minute), `{"n":"gone"}`, filesOf(urlC))
	noFiles := fileRow(t, "a", ID(5), t0, `{"n":"5"}`, ``)
	emptyArray := fileRow(t, "a", ID(6), t0, `{"n":"6"}`, `[]`)
	emptyObject := fileRow(t, "a", ID(7), t0, `{"n":"7"}`, `{}`)
	b1 := fileRow(t, "b", ID(1), t0.Add(-time.Hour), `{}`, filesOf(urlA))
	a0 := fileRow(t, "0", ID(1), t0.Add(2*time.Hour), `{}`, filesOf(urlA))
	f.commit(map[string][]sink.Row{
		"a": {later, tie2, tie1, gone, noFiles, emptyArray, emptyObject},
		"b": {b1}, "0": {a0},
	})
	// A reconcile that no longer serves gone marks it deleted.
	_, at := f.mustCommitOne("a", []sink.Row{later, tie2, tie1, noFiles, emptyArray, emptyObject}, reconcile)
	gone = deleted(gone, at)
	record(t, k, storedCopy(gone, urlC, digest3, 1), storedCopy(tie1, urlC, digest1, 1))
	checkFileRows(t, k, nil,
		asFileRow(a0),
		asFileRow(tie2), asFileRow(tie1, storedCopy(tie1, urlC, digest1, 1)), asFileRow(gone, storedCopy(gone, urlC, digest3, 1)), asFileRow(later),
		asFileRow(b1))
	checkFileRows(t, k, []string{"b", "0"}, asFileRow(a0), asFileRow(b1))
	// Since: rows created at or after it, by form.
	since, err := k.FileRows(t.Context(), []string{"a", "b"}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sink.FileRow{asFileRow(gone, storedCopy(gone, urlC, digest3, 1)), asFileRow(later)}, since, noCopiesAlike); diff != "" {
		t.Errorf("FileRows since %s (-want +got):\n%s", t0.Add(time.Minute), diff)
	}
	// A deleted row's copies are named: the row is stored still.
	checkNamed(t, k, []string{digest3}, digest3)
}

func testFilesNamedDigests(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	a1 := fileRow(t, "a", ID(1), t0, `{}`, filesOf(urlA, urlB))
	b1 := fileRow(t, "b", ID(1), t0, `{}`, filesOf(urlA, urlB))
	f.commit(map[string][]sink.Row{"a": {a1}, "b": {b1}})
	checkNamed(t, k, []string{digest1})
	checkNamed(t, k, nil)
	record(t, k, storedCopy(a1, urlA, digest1, 1), failedCopy(a1, urlB, sink.FileTooLarge, 1),
		storedCopy(b1, urlA, digest2, 1), storedCopy(b1, urlB, digest2, 1))
	checkNamed(t, k, []string{digest3, digest2, digest1, digest2}, digest1, digest2)
	checkNamed(t, k, []string{digest3})
	checkNamed(t, k, nil)
	got, err := k.NamedDigests(t.Context(), []string{digest1, digest3})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, map[string]bool{digest1: true}) && !maps.Equal(got, map[string]bool{digest1: true, digest3: false}) {
		t.Errorf("NamedDigests(digest1, digest3) = %v, want digest1 alone named", got)
	}
}

// testFilesRekey: a row stored by content (the older response form) and
// re-keyed to its id takes its copies along, or loses them (the worker
// then fetches its files again); they never stay under the old key. A
// content-keyed twin removed because its id is stored takes its copies
// away.
func testFilesRekey(t *testing.T, s Sink) {
	f := newFixture(t, s)
	k := fileKeeper(t, s)
	old := fileRow(t, "f", nil, t0, `{"a":"1"}`, filesOf(urlA))
	f.commit(map[string][]sink.Row{"f": {old}})
	oldCopy := storedCopy(old, urlA, digest1, 1)
	record(t, k, oldCopy)
	byID := fileRow(t, "f", ID(101), t0.Truncate(time.Millisecond), `{"a":"1"}`, filesOf(urlA))
	f.commit(map[string][]sink.Row{"f": {byID}})
	rekeyed := byID
	rekeyed.CreatedAt = old.CreatedAt
	moved := oldCopy
	moved.SubmissionKey = byID.SubmissionKey
	got := fileRows(t, k)
	switch {
	case cmp.Equal([]sink.FileRow{asFileRow(rekeyed, moved)}, got):
		checkNamed(t, k, []string{digest1}, digest1)
	case cmp.Equal([]sink.FileRow{asFileRow(rekeyed)}, got, noCopiesAlike):
		checkNamed(t, k, []string{digest1})
	default:
		t.Errorf("FileRows after a re-key: %+v; want the row under its id, with its copies or without", got)
	}

	// Stored by id, then by content: two rows, each with its copy.
	at3 := t0.Truncate(time.Millisecond)
	id2 := fileRow(t, "g", ID(102), at3, `{"a":"2"}`, filesOf(urlB))
	twin := fileRow(t, "g", nil, at3, `{"a":"2"}`, filesOf(urlB))
	f.commit(map[string][]sink.Row{"g": {id2}})
	f.commit(map[string][]sink.Row{"g": {twin}})
	record(t, k, storedCopy(id2, urlB, digest2, 1), storedCopy(twin, urlB, digest3, 1))
	checkNamed(t, k, []string{digest2, digest3}, digest2, digest3)
	// Read with its id again: the twin goes, and its copy with it.
	f.commit(map[string][]sink.Row{"g": {id2}})
	checkFileRows(t, k, []string{"g"}, asFileRow(id2, storedCopy(id2, urlB, digest2, 1)))
	checkNamed(t, k, []string{digest2, digest3}, digest2)
}
