package bqfake

import (
	"regexp"

	bqv2 "google.golang.org/api/bigquery/v2"
)

// filesView is submission_files on SQLite: the three shapes of files
// (an array of files; an object of input names, each one file or an array
// of them) as three selects, each file an object.
func filesView(subs string) string {
	cols := func(input, position, file string) string {
		v := func(k string) string { return "bqfake_json_value(" + file + ", '" + k + "')" }
		// IF(JSON_TYPE(file[k]) IN ('string', 'number'), JSON_VALUE(file[k]), NULL)
		text := func(k string) string {
			return "CASE WHEN bqfake_json_type(" + file + ", '" + k + "') IN ('string', 'number') THEN " + v(k) + " END"
		}
		return `s.form_id, s.submission_key, s.submission_id, ` + input + ` AS input, ` + position + ` AS position,
			` + text("name") + ` AS name, ` + text("url") + ` AS url,
			(SELECT bqfake_safe_cast(x, 'INT64') FROM (SELECT ` + v("size") + ` AS x) WHERE bqfake_regexp_contains(x, '^-?(0|[1-9][0-9]*)$')) AS size,
			` + text("type") + ` AS type`
	}
	from := ` FROM ` + quoteIdent(subs) + ` AS s, json_each(s.files) AS i`
	live := ` s.deleted_at IS NULL AND json_valid(s.files)`
	return `SELECT ` + cols("NULL", "i.key", "i.value") + from + ` WHERE` + live + ` AND json_type(s.files) = 'array' AND i.type = 'object'
		UNION ALL SELECT ` + cols("i.key", "0", "i.value") + from + ` WHERE` + live + ` AND json_type(s.files) = 'object' AND i.type = 'object'
		UNION ALL SELECT ` + cols("i.key", "e.key", "e.value") + from + `, json_each(i.value) AS e WHERE` + live +
		` AND json_type(s.files) = 'object' AND i.type = 'array' AND e.type = 'object'`
}

// createFilesView is the handler of the submission_files shape.
func (s *Server) createFilesView(t map[string]string, _ map[string]param) (*result, error) {
	fields := []*bqv2.TableFieldSchema{
		col("form_id", "STRING"), col("submission_key", "STRING"), col("submission_id", "INTEGER"),
		col("input", "STRING"), col("position", "INTEGER"), col("name", "STRING"), col("url", "STRING"),
		col("size", "INTEGER"), col("type", "STRING"),
		col("object_uri", "STRING"), col("sha256", "STRING"), col("stored_size", "INTEGER"),
		col("content_type", "STRING"), col("stored_at", "TIMESTAMP"), col("not_stored_reason", "STRING"),
	}
	// The description is the shape's own literal.
	desc, err := unquote(filesDescRE.FindStringSubmatch(shapeFilesView)[1])
	if err != nil {
		return nil, err
	}
	// The view's filter on created_at over all of time satisfies a
	// partition filter the table requires.
	read := viewRead{table: t["subs"], span: everyPartition,
		cols: []string{"form_id", "submission_key", "submission_id", "files", "deleted_at", "created_at"},
		also: []viewRead{{table: t["copies"], cols: copyColumns, span: allPartitions}}}
	return s.createView(t["view"], filesCopiesView(t["subs"], t["copies"]), fields, desc, read)
}

var filesDescRE = regexp.MustCompile(`OPTIONS\(description = ('(?:[^'\\]|\\.)*')\)`)
