// Package config holds what the Config types of formsync's libraries
// (worker, worker/formsapi, sink/bigquery) share: FieldError,
// the one error type their Validate methods report a problem with, naming
// the field in the library's own words.
//
// It is a package of its own, importing nothing of formsync, so that every
// library can return a *FieldError and every caller can errors.As for it
// without an import cycle, and without a library that only checks its
// settings depending on one that syncs forms (worker) or stores sync state
// (state). A caller that sets the fields from something else (the command
// line binds each FORMSYNC_* variable to a field) turns Field back into
// its own name for the setting.
package config

import (
	"errors"
	"fmt"
)

// FieldError is one problem with one field of a library's Config.
// Validate methods join them (errors.Join), so that every problem is
// reported at once; Problems lists them back.
type FieldError struct {
	// Field is the name of the Config field, e.g. "PageSize".
	Field string
	// Err is the problem in words that read after the field's name and
	// value, e.g. "101 is outside 1..100". It may wrap a sentinel that
	// callers match with errors.Is.
	Err error
}

// Errorf returns a *FieldError for field, its problem formatted as by
// fmt.Errorf (so %w wraps).
func Errorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Problems flattens err, a Validate error (joined, possibly wrapped with a
// prefix such as "bigquery: invalid configuration: %w"), into its
// problems, in order; each is a *FieldError or, for a problem that names
// no field, the error as it came.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range m.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	if _, ok := err.(*FieldError); ok {
		return []error{err}
	}
	if inner := errors.Unwrap(err); inner != nil {
		if _, ok := inner.(interface{ Unwrap() []error }); ok {
			return Problems(inner)
		}
	}
	return []error{err}
}
