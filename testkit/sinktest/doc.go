// Package sinktest is the contract every formsync sink passes: Run feeds a
// sink hand-built commits and checks what it promises, whatever stores
// the rows (inserts and identical re-commits, updates, re-keying, counts,
// the state round trip, failed and cancelled commits, stale revisions,
// exact numbers, reconcile marks, forget, remove and recount, and the
// copies of files a sink.FileKeeper keeps beside its rows). A sink
// with optional abilities (sink.Optional) is run with a flag for each:
//
//	func TestContract(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) sinktest.Sink { return openMySink(t) }, sinktest.Tunes)
//	}
//
// SQLite, the BigQuery fake, the in-memory sink and, when configured, real
// BigQuery run it. It drives no engine: what the engine does with the API
// is tested once, in package worker.
package sinktest
