// Package sinktest is the contract every formsync sink passes. Run feeds a
// sink hand-built commits and checks what it promises, whatever stores the
// rows: an insert and an identical re-commit (0 inserted, 0 updated);
// update counts, a later version replacing every column (created_at too,
// to the millisecond); re-keying rows loaded from the older response form
// when ids appear, and removing a content-keyed twin; row_count equal to
// the rows stored; the state round trip (nil and empty kept apart); a
// state-only commit; the same form twice in one commit; a failure inside
// the sink's own commit (a spool that cannot be read to the end) and a
// cancelled commit leaving nothing written; the optimistic-concurrency
// check (a stale revision is refused with *sink.ConflictError, nothing
// written); and exact numbers and raw objects.
//
// It drives no engine, client or simulator: what the engine does with the
// API is tested once, in package worker, on the in-memory reference sink
// (internal/testkit/memsink), which passes this contract too.
//
// A sink's test calls
//
//	func TestContract(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) sinktest.Sink { return openMySink(t) })
//	}
//
// SQLite, the BigQuery fake, the in-memory sink and, when configured, real
// BigQuery run it.
package sinktest
