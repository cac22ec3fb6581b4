package bqfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	bqv2 "google.golang.org/api/bigquery/v2"
)

// maxLoadErrors is how many bad rows a failed load job lists.
const maxLoadErrors = 5

// load runs a load job's work: NDJSON rows checked against the schema the
// way BigQuery checks them, then written in one SQLite transaction, so a
// failed load changes nothing.
func (s *Server) load(cfg *bqv2.JobConfigurationLoad, data []byte) (int64, error) {
	if f := cfg.SourceFormat; f != "NEWLINE_DELIMITED_JSON" {
		return 0, errorf(http.StatusBadRequest, "invalid", "bqfake: source format %q is not supported (only NEWLINE_DELIMITED_JSON)", f)
	}
	if cfg.MaxBadRecords != 0 {
		return 0, errorf(http.StatusBadRequest, "invalid", "bqfake: maxBadRecords is not supported")
	}
	d := cfg.DestinationTable
	if d == nil {
		return 0, errorf(http.StatusBadRequest, "invalid", "bqfake: load job without a destination table")
	}
	if _, err := s.dataset(d.ProjectId, d.DatasetId); err != nil {
		return 0, err
	}
	key := tableKey(d.ProjectId, d.DatasetId, d.TableId)
	existing := s.tables[key]
	schema := cfg.Schema
	switch {
	case existing != nil && existing.Type == "VIEW":
		return 0, errorf(http.StatusBadRequest, "invalid", "Cannot load into a view: %s", key)
	case schema == nil && existing == nil:
		return 0, errorf(http.StatusNotFound, "notFound", "Not found: Table %s:%s.%s", d.ProjectId, d.DatasetId, d.TableId)
	case schema == nil:
		schema = existing.Schema
	case existing == nil && cfg.CreateDisposition == "CREATE_NEVER":
		return 0, errorf(http.StatusNotFound, "notFound", "Not found: Table %s:%s.%s", d.ProjectId, d.DatasetId, d.TableId)
	}
	for _, f := range schema.Fields {
		if _, err := sqliteType(f); err != nil {
			return 0, err
		}
	}
	rows, err := parseNDJSON(data, schema.Fields, cfg.IgnoreUnknownValues)
	if err != nil {
		return 0, err
	}

	disp := cfg.WriteDisposition
	if disp == "" {
		disp = "WRITE_APPEND"
	}
	if existing != nil && !sameSchema(existing.Schema, schema) {
		if disp != "WRITE_TRUNCATE" {
			return 0, errorf(http.StatusBadRequest, "invalid", "Provided Schema does not match Table %s", key)
		}
		// WRITE_TRUNCATE replaces the schema too.
		if err := s.dropTable(key); err != nil {
			return 0, err
		}
		existing = nil
	}
	if existing == nil {
		t := &bqv2.Table{TableReference: &bqv2.TableReference{ProjectId: d.ProjectId, DatasetId: d.DatasetId, TableId: d.TableId}, Schema: schema}
		if err := s.createTable(key, t); err != nil {
			return 0, err
		}
	}
	tx, err := s.db.Begin()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	switch disp {
	case "WRITE_TRUNCATE":
		if _, err := tx.Exec("DELETE FROM " + quoteIdent(key)); err != nil {
			return 0, err
		}
	case "WRITE_EMPTY":
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM " + quoteIdent(key)).Scan(&n); err != nil {
			return 0, err
		}
		if n > 0 {
			return 0, errorf(http.StatusBadRequest, "invalid", "Already Exists: Table %s is not empty", key)
		}
	}
	cols := make([]string, len(schema.Fields))
	marks := make([]string, len(schema.Fields))
	for i, f := range schema.Fields {
		cols[i], marks[i] = quoteIdent(f.Name), "?"
	}
	stmt, err := tx.Prepare("INSERT INTO " + quoteIdent(key) + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")")
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.Exec(r...); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return int64(len(rows)), nil
}

func sameSchema(a, b *bqv2.TableSchema) bool {
	if a == nil || b == nil || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		x, y := a.Fields[i], b.Fields[i]
		if x.Name != y.Name || normType(x.Type) != normType(y.Type) || (x.Mode == "REQUIRED") != (y.Mode == "REQUIRED") {
			return false
		}
	}
	return true
}

// parseNDJSON decodes and checks every row; any bad row fails the whole
// load with reason "invalid". As in BigQuery, the error itself only counts
// the problems and says to look into the job's errors[], which lists the
// first few.
func parseNDJSON(data []byte, fields []*bqv2.TableFieldSchema, ignoreUnknown bool) ([][]any, error) {
	byName := make(map[string]int, len(fields))
	for i, f := range fields {
		byName[f.Name] = i
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var rows [][]any
	var problems []string
	for {
		pos := dec.InputOffset()
		var obj map[string]json.RawMessage
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("Error while reading data, error message: JSON parsing error in row starting at position %d: %v", pos, err))
			break
		}
		row := make([]any, len(fields))
		seen := make([]bool, len(fields))
		for name, raw := range obj {
			i, ok := byName[name]
			if !ok {
				if !ignoreUnknown {
					problems = append(problems, fmt.Sprintf("Error while reading data, error message: JSON parsing error in row starting at position %d: No such field: %s.", pos, name))
				}
				continue
			}
			v, err := convert(fields[i], raw)
			if err != nil {
				problems = append(problems, fmt.Sprintf("Error while reading data, error message: JSON parsing error in row starting at position %d: %v Field: %s; Value: %s", pos, err, name, raw))
				continue
			}
			row[i], seen[i] = v, true
		}
		for i, f := range fields {
			if f.Mode == "REQUIRED" && row[i] == nil {
				problems = append(problems, fmt.Sprintf("Error while reading data, error message: JSON parsing error in row starting at position %d: Missing required field: %s.", pos, f.Name))
			}
			_ = seen
		}
		rows = append(rows, row)
		if len(problems) >= maxLoadErrors {
			break
		}
	}
	if len(problems) > 0 {
		e := errorf(http.StatusBadRequest, "invalid", "Error while reading data, error message: JSON table encountered too many errors, giving up. Rows: %d; errors: %d. Please look into the errors[] collection for more details.",
			len(rows), len(problems))
		e.details = problems
		return nil, e
	}
	return rows, nil
}

// convert turns one JSON value into the SQLite value of a column.
func convert(f *bqv2.TableFieldSchema, raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch normType(f.Type) {
	case "JSON":
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	case "STRING":
		if s, ok := v.(string); ok {
			return s, nil
		}
		//lint:ignore ST1005 BigQuery's own wording, which the sink's error classification sees
		return nil, errors.New("Could not convert value to string.")
	case "INTEGER":
		switch x := v.(type) {
		case json.Number:
			if n, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
				return n, nil
			}
		case string:
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return n, nil
			}
		}
		//lint:ignore ST1005 BigQuery's own wording, which the sink's error classification sees
		return nil, errors.New("Could not convert value to integer.")
	case "FLOAT":
		switch x := v.(type) {
		case json.Number:
			if n, err := x.Float64(); err == nil {
				return n, nil
			}
		case string:
			if n, err := strconv.ParseFloat(x, 64); err == nil {
				return n, nil
			}
		}
		//lint:ignore ST1005 BigQuery's own wording, which the sink's error classification sees
		return nil, errors.New("Could not convert value to double.")
	case "BOOLEAN":
		switch x := v.(type) {
		case bool:
			if x {
				return int64(1), nil
			}
			return int64(0), nil
		case string:
			switch strings.ToLower(x) {
			case "true":
				return int64(1), nil
			case "false":
				return int64(0), nil
			}
		}
		//lint:ignore ST1005 BigQuery's own wording, which the sink's error classification sees
		return nil, errors.New("Could not convert value to boolean.")
	case "TIMESTAMP":
		switch x := v.(type) {
		case string:
			if us, err := parseTimestamp(x); err == nil {
				return us, nil
			}
		case json.Number:
			if sec, err := x.Float64(); err == nil {
				return int64(sec * 1e6), nil
			}
		}
		//lint:ignore ST1005 BigQuery's own wording, which the sink's error classification sees
		return nil, errors.New("Couldn't convert value to timestamp.")
	}
	return nil, fmt.Errorf("type %s is not supported", f.Type)
}
