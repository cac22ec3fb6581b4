// Package sink declares what a formsync destination is ([Sink]) and what
// it receives: a [Commit] carrying, per form, the new state.Form and the
// [Spool] that staged the run's rows on disk as NDJSON, each row a [Row].
//
// The worker turns each decoded submission into a Row ([NewRow] derives
// its key: the id, or a [ContentKey] for a submission without one),
// appends it to the form's spool, and hands the spools and states to the
// sink in Commits: one at the end of the run, and before it one per part
// of a large read when the sink's [Tuning] asks for parts. The sink
// applies each Commit all at once (rows upserted on form_id +
// submission_key, states written) or not at all:
//
//	sp, _ := sink.NewSpool(tmpDir)
//	row, _ := sink.NewRow("contact", &id, createdAt, false, fields, files)
//	_ = sp.Append(row)
//	_ = sp.Finish()
//	res, err := dst.Commit(ctx, &sink.Commit{Forms: []sink.FormCommit{{State: st, Rows: sp}}})
//	// errors.Is(err, sink.ErrStateConflict): another process committed the form
//
// What every sink must do is [Sink]; what a sink may do beyond it (a
// [Tuner], a [Purger]) is found through [Optional], which answers
// errors.ErrUnsupported for an ability the sink has not. The destinations
// are sink/sqlite and sink/bigquery; every one passes the contract in
// testkit/sinktest. docs/design.md says more.
package sink
