// Package sinktest is the contract every formsync sink must pass. Run drives
// the real sync engine, the real API client and the API simulator (on
// loopback) against a sink, and checks the table the sink ends up with
// against the simulator's submissions: a first sync loads everything, a sync
// with nothing new costs the minimum number of requests and changes nothing,
// new submissions cost at most one request more than the pages they fill,
// ties, pages moving while they are read and a form switching response forms
// neither lose nor duplicate a row.
//
// A sink's test calls
//
//	func TestContract(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) sinktest.Sink { return openMySink(t) })
//	}
//
// The same suite runs against SQLite, the BigQuery fake and, when configured,
// real BigQuery.
package sinktest
