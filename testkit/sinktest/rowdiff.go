package sinktest

import (
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formsync/formsync/sink"
)

// RowDiff is how got differs from want, as cmp.Diff reports it (-want
// +got), or "" when they are the same row. Every column is compared, times
// as instants; opts narrow the comparison (IgnoreColumns, CreatedAtTo).
// The tests of every sink and of the engine compare rows with it.
func RowDiff(want, got sink.Row, opts ...cmp.Option) string {
	return cmp.Diff(want, got, opts...)
}

// IgnoreColumns leaves the named fields of sink.Row out of a RowDiff.
func IgnoreColumns(names ...string) cmp.Option {
	return cmpopts.IgnoreFields(sink.Row{}, names...)
}

// CreatedAtTo compares created_at truncated to d: what a response form
// that carries fewer fractional digits can promise.
func CreatedAtTo(d time.Duration) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		f, ok := p.Last().(cmp.StructField)
		return ok && f.Name() == "CreatedAt"
	}, cmp.Comparer(func(a, b time.Time) bool { return a.Truncate(d).Equal(b.Truncate(d)) }))
}
