// Package sqlname turns user data (form ids, field names) into SQL
// identifiers that are valid in both SQLite and BigQuery, unquoted unless
// the name is a keyword (a field named order stays order, and a query
// quotes it), for
// the per-form views both sinks create: ViewName names a form's view,
// ViewColumns its field columns. Different inputs never share a name.
package sqlname
