package sqlite

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
)

// benchSpool stages n new rows of one form with ids from first on.
func benchSpool(b *testing.B, formID string, first int64, n int) *sink.Spool {
	b.Helper()
	sp, err := sink.NewSpool(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := range int64(n) {
		id := first + i
		fields := fmt.Sprintf(`{"email":"user%d@example.com","message":"hello from a fairly ordinary form submission number %d","name":"User %d"}`, id, id, id)
		r := row(b, formID, &id, t0.Add(time.Duration(id)*time.Millisecond), false, fields)
		if err := sp.Append(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := sp.Finish(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sp.Remove() })
	return sp
}

func benchCommit(b *testing.B, rowsPerOp int) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	spools := make([]*sink.Spool, b.N)
	for i := range spools {
		spools[i] = benchSpool(b, "bench", int64(i*rowsPerOp), rowsPerOp)
	}
	var ms runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		st := stateOf("bench", "email", "message", "name")
		st.Revision = int64(i) // each commit is the form's next revision
		res, err := s.Commit(b.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st, Rows: spools[i]}}})
		if err != nil {
			b.Fatal(err)
		}
		if res["bench"].Inserted != int64(rowsPerOp) {
			b.Fatalf("inserted %d, want %d", res["bench"].Inserted, rowsPerOp)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rowsPerOp), "ns/row")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}

// commitFresh commits forms into a new file, timing the commit only.
func commitFresh(b *testing.B, forms []sink.FormCommit) sink.Result {
	b.StopTimer()
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	res, err := s.Commit(b.Context(), &sink.Commit{SyncedAt: t0, Forms: forms})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	s.Close()
	b.StartTimer()
	return res
}

// BenchmarkCommit commits 10,000 new rows of one form per op into a growing
// table.
func BenchmarkCommit(b *testing.B) { benchCommit(b, 10_000) }

// BenchmarkCommitMillion commits one spool of 1,000,000 rows per op
// (run it with -benchtime=1x).
func BenchmarkCommitMillion(b *testing.B) { benchCommit(b, 1_000_000) }

// benchRow is submission id of form in the newer response form, with its
// raw JSON, as the commit benchmarks stage it.
func benchRow(b *testing.B, form string, id int64) sink.Row {
	fields := fmt.Sprintf(`{"email":"user%d@example.com","message":"hello from a fairly ordinary form submission number %d","name":"User %d"}`, id, id, id)
	r := row(b, form, &id, t0.Add(time.Duration(id)*time.Millisecond), false, fields)
	r.Raw = fmt.Sprintf(`{"id":%d,"created_at":%q,"is_spam":false,"fields":%s,"files":[]}`, id, r.CreatedAt.Format(time.RFC3339Nano), fields)
	return r
}

// BenchmarkCommitNewestFirst commits 4 forms of 250,000 new rows each, their
// ids descending as a first sync reads them newest first, every row with its
// raw JSON, into a fresh file per op (run it with -benchtime=1x).
func BenchmarkCommitNewestFirst(b *testing.B) {
	const forms, perForm = 4, 250_000
	spools := make([]*sink.Spool, forms)
	for f := range spools {
		sp, err := sink.NewSpool(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		for i := range int64(perForm) {
			r := benchRow(b, fmt.Sprintf("form%d", f), int64(forms*perForm)-(i*forms+int64(f)))
			if err := sp.Append(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := sp.Finish(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sp.Remove() })
		spools[f] = sp
	}
	var commits []sink.FormCommit
	for f, sp := range spools {
		commits = append(commits, sink.FormCommit{State: stateOf(fmt.Sprintf("form%d", f), "email", "message", "name"), Rows: sp})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		commitFresh(b, commits)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*forms*perForm), "ns/row")
}

// BenchmarkCommitContentKeyed commits one form of 300,000 new rows keyed by
// content (the older response form: no ids, hash keys), each with its raw
// JSON, staged newest first, into a fresh file per op (run it with
// -benchtime=1x): the spool sorts them by key as they are staged, and the
// commit, a first load, inserts them in key order and builds the created_at
// index again at its end.
func BenchmarkCommitContentKeyed(b *testing.B) {
	const n = 300_000
	sp, err := sink.NewSpool(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sp.Remove() })
	for i := range n {
		fields := fmt.Sprintf(`{"email":"user%d@example.com","message":"hello from a fairly ordinary form submission number %d","name":"User %d"}`, i, i, i)
		r := row(b, "bench", nil, t0.Add(-time.Duration(i)*time.Second), false, fields)
		r.Raw = fmt.Sprintf(`{"created_at":%q,"is_spam":false,"fields":%s,"files":[]}`, r.CreatedAt.Format(time.RFC3339Nano), fields)
		if err := sp.Append(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := sp.Finish(); err != nil {
		b.Fatal(err)
	}
	forms := []sink.FormCommit{{State: stateOf("bench", "email", "message", "name"), Rows: sp}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res := commitFresh(b, forms); res["bench"].Inserted != n {
			b.Fatalf("inserted %d, want %d", res["bench"].Inserted, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}

// BenchmarkCommitAgain commits again, per op, the 100,000 rows a form
// holds, unchanged: plainly, as a lookback re-reads rows, and as a
// reconcile, which also records every key and marks the rows not staged
// (here the 1,000 left out of the spool, on the first op).
func BenchmarkCommitAgain(b *testing.B) {
	const stored, left = 100_000, 1_000
	for _, reconcile := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "reconcile"}[reconcile]
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			st := stateOf("bench", "email", "message", "name")
			if _, err := s.Commit(b.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st, Rows: benchSpool(b, "bench", 0, stored)}}}); err != nil {
				b.Fatal(err)
			}
			st.Revision++
			again := benchSpool(b, "bench", left, stored-left)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Commit(b.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st, Rows: again, Reconcile: reconcile}}}); err != nil {
					b.Fatal(err)
				}
				st.Revision++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(stored-left)), "ns/row")
		})
	}
}

// BenchmarkCommitVsEngine sets a first load committed in parts, as a sync
// commits a newest-first form while it reads (100 commits of 10,000 rows,
// ids descending from part to part), beside SQLite's own cost of storing
// the same rows: one prepared INSERT per row, one transaction per part, on
// the same file layout and pragmas, the rows handed over from memory.
// "engine-no-raw" stores them without their raw JSON. Each op is a fresh
// file; run it with -benchtime 3x.
func BenchmarkCommitVsEngine(b *testing.B) {
	const parts, perPart = 100, 10_000
	partRows := func(p int) []sink.Row {
		rows := make([]sink.Row, 0, perPart)
		for i := range int64(perPart) {
			rows = append(rows, benchRow(b, "bench", int64((parts-p)*perPart)-i))
		}
		return rows
	}
	fresh := func(b *testing.B) *Sink {
		b.Helper()
		s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*parts*perPart), "ns/row")
	}

	b.Run("commit", func(b *testing.B) {
		spools := make([]*sink.Spool, parts)
		for p := range spools {
			sp, err := sink.NewSpool(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range partRows(p) {
				if err := sp.Append(r); err != nil {
					b.Fatal(err)
				}
			}
			if err := sp.Finish(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { sp.Remove() })
			spools[p] = sp
		}
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			s := fresh(b)
			b.StartTimer()
			st := stateOf("bench", "email", "message", "name")
			for p, sp := range spools {
				st.Revision = int64(p)
				if _, err := s.Commit(b.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st, Rows: sp}}}); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})

	for _, withRaw := range []bool{true, false} {
		name := map[bool]string{true: "engine", false: "engine-no-raw"}[withRaw]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := fresh(b)
				for p := range parts {
					rows := partRows(p)
					b.StartTimer()
					tx, err := s.db.BeginTx(b.Context(), nil)
					if err != nil {
						b.Fatal(err)
					}
					ins, err := tx.Prepare(insertRowSQL)
					if err != nil {
						b.Fatal(err)
					}
					// Ascending keys, as the commit reads a newest-first
					// spool backwards.
					for i := len(rows) - 1; i >= 0; i-- {
						r := &rows[i]
						var raw any
						if withRaw {
							raw = r.Raw
						}
						if _, err := ins.Exec(r.FormID, *r.SubmissionID, r.SubmissionKey, r.CreatedAt.UTC().Format(sink.TimeLayout), 0, r.Fields, r.Files, raw, "2026-03-01T12:00:00.000000Z"); err != nil {
							b.Fatal(err)
						}
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
				}
				b.StartTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
	}
}
