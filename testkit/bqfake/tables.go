package bqfake

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	bqv2 "google.golang.org/api/bigquery/v2"
)

func (s *Server) insertDataset(w http.ResponseWriter, r *http.Request) error {
	var ds bqv2.Dataset
	if err := decodeBody(r, &ds); err != nil {
		return err
	}
	project := r.PathValue("project")
	if ds.DatasetReference == nil || ds.DatasetReference.DatasetId == "" {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: dataset reference missing")
	}
	key := project + "." + ds.DatasetReference.DatasetId
	if _, ok := s.datasets[key]; ok {
		return errorf(http.StatusConflict, "duplicate", "Already Exists: Dataset %s:%s", project, ds.DatasetReference.DatasetId)
	}
	ds.DatasetReference.ProjectId = project
	ds.Id = project + ":" + ds.DatasetReference.DatasetId
	if ds.Location == "" {
		ds.Location = "US"
	}
	ds.CreationTime = s.opts.Now().UnixMilli()
	ds.Kind = "bigquery#dataset"
	s.datasets[key] = &ds
	s.stats.DDL[ds.DatasetReference.DatasetId]++
	writeJSON(w, http.StatusOK, &ds)
	return nil
}

func (s *Server) getDataset(w http.ResponseWriter, r *http.Request) error {
	ds, err := s.dataset(r.PathValue("project"), r.PathValue("dataset"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ds)
	return nil
}

func (s *Server) dataset(project, dataset string) (*bqv2.Dataset, error) {
	ds, ok := s.datasets[project+"."+dataset]
	if !ok {
		return nil, errorf(http.StatusNotFound, "notFound", "Not found: Dataset %s:%s", project, dataset)
	}
	return ds, nil
}

func (s *Server) deleteDataset(w http.ResponseWriter, r *http.Request) error {
	project, dataset := r.PathValue("project"), r.PathValue("dataset")
	if _, err := s.dataset(project, dataset); err != nil {
		return err
	}
	prefix := project + "." + dataset + "."
	var keys []string
	for k := range s.tables {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 && r.URL.Query().Get("deleteContents") != "true" {
		return errorf(http.StatusBadRequest, "resourceInUse", "Dataset %s:%s is still in use", project, dataset)
	}
	for _, k := range keys {
		if err := s.dropTable(k); err != nil {
			return err
		}
	}
	delete(s.datasets, project+"."+dataset)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) insertTable(w http.ResponseWriter, r *http.Request) error {
	var t bqv2.Table
	if err := decodeBody(r, &t); err != nil {
		return err
	}
	project, dataset := r.PathValue("project"), r.PathValue("dataset")
	if _, err := s.dataset(project, dataset); err != nil {
		return err
	}
	if t.TableReference == nil || t.TableReference.TableId == "" {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: table reference missing")
	}
	if t.View != nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: views are created with CREATE OR REPLACE VIEW only")
	}
	key := tableKey(project, dataset, t.TableReference.TableId)
	if _, ok := s.tables[key]; ok {
		return errorf(http.StatusConflict, "duplicate", "Already Exists: Table %s:%s.%s", project, dataset, t.TableReference.TableId)
	}
	if t.Schema == nil || len(t.Schema.Fields) == 0 {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: table %s needs a schema", key)
	}
	t.TableReference.ProjectId, t.TableReference.DatasetId = project, dataset
	if err := s.createTable(key, &t); err != nil {
		return err
	}
	s.stats.DDL[dataset+"."+t.TableReference.TableId]++
	writeJSON(w, http.StatusOK, &t)
	return nil
}

// createTable makes the SQLite table behind a BigQuery table.
func (s *Server) createTable(key string, t *bqv2.Table) error {
	cols := make([]string, 0, len(t.Schema.Fields))
	for _, f := range t.Schema.Fields {
		typ, err := sqliteType(f)
		if err != nil {
			return err
		}
		cols = append(cols, quoteIdent(f.Name)+" "+typ)
	}
	if _, err := s.db.Exec("CREATE TABLE " + quoteIdent(key) + " (" + strings.Join(cols, ", ") + ")"); err != nil {
		return fmt.Errorf("bqfake: creating table %s: %w", key, err)
	}
	t.Id = t.TableReference.ProjectId + ":" + t.TableReference.DatasetId + "." + t.TableReference.TableId
	t.Kind = "bigquery#table"
	t.Type = "TABLE"
	t.CreationTime = s.opts.Now().UnixMilli()
	t.LastModifiedTime = uint64(t.CreationTime)
	s.seq++
	t.Etag = fmt.Sprintf("etag-%d", s.seq)
	if ds := s.datasets[t.TableReference.ProjectId+"."+t.TableReference.DatasetId]; ds != nil {
		t.Location = ds.Location
		// A dataset's default expiration applies to the tables made
		// without one after it was set (none, when nobody set it).
		if t.ExpirationTime == 0 && ds.DefaultTableExpirationMs > 0 {
			t.ExpirationTime = t.CreationTime + ds.DefaultTableExpirationMs
		}
	}
	s.tables[key] = t
	return nil
}

func (s *Server) dropTable(key string) error {
	t := s.tables[key]
	if t == nil {
		return nil
	}
	kind := "TABLE"
	if t.Type == "VIEW" {
		kind = "VIEW"
	}
	if _, err := s.db.Exec("DROP " + kind + " IF EXISTS " + quoteIdent(key)); err != nil {
		return fmt.Errorf("bqfake: dropping %s: %w", key, err)
	}
	delete(s.tables, key)
	return nil
}

func (s *Server) getTable(w http.ResponseWriter, r *http.Request) error {
	s.stats.TableGets[r.PathValue("dataset")+"."+r.PathValue("table")]++
	t, err := s.table(r.PathValue("project"), r.PathValue("dataset"), r.PathValue("table"))
	if err != nil {
		return err
	}
	if t.Type != "VIEW" {
		var n int64
		if err := s.db.QueryRow("SELECT count(*) FROM " + quoteIdent(tableKey(t.TableReference.ProjectId, t.TableReference.DatasetId, t.TableReference.TableId))).Scan(&n); err == nil {
			t.NumRows = uint64(n)
		}
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) table(project, dataset, table string) (*bqv2.Table, error) {
	if _, err := s.dataset(project, dataset); err != nil {
		return nil, err
	}
	t, ok := s.tables[tableKey(project, dataset, table)]
	if !ok {
		return nil, errorf(http.StatusNotFound, "notFound", "Not found: Table %s:%s.%s", project, dataset, table)
	}
	return t, nil
}

// listTables serves tables.list: every table of a dataset, in one page,
// sorted by id.
func (s *Server) listTables(w http.ResponseWriter, r *http.Request) error {
	project, dataset := r.PathValue("project"), r.PathValue("dataset")
	if _, err := s.dataset(project, dataset); err != nil {
		return err
	}
	prefix := tableKey(project, dataset, "")
	var keys []string
	for k := range s.tables {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	list := &bqv2.TableList{Kind: "bigquery#tableList", TotalItems: int64(len(keys))}
	for _, k := range keys {
		t := s.tables[k]
		list.Tables = append(list.Tables, &bqv2.TableListTables{
			Kind: "bigquery#table", Id: t.Id, TableReference: t.TableReference, Type: t.Type,
			CreationTime: t.CreationTime, ExpirationTime: t.ExpirationTime,
			TimePartitioning: t.TimePartitioning, Clustering: t.Clustering, Labels: t.Labels,
		})
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) deleteTable(w http.ResponseWriter, r *http.Request) error {
	project, dataset, table := r.PathValue("project"), r.PathValue("dataset"), r.PathValue("table")
	if f, ok := s.takeFault(OpTableDelete); ok {
		return &apiError{status: f.status, reason: f.reason, message: "bqfake: injected tables.delete fault"}
	}
	if _, err := s.table(project, dataset, table); err != nil {
		return err
	}
	if err := s.dropTable(tableKey(project, dataset, table)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listTableData serves tabledata.list: a table's rows in storage order.
func (s *Server) listTableData(w http.ResponseWriter, r *http.Request) error {
	project, dataset, table := r.PathValue("project"), r.PathValue("dataset"), r.PathValue("table")
	t, err := s.table(project, dataset, table)
	if err != nil {
		return err
	}
	if t.Type == "VIEW" {
		return errorf(http.StatusBadRequest, "invalid", "Cannot list a table of type VIEW.")
	}
	res, err := s.selectAll(tableKey(project, dataset, table), t.Schema)
	if err != nil {
		return err
	}
	start, size, err := pageBounds(r, len(res.rows), s.opts.PageRows)
	if err != nil {
		return err
	}
	out := &bqv2.TableDataList{Kind: "bigquery#tableDataList", TotalRows: int64(len(res.rows))}
	out.Rows = res.wireRows(start, start+size, useInt64(r))
	if start+size < len(res.rows) {
		out.PageToken = pageToken(start + size)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) selectAll(key string, schema *bqv2.TableSchema) (*result, error) {
	cols := make([]string, len(schema.Fields))
	for i, f := range schema.Fields {
		cols[i] = quoteIdent(f.Name)
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + quoteIdent(key) + " ORDER BY rowid" // storage order
	if t := s.tables[key]; t != nil && t.Type == "VIEW" {
		// A view has no rowid, and its columns are read by position:
		// SQLite names a view's column "true" or "false" column<n>.
		q = "SELECT * FROM " + quoteIdent(key)
	}
	rows, err := s.db.Query(q)
	if err != nil {
		return nil, fmt.Errorf("bqfake: reading %s: %w", key, err)
	}
	return scanResult(rows, schema.Fields)
}

func useInt64(r *http.Request) bool {
	return r.URL.Query().Get("formatOptions.useInt64Timestamp") == "true"
}

func pageToken(offset int) string { return "o" + strconv.Itoa(offset) }

// pageBounds reads startIndex / pageToken / maxResults.
func pageBounds(r *http.Request, total, pageRows int) (start, size int, err error) {
	q := r.URL.Query()
	if tok := q.Get("pageToken"); tok != "" {
		n, perr := strconv.Atoi(strings.TrimPrefix(tok, "o"))
		if perr != nil || !strings.HasPrefix(tok, "o") || n < 0 {
			return 0, 0, errorf(http.StatusBadRequest, "invalid", "bqfake: bad page token %q", tok)
		}
		start = n
	} else if si := q.Get("startIndex"); si != "" {
		n, perr := strconv.Atoi(si)
		if perr != nil || n < 0 {
			return 0, 0, errorf(http.StatusBadRequest, "invalid", "bqfake: bad startIndex %q", si)
		}
		start = n
	}
	size = pageRows
	if mr := q.Get("maxResults"); mr != "" {
		n, perr := strconv.Atoi(mr)
		if perr != nil || n < 0 {
			return 0, 0, errorf(http.StatusBadRequest, "invalid", "bqfake: bad maxResults %q", mr)
		}
		size = min(n, pageRows)
	}
	start = min(start, total)
	size = min(size, total-start)
	return start, size, nil
}

func normType(t string) string {
	switch strings.ToUpper(t) {
	case "INT64", "INTEGER":
		return "INTEGER"
	case "BOOL", "BOOLEAN":
		return "BOOLEAN"
	case "FLOAT64", "FLOAT":
		return "FLOAT"
	}
	return strings.ToUpper(t)
}

func sqliteType(f *bqv2.TableFieldSchema) (string, error) {
	if f.Mode == "REPEATED" || len(f.Fields) > 0 {
		return "", errorf(http.StatusBadRequest, "invalid", "bqfake: field %s: REPEATED and RECORD fields are not supported", f.Name)
	}
	switch normType(f.Type) {
	case "STRING", "JSON":
		return "TEXT", nil
	case "INTEGER", "BOOLEAN", "TIMESTAMP":
		return "INTEGER", nil
	case "FLOAT":
		return "REAL", nil
	}
	return "", errorf(http.StatusBadRequest, "invalid", "bqfake: field %s: type %s is not supported", f.Name, f.Type)
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// result is a query's output: its schema and rows as SQLite values
// (TIMESTAMP as microseconds, BOOLEAN as 0/1).
type result struct {
	fields []*bqv2.TableFieldSchema
	rows   [][]any
	dml    int64
}

func scanResult(rows *sql.Rows, fields []*bqv2.TableFieldSchema) (*result, error) {
	defer rows.Close()
	res := &result{fields: fields}
	for rows.Next() {
		vals := make([]any, len(fields))
		ptrs := make([]any, len(fields))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("bqfake: scanning: %w", err)
		}
		res.rows = append(res.rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("bqfake: scanning: %w", err)
	}
	return res, nil
}

func (r *result) schema() *bqv2.TableSchema {
	if r == nil || len(r.fields) == 0 {
		return nil
	}
	return &bqv2.TableSchema{Fields: r.fields}
}

// wireRows renders rows [from, to) as BigQuery does: every value a string
// (TIMESTAMP as microseconds when the client asks for int64 timestamps,
// else as float seconds), NULL as a missing value.
func (r *result) wireRows(from, to int, int64TS bool) []*bqv2.TableRow {
	out := make([]*bqv2.TableRow, 0, to-from)
	for _, row := range r.rows[from:to] {
		tr := &bqv2.TableRow{F: make([]*bqv2.TableCell, len(row))}
		for i, v := range row {
			if r.fields[i].Mode == "REPEATED" {
				tr.F[i] = &bqv2.TableCell{V: wireArray(normType(r.fields[i].Type), v, int64TS)}
				continue
			}
			tr.F[i] = &bqv2.TableCell{V: wireValue(normType(r.fields[i].Type), v, int64TS)}
		}
		out = append(out, tr)
	}
	return out
}

func wireValue(typ string, v any, int64TS bool) any {
	if v == nil {
		return nil
	}
	switch typ {
	case "BOOLEAN":
		if asInt(v) != 0 {
			return "true"
		}
		return "false"
	case "TIMESTAMP":
		us := asInt(v)
		if int64TS {
			return strconv.FormatInt(us, 10)
		}
		return strconv.FormatFloat(float64(us)/1e6, 'f', 6, 64)
	case "INTEGER":
		return strconv.FormatInt(asInt(v), 10)
	case "FLOAT":
		switch x := v.(type) {
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	}
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// wireArray renders a REPEATED value, held as a JSON array, as BigQuery
// does: a list of cells, [] for NULL.
func wireArray(typ string, v any, int64TS bool) any {
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case []byte:
		text = string(x)
	}
	var elems []any
	_ = json.Unmarshal([]byte(text), &elems)
	out := make([]any, 0, len(elems))
	for _, e := range elems {
		if f, ok := e.(float64); ok && typ == "INTEGER" {
			e = int64(f)
		}
		out = append(out, map[string]any{"v": wireValue(typ, e, int64TS)})
	}
	return out
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case bool:
		if x {
			return 1
		}
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// parseTimestamp accepts what BigQuery accepts for a TIMESTAMP in NDJSON
// and in query parameters: RFC 3339 and "YYYY-MM-DD HH:MM:SS[.ffffff][zone]".
func parseTimestamp(s string) (int64, error) {
	for _, layout := range []string{
		time.RFC3339Nano,
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999-07",
		"2006-01-02 15:04:05.999999999 MST",
		"2006-01-02T15:04:05.999999999",
		"2006-01-02 15:04:05.999999999",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Truncate(time.Microsecond).UnixMicro(), nil
		}
	}
	return 0, fmt.Errorf("invalid timestamp %q", s)
}

// patchTable serves tables.patch for the one change formsync makes: new
// NULLABLE columns appended to the schema (what BigQuery allows without
// rewriting the table). Anything else is refused.
func (s *Server) patchTable(w http.ResponseWriter, r *http.Request) error {
	project, dataset, table := r.PathValue("project"), r.PathValue("dataset"), r.PathValue("table")
	t, err := s.table(project, dataset, table)
	if err != nil {
		return err
	}
	if t.Type == "VIEW" {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: patching a view is not supported")
	}
	if m := r.Header.Get("If-Match"); m != "" && m != t.Etag {
		return errorf(http.StatusPreconditionFailed, "conditionNotMet", "Precondition check failed.")
	}
	var in bqv2.Table
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	if in.Schema == nil {
		return errorf(http.StatusBadRequest, "invalid", "bqfake: tables.patch supports schema changes only")
	}
	old := t.Schema.Fields
	if len(in.Schema.Fields) < len(old) {
		return errorf(http.StatusBadRequest, "invalid", "Provided Schema does not match Table %s:%s.%s. Cannot drop columns", project, dataset, table)
	}
	for i, f := range old {
		g := in.Schema.Fields[i]
		if g.Name != f.Name || normType(g.Type) != normType(f.Type) || (g.Mode == "REQUIRED") != (f.Mode == "REQUIRED") {
			return errorf(http.StatusBadRequest, "invalid", "bqfake: tables.patch may only append columns; field %s changed", f.Name)
		}
	}
	key := tableKey(project, dataset, table)
	for _, f := range in.Schema.Fields[len(old):] {
		if f.Mode == "REQUIRED" {
			return errorf(http.StatusBadRequest, "invalid", "Provided Schema does not match Table %s. Cannot add required fields to an existing schema. (field: %s)", key, f.Name)
		}
		typ, err := sqliteType(f)
		if err != nil {
			return err
		}
		if _, err := s.db.Exec("ALTER TABLE " + quoteIdent(key) + " ADD COLUMN " + quoteIdent(f.Name) + " " + typ); err != nil {
			return fmt.Errorf("bqfake: adding column %s to %s: %w", f.Name, key, err)
		}
	}
	t.Schema = in.Schema
	s.seq++
	t.Etag = fmt.Sprintf("etag-%d", s.seq)
	t.LastModifiedTime = uint64(s.opts.Now().UnixMilli())
	s.stats.DDL[dataset+"."+table]++
	writeJSON(w, http.StatusOK, t)
	return nil
}
