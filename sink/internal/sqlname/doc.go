// Package sqlname turns user data (form ids, field names) into SQL
// identifiers valid in both SQLite and BigQuery, for the per-form views:
// ViewName names a form's view, ViewColumns its field columns. Different
// inputs never share a name; a name that had to change gets a hash
// suffix, and a keyword stays as it is (a query quotes it).
package sqlname
