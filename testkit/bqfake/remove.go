package bqfake

import (
	"database/sql"
	"fmt"

	bqv2 "google.golang.org/api/bigquery/v2"
)

// The statements of `formsync remove` and of the recount of a form's
// row counters.
func init() {
	removeParams := map[string]string{"synced_at": "TIMESTAMP", "commit_id": "STRING", "form_id": "STRING", "revision": "INT64"}
	remove := func(rows bool) func(*Server, map[string]string, map[string]param) (*result, error) {
		return func(s *Server, t map[string]string, params map[string]param) (*result, error) {
			return s.removeForm(t, params, rows)
		}
	}
	register(
		&shapeDef{shapeCountRows, "SELECT", map[string]string{"form_id": "STRING"}, []string{"subs"}, nil, (*Server).countRows},
		&shapeDef{shapeRecount, "SCRIPT", map[string]string{"synced_at": "TIMESTAMP", "commit_id": "STRING", "form_ids": "ARRAY<STRING>"},
			[]string{"lock", "subs", "state"}, []string{"lock", "state"}, (*Server).recount},
		&shapeDef{shapeRemove, "SCRIPT", removeParams, []string{"lock", "state", "state", "state"}, []string{"lock", "state"}, remove(false)},
		&shapeDef{shapeRemoveRows, "SCRIPT", removeParams, []string{"lock", "state", "subs", "copies", "state", "state"}, []string{"lock", "subs", "copies", "state"}, remove(true)},
		&shapeDef{shapeFormDays, "SELECT", map[string]string{"form_id": "STRING"}, []string{"subs"}, nil, (*Server).formDays},
		&shapeDef{shapeRemoveDays, "DELETE", map[string]string{"form_id": "STRING", "removed_from": "TIMESTAMP", "removed_to": "TIMESTAMP"},
			[]string{"subs"}, []string{"subs"}, (*Server).removeDays},
	)
}

// formDays lists the days (UNIX_DATE) a form's rows fall on, in order.
func (s *Server) formDays(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.scan(tx, t["subs"], []string{"form_id", "created_at"}, everyPartition); err != nil {
			return nil, err
		}
		q := `SELECT DISTINCT ` + dayOf("created_at") + ` AS day FROM ` + quoteIdent(t["subs"]) + ` WHERE form_id = @form_id ORDER BY day`
		args, err := named(q, params)
		if err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{col("day", "INTEGER")}, q, args...)
	})
}

// removeDays deletes a form's rows of a created_at range.
func (s *Server) removeDays(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		from, err := scalar(params["removed_from"].Type, params["removed_from"].Value)
		if err != nil {
			return nil, err
		}
		to, err := scalar(params["removed_to"].Type, params["removed_to"].Value)
		if err != nil {
			return nil, err
		}
		f, _ := from.(int64)
		l, _ := to.(int64)
		if err := s.scan(tx, t["subs"], []string{"form_id", "created_at"}, within(f, l)); err != nil {
			return nil, err
		}
		cond := `form_id = @form_id AND created_at BETWEEN @removed_from AND @removed_to`
		args, err := named(cond, params)
		if err != nil {
			return nil, err
		}
		if err := s.touch(tx, t["subs"], cond, true, args...); err != nil {
			return nil, err
		}
		n, err := s.dml(tx, t["subs"], `DELETE FROM `+quoteIdent(t["subs"])+` WHERE `+cond, params)
		if err != nil {
			return nil, err
		}
		return &result{dml: n}, nil
	})
}

// countedRows are the columns a count of a form's rows reads.
var countedRows = []string{"form_id", "created_at", "deleted_at"}

// countRows counts a form's rows, not marked deleted and marked.
func (s *Server) countRows(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.scan(tx, t["subs"], countedRows, allPartitions); err != nil {
			return nil, err
		}
		q := `SELECT COALESCE(SUM(deleted_at IS NULL), 0), COALESCE(SUM(deleted_at IS NOT NULL), 0)
			FROM ` + quoteIdent(t["subs"]) + ` WHERE form_id = @form_id`
		args, err := named(q, params)
		if err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{col("live", "INTEGER"), col("deleted", "INTEGER")}, q, args...)
	})
}

// recount sets the counters of the @form_ids states to their rows.
func (s *Server) recount(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.takeLock(tx, t["lock"], params); err != nil {
			return nil, err
		}
		if err := materialise(tx, "form_ids", params["form_ids"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["subs"], countedRows, allPartitions); err != nil {
			return nil, err
		}
		// sync_state is not partitioned: the UPDATE reads and rewrites it whole.
		if err := s.scan(tx, t["state"], nil, allPartitions); err != nil {
			return nil, err
		}
		subs, st := quoteIdent(t["subs"]), quoteIdent(t["state"])
		n, err := s.dml(tx, t["state"], `UPDATE `+st+` SET
			row_count = (SELECT COALESCE(SUM(deleted_at IS NULL), 0) FROM `+subs+` AS c WHERE c.form_id = `+st+`.form_id),
			deleted_count = (SELECT COALESCE(SUM(deleted_at IS NOT NULL), 0) FROM `+subs+` AS c WHERE c.form_id = `+st+`.form_id)
			WHERE form_id IN (SELECT value FROM temp.param_form_ids)`, params)
		if err != nil {
			return nil, err
		}
		return &result{dml: n}, nil
	})
}

// removeForm is `formsync remove`'s transaction: the lock, the check of
// the form's revision, its rows when rows is set, then its state deleted,
// or reduced to its tombstones when it has some.
func (s *Server) removeForm(t map[string]string, params map[string]param, rows bool) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.takeLock(tx, t["lock"], params); err != nil {
			return nil, err
		}
		st, subs := quoteIdent(t["state"]), quoteIdent(t["subs"])
		if err := s.scan(tx, t["state"], []string{"form_id", "revision"}, allPartitions); err != nil {
			return nil, err
		}
		q := `SELECT COALESCE((SELECT COALESCE(revision, 0) FROM ` + st + ` WHERE form_id = @form_id), 0) != @revision`
		args, err := named(q, params)
		if err != nil {
			return nil, err
		}
		var moved bool
		if err := tx.QueryRow(q, args...).Scan(&moved); err != nil {
			return nil, fmt.Errorf("bqfake: %w", err)
		}
		if moved {
			return nil, invalidQuery("formsync_state_conflict: the sync state of a form changed since it was read")
		}
		var affected int64
		if rows {
			cond := `form_id = @form_id`
			if args, err = named(cond, params); err != nil {
				return nil, err
			}
			if err := s.scan(tx, t["subs"], []string{"form_id", "created_at"}, allPartitions); err != nil {
				return nil, err
			}
			if err := s.touch(tx, t["subs"], cond, true, args...); err != nil {
				return nil, err
			}
			n, err := s.dml(tx, t["subs"], `DELETE FROM `+subs+` WHERE `+cond, params)
			if err != nil {
				return nil, err
			}
			affected += n
			// The form's copies (the table is clustered, not partitioned).
			if err := s.scan(tx, t["copies"], []string{"form_id"}, allPartitions); err != nil {
				return nil, err
			}
			n, err = s.dml(tx, t["copies"], `DELETE FROM `+quoteIdent(t["copies"])+` WHERE `+cond, params)
			if err != nil {
				return nil, err
			}
			affected += n
		}
		// The DELETE and the UPDATE of sync_state, each reading it whole.
		for range 2 {
			if err := s.scan(tx, t["state"], nil, allPartitions); err != nil {
				return nil, err
			}
		}
		reset := `wm_created_at = NULL, wm_id = 0, boundary = NULL, sort_order = '', last_total = -1,
			last_success_at = NULL, last_error_at = NULL, last_error = '', backfill = NULL, last_reconcile_at = NULL,
			copies = NULL, last_commit = NULL, updated_at = @synced_at, revision = COALESCE(revision, 0) + 1`
		if rows {
			reset += `, row_count = 0, deleted_count = 0, field_names = NULL, field_policy = '', max_submission_id = NULL`
		}
		for _, q := range []string{
			`DELETE FROM ` + st + ` WHERE form_id = @form_id AND forgotten IS NULL`,
			`UPDATE ` + st + ` SET ` + reset + ` WHERE form_id = @form_id`,
		} {
			n, err := s.dml(tx, t["state"], q, params)
			if err != nil {
				return nil, err
			}
			affected += n
		}
		return &result{dml: affected}, nil
	})
}

// EditByHand runs q, SQLite SQL, on the fake's tables behind the sink's
// back, as a person changes a table in the console (deletes a state row,
// sets a counter): the table project.dataset.name is the SQLite table
// "project.dataset.name". It returns how many rows q changed.
func (s *Server) EditByHand(q string, args ...any) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.db.Exec(q, args...)
	if err != nil {
		return 0, fmt.Errorf("bqfake: editing by hand: %w", err)
	}
	return r.RowsAffected()
}
