// Package worker is formsync's sync engine: it reads what is new in each
// form from the Forms API and commits it, with every form's new watermark,
// to a sink in atomic commits.
//
// Data flows from a [Source] (in practice a *formsapi.Client) through a
// page walker (package worker/pager) that detects each form's sort order and stops at the
// watermark, into one NDJSON spool per form on disk, and from there into
// the [Sink] in one commit for all forms (and, for a large read into a
// sink that asks for it, in parts before it, each moving no watermark).
// A form that fails keeps its
// watermark; the others commit. After the commit each form's stored rows
// are checked against the API's total.
//
//	client, _ := formsapi.New(formsapi.Config{BaseURL: url, Token: token})
//	db, _ := sqlite.Open(ctx, "formsync.db")
//	eng, _ := worker.New(client, db, worker.Config{Forms: []string{"contact"}})
//	rep, err := eng.Sync(ctx)      // one pass; rep.Forms says what each form did
//
// The same engine re-reads a form or a window of it ([Engine.Backfill]),
// marks rows deleted upstream ([Engine.Reconcile]) and erases submissions
// on request ([Engine.Forget]). It declares the part of sink.Sink it uses
// ([Sink]) and finds what a sink may do beyond it through sink.Optional;
// the sinks live under sink/.
//
// Each form's read is a value the engine builds (formRun, read.go), owning
// what it uses: the Source, page size, lookback, clock, field policy,
// spool and parts; a backfill reads through the same value. The files
// follow the concerns: config.go, engine.go (the run), read.go and walk.go
// (a form's read), parts.go, commit.go (the commit and its merges),
// completeness.go, report.go, backfill.go, forget.go.
//
// The read algorithm, the commit and its merge on a concurrent update, and
// the completeness check are described in docs/design.md.
package worker
