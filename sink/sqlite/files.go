package sqlite

import "github.com/formsync/formsync/state/fieldtype"

// filesViewQuery is the query of the submission_files view: one row per
// file, an object in files, of every row not marked deleted, whatever
// shape files has: an array of files (input NULL, position its place in
// the array), or an object keyed by input name whose values are a file
// (position 0) or an array of files. Its columns and values are those of
// BigQuery's view: name, url and type a file's members of those names
// when they are scalars, size when it is an integer (a number, or text
// in JSON's integer syntax); an element that is not an object has no row.
var filesViewQuery = `SELECT e.form_id, e.submission_key, e.submission_id, e.input, e.position,
	` + fileMember("name") + ` AS name,
	` + fileMember("url") + ` AS url,
	` + castSQL(fieldtype.Integer, "json_type(e.file, '$.size')", "json_extract(e.file, '$.size')") + ` AS size,
	` + fileMember("type") + ` AS type
FROM (
	SELECT s.form_id, s.submission_key, s.submission_id, NULL AS input, f.key AS position, f.type AS kind, f.value AS file
	FROM submissions AS s, json_each(s.files) AS f
	WHERE s.deleted_at IS NULL AND substr(s.files, 1, 1) = '['
	UNION ALL
	SELECT s.form_id, s.submission_key, s.submission_id, i.key, 0, i.type, i.value
	FROM submissions AS s, json_each(s.files) AS i
	WHERE s.deleted_at IS NULL AND substr(s.files, 1, 1) = '{' AND i.type <> 'array'
	UNION ALL
	SELECT s.form_id, s.submission_key, s.submission_id, i.key, f.key, f.type, f.value
	FROM submissions AS s, json_each(s.files) AS i, json_each(i.value) AS f
	WHERE s.deleted_at IS NULL AND substr(s.files, 1, 1) = '{' AND i.type = 'array'
) AS e
WHERE e.kind = 'object'`

// fileMember is a file's member name as text when it is a string or a
// number, NULL otherwise, as BigQuery's JSON_VALUE reads it.
func fileMember(name string) string {
	path := "'$." + name + "'"
	return "CASE WHEN json_type(e.file, " + path + ") IN ('text', 'integer', 'real') THEN CAST(json_extract(e.file, " + path + ") AS TEXT) END"
}
