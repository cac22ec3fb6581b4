package bqfake

import (
	"database/sql"
	"strconv"

	bqv2 "google.golang.org/api/bigquery/v2"
)

// The statements of the sink's file copies (submission_file_copies):
// which rows of a RecordFiles are stored, the rows with files and their
// copies, which digests stored copies name, and Purge's deletion of the
// copies of rows forgotten.
func init() {
	register(
		&shapeDef{shapeStoredRows, "SELECT", map[string]string{"form_ids": "ARRAY<STRING>", "rows": forgetType}, []string{"subs"}, nil, (*Server).storedRows},
		&shapeDef{shapeFileRows, "SELECT", map[string]string{"form_ids": "ARRAY<STRING>", "since": "TIMESTAMP"}, []string{"subs", "copies"}, nil, (*Server).fileRows},
		&shapeDef{shapeFileRowsUnmigrated, "SELECT", map[string]string{"form_ids": "ARRAY<STRING>", "since": "TIMESTAMP"}, []string{"subs"}, nil, (*Server).fileRows},
		&shapeDef{shapeForgetCopies, "DELETE", map[string]string{"forget": forgetType}, []string{"copies"}, nil, (*Server).forgetCopies},
		&shapeDef{shapeNamedDigests, "SELECT", map[string]string{"digests": "ARRAY<STRING>"}, []string{"copies", "subs"}, nil, (*Server).namedDigests},
	)
}

// copyColumns are the columns of submission_file_copies.
var copyColumns = []string{"form_id", "submission_key", "url", "sha256", "object_uri", "size", "content_type", "stored_at", "reason", "recorded_at"}

// latestCopies is the newest record of each copy key of the table copies
// among those where says, as the sink's latestCopies orders them (SQLite,
// like BigQuery, puts NULLs last in a descending order).
func latestCopies(copies, where string) string {
	return `(SELECT form_id, submission_key, url, sha256, object_uri, size, content_type, stored_at, reason, recorded_at FROM (
		SELECT *, ROW_NUMBER() OVER (PARTITION BY form_id, submission_key, url ORDER BY recorded_at DESC, sha256 DESC, reason DESC) AS bqfake_rank
		FROM ` + quoteIdent(copies) + ` WHERE ` + where + `) WHERE bqfake_rank = 1)`
}

// filesCopiesView is submission_files on SQLite: filesView's rows, each
// with the copy of its URL as it stands.
func filesCopiesView(subs, copies string) string {
	return `SELECT v.*, c.object_uri, c.sha256, c.size AS stored_size, c.content_type, c.stored_at, c.reason AS not_stored_reason
		FROM (` + filesView(subs) + `) AS v
		LEFT JOIN ` + latestCopies(copies, "TRUE") + ` AS c
		ON c.form_id = v.form_id AND c.submission_key = v.submission_key AND c.url = v.url`
}

// storedRows is the keys of @rows stored in submissions.
func (s *Server) storedRows(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		for _, p := range []string{"form_ids", "rows"} {
			if err := materialise(tx, p, params[p]); err != nil {
				return nil, err
			}
		}
		if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "created_at"}, everyPartition); err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{col("form_id", "STRING"), col("submission_key", "STRING")},
			`SELECT form_id, submission_key FROM `+quoteIdent(t["subs"])+` AS t
			WHERE form_id IN (SELECT value FROM temp.param_form_ids)
			AND EXISTS (SELECT 1 FROM temp.param_rows AS r WHERE r.form_id = t.form_id AND r.submission_key = t.submission_key)`)
	})
}

// fileRows is the stored rows of @form_ids (every form when empty)
// created at or after @since whose files are not empty, each with its copies as they stand, one result
// row per copy (one with NULL copy columns for a row without any); none
// in the shape of a dataset without the copies table.
func (s *Server) fileRows(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "form_ids", params["form_ids"]); err != nil {
			return nil, err
		}
		v, err := scalar(params["since"].Type, params["since"].Value)
		if err != nil {
			return nil, err
		}
		since, _ := v.(int64)
		// created_at BETWEEN @since AND the largest TIMESTAMP: the
		// partitions from @since's day on.
		if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "created_at", "deleted_at", "files", "files_text"},
			span{days: [][2]int64{{floorDay(since), lastDay}}}); err != nil {
			return nil, err
		}
		forms := `((SELECT count(*) FROM temp.param_form_ids) = 0 OR form_id IN (SELECT value FROM temp.param_form_ids))`
		copies := `(SELECT NULL AS form_id, NULL AS submission_key, NULL AS url, NULL AS sha256, NULL AS object_uri, NULL AS size,
			NULL AS content_type, NULL AS stored_at, NULL AS reason, NULL AS recorded_at WHERE FALSE)`
		if t["copies"] != "" { // not the shape of a dataset without copies
			if err := s.scan(tx, t["copies"], copyColumns, allPartitions); err != nil {
				return nil, err
			}
			copies = latestCopies(t["copies"], forms)
		}
		return s.query(tx, []*bqv2.TableFieldSchema{
			col("form_id", "STRING"), col("submission_key", "STRING"), col("created_at", "TIMESTAMP"), col("deleted", "BOOLEAN"),
			col("files", "STRING"), col("url", "STRING"), col("sha256", "STRING"), col("object_uri", "STRING"),
			col("size", "INTEGER"), col("content_type", "STRING"), col("stored_at", "TIMESTAMP"), col("reason", "STRING"),
			col("recorded_at", "TIMESTAMP"),
		}, `SELECT s.form_id, s.submission_key, s.created_at, s.deleted_at IS NOT NULL, s.files,
			c.url, c.sha256, c.object_uri, c.size, c.content_type, c.stored_at, c.reason, c.recorded_at
			FROM (SELECT form_id, submission_key, created_at, deleted_at, COALESCE(files_text, files) AS files
				FROM `+quoteIdent(t["subs"])+` WHERE `+forms+` AND created_at >= `+strconv.FormatInt(since, 10)+`) AS s
			LEFT JOIN `+copies+` AS c
			ON c.form_id = s.form_id AND c.submission_key = s.submission_key
			WHERE s.files NOT IN ('[]', '{}', 'null')
			ORDER BY s.form_id, s.created_at, s.submission_key, c.url`)
	})
}

// namedDigests is which of @digests a copy of a stored row names, as the
// copies stand.
func (s *Server) namedDigests(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "digests", params["digests"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["copies"], copyColumns, allPartitions); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "created_at"}, everyPartition); err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{col("sha256", "STRING")},
			`SELECT DISTINCT c.sha256 FROM `+latestCopies(t["copies"], "TRUE")+` AS c
			JOIN `+quoteIdent(t["subs"])+` AS s ON s.form_id = c.form_id AND s.submission_key = c.submission_key
			WHERE c.sha256 IN (SELECT value FROM temp.param_digests) ORDER BY c.sha256`)
	})
}

// forgetCopies deletes the copies of the @forget rows.
func (s *Server) forgetCopies(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "forget", params["forget"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["copies"], []string{"form_id", "submission_key"}, allPartitions); err != nil {
			return nil, err
		}
		n, err := s.dml(tx, t["copies"], `DELETE FROM `+quoteIdent(t["copies"])+` AS c WHERE EXISTS (SELECT 1 FROM temp.param_forget AS f
			WHERE f.form_id = c.form_id AND f.submission_key = c.submission_key)`, params)
		if err != nil {
			return nil, err
		}
		return &result{dml: n}, nil
	})
}
