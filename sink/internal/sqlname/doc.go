// Package sqlname turns user data (form ids, field names) into SQL
// identifiers that are valid, unquoted, in both SQLite and BigQuery, for
// the per-form views both sinks create: ViewName names a form's view,
// ViewColumns its field columns. Different inputs never share a name.
package sqlname
