package bqfake

import (
	"cmp"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	bqv2 "google.golang.org/api/bigquery/v2"
)

// statement is a recognised statement, ready to run.
type statement struct {
	kind string // statementType as BigQuery reports it
	refs []string
	// mutates lists the tables a transaction script changes: BigQuery
	// cancels a transaction that mutates a table another running
	// transaction mutates.
	mutates []string
	run     func(s *Server, params map[string]param) (*result, error)
}

// normalise collapses whitespace outside string literals and quoted
// identifiers, and replaces each backquoted table reference (one with a
// dot) by `?`, returning the references in order. Text inside quotes is
// kept byte for byte so that a literal's value never changes.
func normalise(q string) (string, []string, error) {
	var b strings.Builder
	var refs []string
	space := false
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
			i++
			continue
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for ; j < len(q) && q[j] != c; j++ {
				if q[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(q) {
				return "", nil, invalidQuery("Syntax error: Unclosed string literal or identifier")
			}
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			tok := q[i : j+1]
			if c == '`' && strings.Contains(tok, ".") {
				refs = append(refs, tok[1:len(tok)-1])
				tok = "`?`"
			}
			b.WriteString(tok)
			i = j + 1
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(c)
		i++
	}
	return b.String(), refs, nil
}

type shapeDef struct {
	text   string
	kind   string
	params map[string]string // name -> GoogleSQL type
	// roles names each table reference, in order of appearance: "state"
	// (sync_state), "subs" (submissions) or "staging". References with
	// the same role must be the same table.
	roles []string
	// mutated are the roles of the tables a script mutates.
	mutated []string
	handler func(s *Server, t map[string]string, params map[string]param) (*result, error)
}

var statesType = "ARRAY<STRUCT<form_id STRING, wm_created_at TIMESTAMP, wm_id INT64, boundary STRING, sort_order STRING, last_total INT64, field_names STRING, last_success_at TIMESTAMP, last_error_at TIMESTAMP, last_error STRING, backfill STRING, revision INT64, last_reconcile_at TIMESTAMP, field_policy STRING, forgotten STRING, copies STRING, field_types STRING>>"

var forgetType = "ARRAY<STRUCT<form_id STRING, submission_key STRING>>"

var tombstonesType = "ARRAY<STRUCT<form_id STRING, tombstone STRING, pending BOOL, removed BOOL>>"

var shapes = map[string]*shapeDef{}

func init() {
	commitParams := map[string]string{"states": statesType, "synced_at": "TIMESTAMP", "commit_id": "STRING", "created_from": "TIMESTAMP", "created_to": "TIMESTAMP", "form_ids": "ARRAY<STRING>",
		"outside_forms": "ARRAY<STRING>", "outside_before": "TIMESTAMP", "outside_after": "TIMESTAMP", "bound_forms": "ARRAY<STRING>"}
	deletionsParams := map[string]string{"states": statesType, "synced_at": "TIMESTAMP", "commit_id": "STRING", "form_ids": "ARRAY<STRING>", "forget": forgetType, "reconcile_forms": "ARRAY<STRING>",
		"forget_from": "TIMESTAMP", "forget_to": "TIMESTAMP", "reconcile_from": "TIMESTAMP", "reconcile_to": "TIMESTAMP"}
	commitDeletionsParams := map[string]string{"created_from": "TIMESTAMP", "created_to": "TIMESTAMP",
		"outside_forms": "ARRAY<STRING>", "outside_before": "TIMESTAMP", "outside_after": "TIMESTAMP", "bound_forms": "ARRAY<STRING>"}
	for k, v := range deletionsParams {
		commitDeletionsParams[k] = v
	}
	commit := func(rows, deletions bool) func(*Server, map[string]string, map[string]param) (*result, error) {
		return func(s *Server, t map[string]string, params map[string]param) (*result, error) {
			return s.commitScript(t, params, rows, deletions)
		}
	}
	writeStateParams := map[string]string{"states": statesType, "synced_at": "TIMESTAMP", "commit_id": "STRING"}
	// withTombstones is a script's shape with the tombstones MERGE after
	// its revision check (its third table reference).
	withTombstones := func(text string, d *shapeDef) *shapeDef {
		params := map[string]string{"tombstones": tombstonesType}
		for k, v := range d.params {
			params[k] = v
		}
		roles := append(append(append([]string{}, d.roles[:2]...), "tombs"), d.roles[2:]...)
		return &shapeDef{text, d.kind, params, roles, append([]string{"tombs"}, d.mutated...), d.handler}
	}
	scripts := []*shapeDef{
		{shapeWriteState, "SCRIPT", writeStateParams, []string{"lock", "state", "state"}, []string{"lock", "state"}, (*Server).writeState},
		{shapeCommit, "SCRIPT", commitParams, []string{"lock", "state", "staging", "subs", "subs", "subs", "state", "subs"}, []string{"lock", "subs", "state"}, commit(true, false)},
		{shapeCommitDeletions, "SCRIPT", commitDeletionsParams,
			[]string{"lock", "state", "subs", "subs", "copies", "staging", "subs", "subs", "subs", "subs", "subs", "state", "subs"}, []string{"lock", "subs", "copies", "state"}, commit(true, true)},
		{shapeWriteStateDeletions, "SCRIPT", deletionsParams, []string{"lock", "state", "subs", "subs", "copies", "subs", "subs", "state"}, []string{"lock", "subs", "copies", "state"}, commit(false, true)},
	}
	defs := append([]*shapeDef{
		withTombstones(shapeWriteStateTombstones, scripts[0]),
		withTombstones(shapeCommitTombstones, scripts[1]),
		withTombstones(shapeCommitDeletionsTombstones, scripts[2]),
		withTombstones(shapeWriteStateDeletionsTombstones, scripts[3]),
		{shapeReadTombstones, "SELECT", map[string]string{"form_ids": "ARRAY<STRING>"}, []string{"tombs"}, nil, (*Server).readTombstones},
		{shapeMoveTombstones, "SCRIPT", map[string]string{"synced_at": "TIMESTAMP", "commit_id": "STRING"},
			[]string{"lock", "tombs", "state", "tombs", "state"}, []string{"lock", "tombs", "state"}, (*Server).moveTombstones},
	}, scripts...)
	register(append(defs, []*shapeDef{
		{shapeReadState, "SELECT", map[string]string{"form_ids": "ARRAY<STRING>"}, []string{"state"}, nil, readState("copies", "max_submission_id", "field_types")},
		{shapeReadStateUnmigrated, "SELECT", map[string]string{"form_ids": "ARRAY<STRING>"}, []string{"state"}, nil, readState("NULL", "NULL", "NULL")},
		{shapeReadCommits, "SELECT", map[string]string{"form_ids": "ARRAY<STRING>"}, []string{"state"}, nil, (*Server).readCommits},
		{shapeViewForms, "SELECT", nil, []string{"state"}, nil, (*Server).viewForms},
		{shapeReadRows, "SELECT", map[string]string{"form_id": "STRING"}, []string{"subs"}, nil, (*Server).readRows},
		{shapeFind, "SELECT", map[string]string{"form_id": "STRING", "keys": "ARRAY<STRING>"}, []string{"subs"}, nil, (*Server).find},
		{shapeFindField, "SELECT", map[string]string{"form_id": "STRING", "field": "STRING"}, []string{"subs"}, nil, (*Server).findField},
		{shapeScrubStaging, "DELETE", map[string]string{"forget": forgetType}, []string{"staging"}, nil, (*Server).scrubStaging},
		{shapeSeedLock, "INSERT", nil, []string{"lock", "lock"}, nil, (*Server).seedLock},
		{shapeFilesView, "CREATE_VIEW", nil, []string{"view", "subs", "copies"}, nil, (*Server).createFilesView},
	}...)...)
}

// register adds shapes the fake runs, each checked to have one role per
// table reference.
func register(defs ...*shapeDef) {
	for _, d := range defs {
		n, _, err := normalise(d.text)
		if err != nil {
			panic(err)
		}
		if refs := strings.Count(n, "`?`"); refs != len(d.roles) {
			panic(fmt.Sprintf("bqfake: a shape has %d table references, %d roles", refs, len(d.roles)))
		}
		shapes[n] = d
	}
}

// roleTables maps each role of a shape to its table, checking that
// references with one role name one table.
func roleTables(roles, refs []string) (map[string]string, error) {
	if len(roles) != len(refs) {
		return nil, invalidQuery("bqfake: statement with unexpected table references %v", refs)
	}
	t := map[string]string{}
	for i, r := range roles {
		if prev, ok := t[r]; ok && prev != refs[i] {
			return nil, invalidQuery("bqfake: statement with unexpected table references %v", refs)
		}
		t[r] = refs[i]
	}
	return t, nil
}

// recognise matches a query against the fixed shapes. Anything else is
// refused: the fake only answers what it can answer truthfully.
func (s *Server) recognise(q string) (*statement, error) {
	if err := textLimits(q); err != nil {
		return nil, err
	}
	n, refs, err := normalise(q)
	if err != nil {
		return nil, err
	}
	n = strings.TrimSuffix(n, ";")
	for _, r := range refs {
		p, d, t, ok := splitRef(r)
		if !ok {
			return nil, invalidQuery("bqfake: table reference %q is not project.dataset.table", r)
		}
		if _, err := s.dataset(p, d); err != nil {
			return nil, err
		}
		if strings.HasPrefix(n, "CREATE OR REPLACE VIEW ") && r == refs[0] {
			continue // the view being created need not exist
		}
		if _, err := s.table(p, d, t); err != nil {
			return nil, err
		}
	}
	if d, ok := shapes[n]; ok || shapes[n+";"] != nil {
		if !ok {
			d = shapes[n+";"]
		}
		t, err := roleTables(d.roles, refs)
		if err != nil {
			return nil, err
		}
		var mutates []string
		for _, r := range d.mutated {
			mutates = append(mutates, t[r])
		}
		return &statement{kind: d.kind, refs: refs, mutates: mutates, run: func(s *Server, params map[string]param) (*result, error) {
			for name, typ := range d.params {
				p, ok := params[name]
				if !ok {
					return nil, invalidQuery("Query parameter '%s' not found", name)
				}
				if got := p.Type.String(); got != typ {
					return nil, invalidQuery("Query parameter '%s' has type %s, the statement needs %s", name, got, typ)
				}
			}
			return d.handler(s, t, params)
		}}, nil
	}
	if m := splitViewRE.FindStringSubmatch(n); m != nil && len(refs) == 2 {
		return s.recogniseSplitView(refs, m[1], m[2], m[3], m[4])
	}
	if m := viewRE.FindStringSubmatch(n); m != nil && len(refs) == 2 {
		return s.recogniseView(refs, m[1], m[2], m[3], m[4] != "")
	}
	if selectAllRE.MatchString(n) && len(refs) == 1 {
		return &statement{kind: "SELECT", refs: refs, run: func(s *Server, _ map[string]param) (*result, error) {
			p, d, t, _ := splitRef(refs[0])
			tbl, err := s.table(p, d, t)
			if err != nil {
				return nil, err
			}
			if _, err := s.tx(func(tx *sql.Tx) (*result, error) {
				return nil, s.scanRead(tx, refs[0])
			}); err != nil {
				return nil, err
			}
			return s.selectAll(refs[0], tbl.Schema)
		}}, nil
	}
	short := n
	if len(short) > 200 {
		short = short[:200] + "..."
	}
	return nil, invalidQuery("bqfake: unsupported statement: %s", short)
}

// tx runs fn in one SQLite transaction: all or nothing.
func (s *Server) tx(fn func(tx *sql.Tx) (*result, error)) (*result, error) {
	tx, err := s.db.Begin()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if d := s.dry; d != nil {
		if err := d.mark(tx); err != nil {
			return nil, err
		}
	}
	res, err := fn(tx)
	if err != nil {
		return nil, err
	}
	if d := s.dry; d != nil {
		return res, d.capture(tx) // and roll back
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

func (s *Server) query(tx *sql.Tx, fields []*bqv2.TableFieldSchema, q string, args ...any) (*result, error) {
	rows, err := tx.Query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("bqfake: %w", err)
	}
	return scanResult(rows, fields)
}

func exec(tx *sql.Tx, q string, args ...any) (int64, error) {
	r, err := tx.Exec(q, args...)
	if err != nil {
		return 0, fmt.Errorf("bqfake: %w", err)
	}
	return r.RowsAffected()
}

// named binds the scalar parameters a SQLite statement mentions.
func named(q string, params map[string]param) ([]any, error) {
	var args []any
	for name, p := range params {
		if !strings.Contains(q, "@"+name) || p.Type.Type == "ARRAY" {
			continue
		}
		v, err := scalar(p.Type, p.Value)
		if err != nil {
			return nil, err
		}
		args = append(args, sql.Named(name, v))
	}
	return args, nil
}

func col(name, typ string) *bqv2.TableFieldSchema {
	return &bqv2.TableFieldSchema{Name: name, Type: typ, Mode: "NULLABLE"}
}

// dmlStep runs q, one SQLite step of a DML statement on ref's table, and
// marks the table mutated when it changed stored rows (insert false: an
// UPDATE or a DELETE; rows only inserted conflict with nothing, as in
// BigQuery). It returns the rows affected.
func (s *Server) dmlStep(tx *sql.Tx, ref, q string, insert bool, args ...any) (int64, error) {
	n, err := exec(tx, q, args...)
	if err != nil {
		return 0, err
	}
	if n > 0 && !insert {
		s.mutate(ref)
	}
	return n, nil
}

// dml is one DML statement of a job on ref's table, in one SQLite step:
// its parameters bound from params, the table marked mutated when it
// changed stored rows, the statement counted (Stats.DML).
func (s *Server) dml(tx *sql.Tx, ref, q string, params map[string]param) (int64, error) {
	args, err := named(q, params)
	if err != nil {
		return 0, err
	}
	n, err := s.dmlStep(tx, ref, q, false, args...)
	if err != nil {
		return 0, err
	}
	s.countDML(ref)
	return n, nil
}

func (s *Server) countDML(ref string) {
	_, d, t, _ := splitRef(ref)
	if s.dry != nil {
		s.dry.dml[d+"."+t]++
		return
	}
	s.stats.DML[d+"."+t]++
}

// readState reads the state of the given forms, copies, max_submission_id
// and field_types read as the expressions given: the column, or NULL from
// a table without it.
func readState(copies, maxID, fieldTypes string) func(*Server, map[string]string, map[string]param) (*result, error) {
	return func(s *Server, t map[string]string, params map[string]param) (*result, error) {
		return s.readState(t, params, copies, maxID, fieldTypes)
	}
}

func (s *Server) readState(t map[string]string, params map[string]param, copies, maxID, fieldTypes string) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "form_ids", params["form_ids"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["state"], nil, allPartitions); err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{
			col("form_id", "STRING"), col("wm_created_at", "TIMESTAMP"), col("wm_id", "INTEGER"),
			col("boundary", "STRING"), col("sort_order", "STRING"), col("last_total", "INTEGER"),
			col("row_count", "INTEGER"), col("field_names", "STRING"), col("last_success_at", "TIMESTAMP"),
			col("last_error_at", "TIMESTAMP"), col("last_error", "STRING"), col("backfill", "STRING"),
			col("revision", "INTEGER"), col("deleted_count", "INTEGER"), col("last_reconcile_at", "TIMESTAMP"),
			col("field_policy", "STRING"), col("forgotten", "STRING"), col("copies", "STRING"),
			col("max_submission_id", "INTEGER"), col("field_types", "STRING"),
		}, `SELECT form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names,
			last_success_at, last_error_at, last_error, backfill, COALESCE(revision, 0), COALESCE(deleted_count, 0),
			last_reconcile_at, COALESCE(field_policy, ''), forgotten, `+copies+`, `+maxID+`, `+fieldTypes+`
			FROM `+quoteIdent(t["state"])+`
			WHERE (SELECT count(*) FROM temp.param_form_ids) = 0 OR form_id IN (SELECT value FROM temp.param_form_ids)
			ORDER BY form_id`)
	})
}

// readCommits reads the last commit of the given forms.
func (s *Server) readCommits(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "form_ids", params["form_ids"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["state"], []string{"form_id", "last_commit"}, allPartitions); err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{col("form_id", "STRING"), col("last_commit", "STRING")},
			`SELECT form_id, last_commit FROM `+quoteIdent(t["state"])+`
			WHERE form_id IN (SELECT value FROM temp.param_form_ids) ORDER BY form_id`)
	})
}

// viewForms reads the columns sync_state has had from the start, to
// recreate the forms' views.
func (s *Server) viewForms(t map[string]string, _ map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.scan(tx, t["state"], []string{"form_id", "field_names"}, allPartitions); err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{col("form_id", "STRING"), col("field_names", "STRING")},
			`SELECT form_id, field_names FROM `+quoteIdent(t["state"])+` ORDER BY form_id`)
	})
}

// rowColumns are the columns readRows and find select.
func rowColumns() []*bqv2.TableFieldSchema {
	return []*bqv2.TableFieldSchema{
		col("submission_id", "INTEGER"), col("submission_key", "STRING"), col("created_at", "TIMESTAMP"),
		col("is_spam", "BOOLEAN"), col("fields", "STRING"), col("files", "STRING"), col("raw", "STRING"),
		col("deleted_at", "TIMESTAMP"),
	}
}

// rowRead are the submissions columns readRows and find read.
var rowRead = []string{"form_id", "submission_id", "submission_key", "created_at", "is_spam", "fields", "fields_text", "files", "files_text", "raw", "deleted_at"}

func (s *Server) readRows(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.scan(tx, t["subs"], rowRead, everyPartition); err != nil {
			return nil, err
		}
		q := `SELECT submission_id, submission_key, created_at, is_spam, COALESCE(fields_text, fields),
			COALESCE(files_text, files), raw, deleted_at
			FROM ` + quoteIdent(t["subs"]) + ` WHERE form_id = @form_id ORDER BY created_at, submission_key`
		args, err := named(q, params)
		if err != nil {
			return nil, err
		}
		return s.query(tx, rowColumns(), q, args...)
	})
}

// find is the sink's Find: the rows of the form whose key is in @keys.
func (s *Server) find(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "keys", params["keys"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["subs"], rowRead, everyPartition); err != nil {
			return nil, err
		}
		q := `SELECT submission_id, submission_key, created_at, is_spam, COALESCE(fields_text, fields),
			COALESCE(files_text, files), raw, deleted_at
			FROM ` + quoteIdent(t["subs"]) + ` AS t
			WHERE form_id = @form_id AND submission_key IN (SELECT value FROM temp.param_keys)
			ORDER BY created_at, submission_key`
		args, err := named(q, params)
		if err != nil {
			return nil, err
		}
		return s.query(tx, rowColumns(), q, args...)
	})
}

// findField is the first step of the sink's Find by a field's value: the
// key of every row of the form whose fields object has the member @field
// holding a JSON string (JSON_TYPE(fields[@field]) = 'string': a member
// name is matched exactly, never parsed as a path), with the SHA-256 of
// that string, computed here.
func (s *Server) findField(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "created_at", "fields"}, everyPartition); err != nil {
			return nil, err
		}
		q := `SELECT t.submission_key, j.atom FROM ` + quoteIdent(t["subs"]) + ` AS t, json_each(t.fields) AS j
			WHERE t.form_id = @form_id AND j.key = @field AND j.type = 'text'`
		args, err := named(q, params)
		if err != nil {
			return nil, err
		}
		rows, err := tx.Query(q, args...)
		if err != nil {
			return nil, err
		}
		res := &result{fields: []*bqv2.TableFieldSchema{col("submission_key", "STRING"), col("value_sha256", "STRING")}}
		for rows.Next() {
			var key, v string
			if err := rows.Scan(&key, &v); err != nil {
				rows.Close()
				return nil, err
			}
			d := sha256.Sum256([]byte(v))
			res.rows = append(res.rows, []any{key, hex.EncodeToString(d[:])})
		}
		rows.Close()
		return res, rows.Err()
	})
}

// scrubStaging deletes the @forget rows from a staging table.
func (s *Server) scrubStaging(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "forget", params["forget"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["staging"], nil, allPartitions); err != nil {
			return nil, err
		}
		res, err := tx.Exec(`DELETE FROM ` + quoteIdent(t["staging"]) + ` AS s
			WHERE EXISTS (SELECT 1 FROM temp.param_forget AS f WHERE f.form_id = s.form_id AND f.submission_key = s.submission_key)`)
		if err != nil {
			return nil, err
		}
		n, _ := res.RowsAffected()
		return &result{dml: n}, nil
	})
}

// minTimestamp is TIMESTAMP '0001-01-01 00:00:00+00' in microseconds: the
// sentinel the sink sends for "no time" (NULLIF turns it into NULL).
var minTimestamp = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// assertRevisions is the scripts' revision check (a SELECT calling ERROR): every form's stored revision
// (NULL and a missing row read as 0) is the one its state carries.
func (s *Server) assertRevisions(tx *sql.Tx, ref string, params map[string]param) error {
	if err := materialise(tx, "states", params["states"]); err != nil {
		return err
	}
	if err := s.scan(tx, ref, []string{"form_id", "revision"}, allPartitions); err != nil {
		return err
	}
	var n int
	err := tx.QueryRow(`SELECT count(*) FROM temp.param_states AS st LEFT JOIN ` + quoteIdent(ref) + ` AS t ON t.form_id = st.form_id
		WHERE COALESCE(t.revision, 0) != st.revision`).Scan(&n)
	if err != nil {
		return fmt.Errorf("bqfake: %w", err)
	}
	if n > 0 {
		return invalidQuery("formsync_state_conflict: the sync state of a form changed since it was read")
	}
	return nil
}

// mergeState is the sync_state MERGE on SQLite: source rows are the
// @states parameter with added_rows and added_deleted (0, or from the
// commit's counts) and last_commit, the JSON object of @commit_id and the
// counts. counts is the commit's counts table (a table name or a
// parenthesised subquery, one row per form), or "" when it counts nothing.
//
// maxID is the SQLite expression of each source row's max_id (st is the
// @states row): "" for NULL, the largest id stored now for a commit
// with rows. A stored max_submission_id is kept when max_id is NULL and
// raised to it otherwise.
func (s *Server) mergeState(tx *sql.Tx, ref string, params map[string]param, counts, maxID string) (int64, error) {
	if err := materialise(tx, "states", params["states"]); err != nil {
		return 0, err
	}
	st := quoteIdent(ref)
	// sync_state is not partitioned: its MERGE reads and rewrites it whole.
	if err := s.scan(tx, ref, nil, allPartitions); err != nil {
		return 0, err
	}
	if _, err := exec(tx, `DROP TABLE IF EXISTS temp._fake_state_src`); err != nil {
		return 0, err
	}
	ts := func(c string) string { return fmt.Sprintf("NULLIF(st.%s, %d) AS %s", c, minTimestamp, c) }
	count := func(c string) string { return "0" }
	if counts != "" {
		count = func(c string) string {
			return `COALESCE((SELECT ` + c + ` FROM ` + counts + ` AS c WHERE c.form_id = st.form_id), 0)`
		}
	}
	src := `CREATE TEMP TABLE _fake_state_src AS SELECT st.form_id, ` + ts("wm_created_at") + `, st.wm_id,
		st.boundary, st.sort_order, st.last_total, st.field_names, ` + ts("last_success_at") + `, ` + ts("last_error_at") + `,
		st.last_error, NULLIF(st.backfill, '') AS backfill, st.revision, ` + ts("last_reconcile_at") + `, st.field_policy,
		NULLIF(st.forgotten, '') AS forgotten, NULLIF(st.copies, '') AS copies, ` + cmp.Or(maxID, "NULL") + ` AS max_id, NULLIF(st.field_types, '') AS field_types, ` + count("live_delta") + ` AS added_rows, ` + count("deleted_delta") + ` AS added_deleted,
		json_object('id', @commit_id, 'inserted', ` + count("inserted") + `, 'updated', ` + count("updated") + `,
			'restored', ` + count("restored") + `, 'deleted', ` + count("deleted") + `, 'forgotten', ` + count("forgotten") + `) AS last_commit
		FROM temp.param_states AS st`
	args, err := named(src, params)
	if err != nil {
		return 0, err
	}
	if _, err := exec(tx, src, args...); err != nil {
		return 0, err
	}
	var dup string
	err = tx.QueryRow(`SELECT t.form_id FROM ` + st + ` AS t JOIN temp._fake_state_src AS s ON t.form_id = s.form_id
		GROUP BY t.rowid HAVING count(*) > 1 LIMIT 1`).Scan(&dup)
	if err == nil {
		return 0, invalidQuery("UPDATE/MERGE must match at most one source row for each target row (form_id %s)", dup)
	} else if err != sql.ErrNoRows {
		return 0, err
	}
	args, err = named("@synced_at", params)
	if err != nil {
		return 0, err
	}
	n, err := s.dmlStep(tx, ref, `UPDATE `+st+` SET wm_created_at = s.wm_created_at, wm_id = s.wm_id, boundary = s.boundary,
		sort_order = s.sort_order, last_total = s.last_total, row_count = `+st+`.row_count + s.added_rows,
		deleted_count = COALESCE(`+st+`.deleted_count, 0) + s.added_deleted,
		field_names = s.field_names, last_success_at = s.last_success_at, last_error_at = s.last_error_at,
		last_error = s.last_error, backfill = s.backfill, updated_at = @synced_at, revision = s.revision + 1,
		last_reconcile_at = s.last_reconcile_at, field_policy = s.field_policy, forgotten = s.forgotten,
		copies = s.copies, last_commit = s.last_commit,
		max_submission_id = CASE WHEN s.max_id IS NULL THEN `+st+`.max_submission_id ELSE max(COALESCE(`+st+`.max_submission_id, 0), s.max_id) END,
		field_types = s.field_types
		FROM temp._fake_state_src AS s WHERE `+st+`.form_id = s.form_id`, false, args...)
	if err != nil {
		return 0, err
	}
	m, err := s.dmlStep(tx, ref, `INSERT INTO `+st+` (form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count,
		field_names, last_success_at, last_error_at, last_error, backfill, updated_at, revision, deleted_count,
		last_reconcile_at, field_policy, forgotten, copies, last_commit, max_submission_id, field_types)
		SELECT s.form_id, s.wm_created_at, s.wm_id, s.boundary, s.sort_order, s.last_total, s.added_rows,
		s.field_names, s.last_success_at, s.last_error_at, s.last_error, s.backfill, @synced_at, s.revision + 1,
		s.added_deleted, s.last_reconcile_at, s.field_policy, s.forgotten, s.copies, s.last_commit, s.max_id,
		s.field_types
		FROM temp._fake_state_src AS s WHERE s.form_id NOT IN (SELECT form_id FROM `+st+`)`, true, args...)
	if err != nil {
		return 0, err
	}
	if _, err := exec(tx, `DROP TABLE temp._fake_state_src`); err != nil {
		return 0, err
	}
	s.countDML(ref)
	return n + m, nil
}

// seedLock inserts sync_lock's row when the table has none.
func (s *Server) seedLock(t map[string]string, _ map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.scan(tx, t["lock"], nil, allPartitions); err != nil {
			return nil, err
		}
		n, err := exec(tx, `INSERT INTO `+quoteIdent(t["lock"])+` (commit_id, locked_at)
			SELECT '', ? WHERE NOT EXISTS (SELECT 1 FROM `+quoteIdent(t["lock"])+`)`, s.opts.Now().UnixMicro())
		if err != nil {
			return nil, err
		}
		return &result{dml: n}, nil
	})
}

// takeLock is a script's first statement: the UPDATE of sync_lock's rows.
func (s *Server) takeLock(tx *sql.Tx, ref string, params map[string]param) error {
	if err := s.scan(tx, ref, nil, allPartitions); err != nil {
		return err
	}
	_, err := s.dml(tx, ref, `UPDATE `+quoteIdent(ref)+` SET commit_id = @commit_id, locked_at = @synced_at`, params)
	return err
}

// writeState is the state-only transaction: the lock, the revision check,
// then the MERGE.
func (s *Server) writeState(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.takeLock(tx, t["lock"], params); err != nil {
			return nil, err
		}
		if err := s.assertRevisions(tx, t["state"], params); err != nil {
			return nil, err
		}
		if err := s.writeTombstones(tx, t["tombs"], params); err != nil {
			return nil, err
		}
		n, err := s.mergeState(tx, t["state"], params, "", "")
		if err != nil {
			return nil, err
		}
		return &result{dml: n}, nil
	})
}

// fakePlan is the commit script's plan on SQLite: QUALIFY becomes a filter
// on a subquery, COUNTIF a SUM, TIMESTAMP_TRUNC(x, MILLISECOND) an integer
// division of the microseconds, IS DISTINCT FROM IS NOT, IF a CASE.
const fakePlan = `CREATE TEMP TABLE _formsync_plan AS
WITH staged AS (
  SELECT form_id, submission_id, submission_key, content_key, created_at, is_spam, fields, files,
    NULLIF(raw, '') AS raw, seq,
    COALESCE(bqfake_json_exact(fields), fields) AS fields_cmp,
    COALESCE(bqfake_json_exact(files), files) AS files_cmp,
    bqfake_json_exact(fields) IS NULL AS fields_inexact,
    bqfake_json_exact(files) IS NULL AS files_inexact
  FROM {{staging}}
),
versions AS (
  SELECT *,
    COALESCE(LAG(seq) OVER w IS NOT NULL AND (is_spam != LAG(is_spam) OVER w OR fields_cmp != LAG(fields_cmp) OVER w
      OR files_cmp != LAG(files_cmp) OVER w
      OR created_at / 1000 != LAG(created_at) OVER w / 1000
      OR (raw IS NOT NULL AND raw IS NOT LAG(raw) OVER w)), 0) AS changed
  FROM staged
  WINDOW w AS (PARTITION BY form_id, submission_key ORDER BY seq)
),
batch AS (
  SELECT * FROM (
    SELECT *,
      SUM(changed) OVER k AS inner_changes,
      FIRST_VALUE(is_spam) OVER k AS first_spam, FIRST_VALUE(fields_cmp) OVER k AS first_fields,
      FIRST_VALUE(files_cmp) OVER k AS first_files, FIRST_VALUE(created_at) OVER k AS first_created,
      FIRST_VALUE(raw) OVER k AS first_raw, FIRST_VALUE(content_key) OVER k AS first_content_key,
      FIRST_VALUE(seq) OVER k AS first_seq,
      ROW_NUMBER() OVER (PARTITION BY form_id, submission_key ORDER BY seq DESC) AS from_last
    FROM versions
    WINDOW k AS (PARTITION BY form_id, submission_key ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
  ) WHERE from_last = 1
),
stored AS (
  SELECT form_id, submission_id, submission_key, created_at, is_spam, COALESCE(fields_text, fields) AS fields,
    COALESCE(files_text, files) AS files, raw, deleted_at
  FROM {{subs}}
  WHERE created_at BETWEEN @created_from AND @created_to AND form_id IN (SELECT value FROM temp.param_form_ids)
),
claimed AS (
  SELECT *,
    CASE WHEN submission_id IS NOT NULL AND first_content_key != content_key AND EXISTS (
      SELECT 1 FROM stored AS l
      WHERE l.form_id = b.form_id AND l.submission_id IS NULL AND l.submission_key = b.first_content_key)
    THEN first_content_key ELSE content_key END AS claim_key
  FROM batch AS b
),
flagged AS (
  SELECT *,
    COALESCE(submission_id IS NULL AND seq < MAX(CASE WHEN submission_id IS NULL THEN NULL ELSE seq END) OVER c, 0) AS superseded
  FROM claimed
  WINDOW c AS (PARTITION BY form_id, content_key)
),
ranked AS (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY form_id, claim_key
      ORDER BY submission_id IS NULL AND NOT superseded DESC, submission_id IS NULL, first_seq) AS content_rank,
    MAX(CASE WHEN superseded THEN created_at END) OVER (PARTITION BY form_id, content_key) AS absorbed_created
  FROM flagged
),
elsewhere AS (
  SELECT form_id, submission_key, deleted_at FROM {{subs}}
  WHERE form_id IN (SELECT value FROM temp.param_outside_forms) AND (created_at < @outside_before OR created_at > @outside_after)
),
joined AS (
  SELECT s.*, COALESCE(k.submission_key, e.submission_key) AS stored_key, l.submission_key AS legacy_key,
    e.submission_key IS NOT NULL OR k.submission_key IS NOT NULL AND (k.is_spam != s.first_spam OR k.fields != s.first_fields
      OR k.files != s.first_files
      OR k.created_at / 1000 != s.first_created / 1000
      OR (s.first_raw IS NOT NULL AND (k.raw IS NULL OR k.raw != s.first_raw))
      OR (s.submission_id IS NOT NULL AND (k.submission_id IS NULL OR k.submission_id != s.submission_id))) AS first_differs,
    COALESCE(k.deleted_at, e.deleted_at) IS NOT NULL AS stored_deleted,
    l.deleted_at IS NOT NULL AS legacy_deleted,
    s.claim_key != s.first_content_key AS later_twin
  FROM ranked AS s
  LEFT JOIN stored AS k ON k.form_id = s.form_id AND k.submission_key = s.submission_key
  LEFT JOIN elsewhere AS e ON e.form_id = s.form_id AND e.submission_key = s.submission_key
  LEFT JOIN stored AS l ON s.submission_id IS NOT NULL AND s.content_rank = 1
    AND s.claim_key != s.submission_key AND l.form_id = s.form_id AND l.submission_id IS NULL
    AND l.submission_key = s.claim_key
)
SELECT form_id, submission_id, submission_key,
  CASE WHEN submission_id IS NOT NULL AND content_rank = 1 AND stored_key IS NULL AND legacy_key IS NULL AND absorbed_created IS NOT NULL
    THEN absorbed_created ELSE created_at END AS created_at,
  is_spam, fields, files, raw, fields_inexact, files_inexact,
  CASE
    WHEN superseded THEN 'none'
    WHEN stored_key IS NULL AND legacy_key IS NOT NULL AND NOT later_twin THEN 'rekey'
    WHEN stored_key IS NULL THEN 'insert'
    WHEN first_differs OR inner_changes > 0 THEN 'update'
    WHEN stored_deleted THEN 'restore'
    ELSE 'none'
  END AS action,
  CASE WHEN superseded THEN CASE WHEN stored_key IS NULL OR first_differs THEN 1 ELSE 0 END
    WHEN stored_key IS NULL AND legacy_key IS NOT NULL AND NOT later_twin OR first_differs THEN 1 ELSE 0 END + inner_changes AS updates,
  NOT superseded AND CASE WHEN stored_key IS NULL THEN legacy_key IS NOT NULL AND legacy_deleted AND NOT later_twin ELSE stored_deleted END AS restores,
  legacy_key IS NOT NULL AND (stored_key IS NOT NULL OR later_twin) AS twin_removed,
  legacy_key, legacy_deleted
FROM joined`

// fakePlanCounts is the script's per-form counts of the plan.
const fakePlanCounts = `SELECT form_id, SUM(action = 'insert') AS inserted, SUM(updates) AS updated, SUM(restores) AS restored,
    0 AS deleted, 0 AS forgotten,
    SUM(action = 'insert') + SUM(restores) - SUM(twin_removed AND NOT legacy_deleted) AS live_delta,
    -SUM(restores) - SUM(twin_removed AND legacy_deleted) AS deleted_delta
  FROM temp._formsync_plan
  GROUP BY form_id`

// commitScript is a commit transaction on SQLite; rows says it has the
// plan and submissions MERGE of a staging table, deletions the forget
// DELETE and the reconcile UPDATE. The MERGE's split WHEN clauses (with
// and without a staged raw) are the one clause here with raw =
// COALESCE(p.raw, t.raw).
func (s *Server) commitScript(t map[string]string, params map[string]param, rows, deletions bool) (*result, error) {
	subs, state := quoteIdent(t["subs"]), t["state"]
	temps := []string{"_formsync_plan", "_fake_src", "_fake_match", "_formsync_forgotten", "_formsync_reconciled", "_formsync_counts"}
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.takeLock(tx, t["lock"], params); err != nil {
			return nil, err
		}
		if err := s.assertRevisions(tx, state, params); err != nil {
			return nil, err
		}
		if err := s.writeTombstones(tx, t["tombs"], params); err != nil {
			return nil, err
		}
		for _, t := range temps {
			if _, err := exec(tx, "DROP TABLE IF EXISTS temp."+t); err != nil {
				return nil, err
			}
		}
		if err := materialise(tx, "form_ids", params["form_ids"]); err != nil {
			return nil, err
		}
		var affected int64
		if deletions {
			for _, p := range []string{"forget", "reconcile_forms"} {
				if err := materialise(tx, p, params[p]); err != nil {
					return nil, err
				}
			}
			forgotten := `form_id IN (SELECT value FROM temp.param_form_ids) AND created_at BETWEEN @forget_from AND @forget_to
				AND EXISTS (SELECT 1 FROM temp.param_forget AS f
				WHERE f.form_id = ` + subs + `.form_id AND f.submission_key = ` + subs + `.submission_key)`
			fargs, err := named(forgotten, params)
			if err != nil {
				return nil, err
			}
			fr, err := timeRange(params, "forget_from", "forget_to")
			if err != nil {
				return nil, err
			}
			// The count, then the DELETE: each reads the partitions of
			// @forget_from..@forget_to.
			if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "created_at", "deleted_at"}, fr); err != nil {
				return nil, err
			}
			if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "created_at"}, fr); err != nil {
				return nil, err
			}
			if err := s.touch(tx, t["subs"], forgotten, true, fargs...); err != nil {
				return nil, err
			}
			if _, err := exec(tx, `CREATE TEMP TABLE _formsync_forgotten AS
				SELECT form_id, SUM(deleted_at IS NULL) AS live, SUM(deleted_at IS NOT NULL) AS deleted
				FROM `+subs+` WHERE `+forgotten+` GROUP BY form_id`, fargs...); err != nil {
				return nil, err
			}
			n, err := s.dmlStep(tx, t["subs"], `DELETE FROM `+subs+` WHERE `+forgotten, false, fargs...)
			if err != nil {
				return nil, err
			}
			affected += n
			s.countDML(t["subs"])
			// The copies of the rows forgotten.
			if err := s.scan(tx, t["copies"], []string{"form_id", "submission_key"}, allPartitions); err != nil {
				return nil, err
			}
			n, err = s.dml(tx, t["copies"], `DELETE FROM `+quoteIdent(t["copies"])+` AS c WHERE EXISTS (SELECT 1 FROM temp.param_forget AS f
				WHERE f.form_id = c.form_id AND f.submission_key = c.submission_key)`, params)
			if err != nil {
				return nil, err
			}
			affected += n
		}
		if rows {
			n, err := s.mergeRows(tx, t, params)
			if err != nil {
				return nil, err
			}
			affected += n
		}
		counts := "(" + fakePlanCounts + ")"
		if deletions {
			unserved := `form_id IN (SELECT value FROM temp.param_reconcile_forms) AND created_at BETWEEN @reconcile_from AND @reconcile_to
				AND deleted_at IS NULL`
			if rows {
				unserved += ` AND NOT EXISTS (SELECT 1 FROM temp._formsync_plan AS p
					WHERE p.form_id = ` + subs + `.form_id AND p.submission_key = ` + subs + `.submission_key)`
			}
			uargs, err := named(unserved, params)
			if err != nil {
				return nil, err
			}
			rr, err := timeRange(params, "reconcile_from", "reconcile_to")
			if err != nil {
				return nil, err
			}
			if _, err := exec(tx, `CREATE TEMP TABLE _formsync_reconciled AS
				SELECT form_id, count(*) AS deleted FROM `+subs+` WHERE `+unserved+` GROUP BY form_id`, uargs...); err != nil {
				return nil, err
			}
			for range 2 { // the count, then the UPDATE
				if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "created_at", "deleted_at"}, rr); err != nil {
					return nil, err
				}
			}
			if err := s.touch(tx, t["subs"], unserved, true, uargs...); err != nil {
				return nil, err
			}
			n, err := s.dml(tx, t["subs"], `UPDATE `+subs+` SET deleted_at = @synced_at WHERE `+unserved, params)
			if err != nil {
				return nil, err
			}
			affected += n
			plan := ""
			if rows {
				plan = fakePlanCounts + ` UNION ALL `
			}
			if _, err := exec(tx, `CREATE TEMP TABLE _formsync_counts AS
				SELECT form_id, SUM(inserted) AS inserted, SUM(updated) AS updated, SUM(restored) AS restored,
					SUM(deleted) AS deleted, SUM(forgotten) AS forgotten, SUM(live_delta) AS live_delta,
					SUM(deleted_delta) AS deleted_delta
				FROM (`+plan+`
					SELECT form_id, 0 AS inserted, 0 AS updated, 0 AS restored, 0 AS deleted, live + deleted AS forgotten,
						-live AS live_delta, -deleted AS deleted_delta
					FROM temp._formsync_forgotten
					UNION ALL
					SELECT form_id, 0, 0, 0, deleted, 0, -deleted, deleted FROM temp._formsync_reconciled)
				GROUP BY form_id`); err != nil {
				return nil, err
			}
			counts = "temp._formsync_counts"
		}
		if f, ok := s.takeFault(OpScript); ok {
			return nil, &apiError{status: f.status, reason: f.reason, message: "bqfake: injected failure in the middle of the transaction"}
		}

		maxID := ""
		if rows {
			// The largest id stored now, in the partitions of the batch
			// and those outside the outside bounds.
			r, err := rowRanges(params)
			if err != nil {
				return nil, err
			}
			sp := r.batch.or(r.outside)
			if err := s.scan(tx, t["subs"], []string{"form_id", "submission_id", "created_at"}, sp); err != nil {
				return nil, err
			}
			// Only for @bound_forms: a form whose bound is not known
			// keeps it unknown (NULL).
			if err := materialise(tx, "bound_forms", params["bound_forms"]); err != nil {
				return nil, err
			}
			maxID = `CASE WHEN st.form_id IN (SELECT value FROM temp.param_bound_forms) THEN COALESCE((SELECT MAX(k.submission_id) FROM ` + subs + ` AS k WHERE k.form_id = st.form_id
				AND (k.created_at BETWEEN @created_from AND @created_to OR k.created_at < @outside_before OR k.created_at > @outside_after)), 0) END`
		}
		n, err := s.mergeState(tx, state, params, counts, maxID)
		if err != nil {
			return nil, err
		}
		res, err := s.query(tx, []*bqv2.TableFieldSchema{
			col("form_id", "STRING"), col("inserted", "INTEGER"), col("updated", "INTEGER"),
			col("restored", "INTEGER"), col("deleted", "INTEGER"), col("forgotten", "INTEGER"),
		}, `SELECT form_id, inserted, updated, restored, deleted, forgotten FROM `+counts+` ORDER BY form_id`)
		if err != nil {
			return nil, err
		}
		res.dml = affected + n
		for _, t := range temps {
			if _, err := exec(tx, "DROP TABLE IF EXISTS temp."+t); err != nil {
				return nil, err
			}
		}
		return res, nil
	})
}

// mergeRows builds the plan and runs the submissions MERGE: the source is
// the plan with one match key per row (the row's key, plus its
// content-keyed twin's as a second row); matches are computed first, on
// the snapshot, then each WHEN clause is applied to its matches.
func (s *Server) mergeRows(tx *sql.Tx, t map[string]string, params map[string]param) (int64, error) {
	subs := quoteIdent(t["subs"])
	plan := strings.NewReplacer("{{staging}}", quoteIdent(t["staging"]), "{{subs}}", subs).Replace(fakePlan)
	args, err := named(plan, params)
	if err != nil {
		return 0, err
	}
	if err := materialise(tx, "outside_forms", params["outside_forms"]); err != nil {
		return 0, err
	}
	r, err := rowRanges(params)
	if err != nil {
		return 0, err
	}
	// The plan reads the staging table, the stored rows of the batch's
	// range, and the key columns of the partitions outside it that the
	// outside bounds name (none, unless a form's staged ids may be stored
	// there).
	for _, r := range []struct {
		ref  string
		cols []string
		sp   span
	}{
		{t["staging"], nil, allPartitions},
		{t["subs"], rowRead, r.batch},
		{t["subs"], []string{"form_id", "submission_key", "created_at", "deleted_at"}, r.outside},
	} {
		if err := s.scan(tx, r.ref, r.cols, r.sp); err != nil {
			return 0, err
		}
	}
	if _, err := exec(tx, plan, args...); err != nil {
		return 0, err
	}
	if _, err := exec(tx, `CREATE TEMP TABLE _fake_src AS
		SELECT *, submission_key AS match_key, 0 AS twin FROM temp._formsync_plan WHERE action != 'none'
		UNION ALL
		SELECT *, legacy_key AS match_key, 1 AS twin FROM temp._formsync_plan WHERE legacy_key IS NOT NULL`); err != nil {
		return 0, err
	}
	on := `t.form_id = p.form_id AND t.submission_key = p.match_key
		AND (t.created_at BETWEEN @created_from AND @created_to OR t.created_at < @outside_before OR t.created_at > @outside_after)`
	matchSelect := `SELECT t.rowid AS trow, p.rowid AS prow,
		CASE WHEN p.twin AND p.action = 'rekey' THEN 1
		     WHEN p.twin THEN 2
		     WHEN p.action = 'update' THEN 3
		     WHEN p.action = 'restore' THEN 4 ELSE 0 END AS clause
		FROM temp._fake_src AS p JOIN ` + subs + ` AS t ON ` + on
	if args, err = named(matchSelect, params); err != nil {
		return 0, err
	}
	plans, err := explain(tx, matchSelect, args...)
	if err != nil {
		return 0, err
	}
	s.stats.MergePlan = plans
	if _, err := exec(tx, `CREATE TEMP TABLE _fake_match AS `+matchSelect, args...); err != nil {
		return 0, err
	}
	// The MERGE reads its target columns in the partitions its ON
	// condition's constant filter on created_at names, and rewrites those
	// it changes.
	if err := s.scan(tx, t["subs"], []string{"form_id", "submission_key", "submission_id", "created_at"}, r.batch.or(r.outside)); err != nil {
		return 0, err
	}
	if err := s.mergeTouches(tx, t["subs"]); err != nil {
		return 0, err
	}
	var dup int64
	err = tx.QueryRow(`SELECT trow FROM temp._fake_match GROUP BY trow HAVING count(*) > 1 LIMIT 1`).Scan(&dup)
	if err == nil {
		return 0, invalidQuery("UPDATE/MERGE must match at most one source row for each target row")
	} else if err != sql.ErrNoRows {
		return 0, err
	}
	jsonSet := `fields = bqfake_json_round_safe(p.fields), fields_text = CASE WHEN p.fields_inexact THEN p.fields END,
			files = bqfake_json_round_safe(p.files), files_text = CASE WHEN p.files_inexact THEN p.files END,
			raw = COALESCE(p.raw, ` + subs + `.raw), synced_at = @synced_at, deleted_at = NULL`
	matched := func(clause string) string {
		return `(SELECT m.trow, s.* FROM temp._fake_match AS m JOIN temp._fake_src AS s ON s.rowid = m.prow WHERE m.clause = ` + clause + `) AS p`
	}
	var affected int64
	steps := []string{
		`DELETE FROM ` + subs + ` WHERE rowid IN (SELECT trow FROM temp._fake_match WHERE clause = 2)`,
		`UPDATE ` + subs + ` SET submission_id = p.submission_id, submission_key = p.submission_key,
			is_spam = p.is_spam, ` + jsonSet + `
			FROM ` + matched("1") + ` WHERE ` + subs + `.rowid = p.trow`,
		`UPDATE ` + subs + ` SET submission_id = COALESCE(p.submission_id, ` + subs + `.submission_id),
			created_at = CASE WHEN ` + subs + `.created_at / 1000 = p.created_at / 1000 THEN ` + subs + `.created_at ELSE p.created_at END,
			is_spam = p.is_spam, ` + jsonSet + `
			FROM ` + matched("3") + ` WHERE ` + subs + `.rowid = p.trow`,
		`UPDATE ` + subs + ` SET synced_at = @synced_at, deleted_at = NULL
			FROM ` + matched("4") + ` WHERE ` + subs + `.rowid = p.trow`,
		`INSERT INTO ` + subs + ` (form_id, submission_id, submission_key, created_at, is_spam, fields, fields_text, files, files_text, raw, synced_at)
			SELECT p.form_id, p.submission_id, p.submission_key, p.created_at, p.is_spam,
			bqfake_json_round_safe(p.fields), CASE WHEN p.fields_inexact THEN p.fields END,
			bqfake_json_round_safe(p.files), CASE WHEN p.files_inexact THEN p.files END, p.raw, @synced_at
			FROM temp._fake_src AS p WHERE NOT p.twin AND p.action = 'insert' AND p.rowid NOT IN (SELECT prow FROM temp._fake_match)`,
	}
	for i, q := range steps {
		args, err := named(q, params)
		if err != nil {
			return 0, err
		}
		// Every step but the INSERT changes stored rows.
		n, err := s.dmlStep(tx, t["subs"], q, i == len(steps)-1, args...)
		if err != nil {
			return 0, err
		}
		affected += n
	}
	s.countDML(t["subs"])
	return affected, nil
}

// explain is SQLite's EXPLAIN QUERY PLAN of q, one step a line: the fake
// records the plan of its MERGE join so that tests can check that the
// match condition is an equality join (SEARCH ... USING ... INDEX) and not
// a scan of the table per source row.
func explain(tx *sql.Tx, q string, args ...any) (string, error) {
	rows, err := tx.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", fmt.Errorf("bqfake: explaining the MERGE join: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		b.WriteString(detail)
		b.WriteByte('\n')
	}
	return b.String(), rows.Err()
}

// unquote decodes a GoogleSQL single-quoted string literal.
func unquote(lit string) (string, error) {
	if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
		return "", invalidQuery("bqfake: not a string literal: %s", lit)
	}
	body := lit[1 : len(lit)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			if c == '\'' || c < 0x20 {
				return "", invalidQuery("Syntax error: Illegal character in string literal")
			}
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(body) {
			return "", invalidQuery("Syntax error: Illegal escape sequence")
		}
		switch e := body[i]; e {
		case '\\', '\'', '"', '`', '?':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			if i+1+n > len(body) {
				return "", invalidQuery("Syntax error: Illegal escape sequence: \\%c", e)
			}
			r, err := strconv.ParseUint(body[i+1:i+1+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(r)) {
				return "", invalidQuery("Syntax error: Illegal escape sequence: \\%c%s", e, body[i+1:i+1+n])
			}
			b.WriteRune(rune(r))
			i += n
		default:
			return "", invalidQuery("bqfake: unsupported escape sequence \\%c in a string literal", e)
		}
	}
	if !utf8.ValidString(b.String()) {
		return "", invalidQuery("Syntax error: string literal is not valid UTF-8")
	}
	return b.String(), nil
}

// sqliteLiteral writes s as an SQLite string literal; text holding a NUL
// travels as a hex blob cast to text.
func sqliteLiteral(s string) string {
	if strings.ContainsRune(s, 0) {
		return fmt.Sprintf("CAST(X'%x' AS TEXT)", s)
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// commitRanges are the partitions a commit's constant filters name: the
// batch's (@created_from..@created_to) and those outside
// @outside_before..@outside_after.
type commitRanges struct{ batch, outside span }

func rowRanges(params map[string]param) (commitRanges, error) {
	var ts [4]int64
	for i, name := range []string{"created_from", "created_to", "outside_before", "outside_after"} {
		p, ok := params[name]
		if !ok {
			return commitRanges{}, invalidQuery("Query parameter '%s' not found", name)
		}
		v, err := scalar(p.Type, p.Value)
		if err != nil {
			return commitRanges{}, err
		}
		n, ok := v.(int64)
		if !ok {
			return commitRanges{}, invalidQuery("Query parameter '%s' is NULL", name)
		}
		ts[i] = n
	}
	return commitRanges{batch: within(ts[0], ts[1]), outside: beyond(ts[2], ts[3])}, nil
}

// timeRange is the partitions a filter created_at BETWEEN @from AND @to
// names (the forget's, the reconcile's).
func timeRange(params map[string]param, from, to string) (span, error) {
	var ts [2]int64
	for i, name := range []string{from, to} {
		p, ok := params[name]
		if !ok {
			return span{}, invalidQuery("Query parameter '%s' not found", name)
		}
		v, err := scalar(p.Type, p.Value)
		if err != nil {
			return span{}, err
		}
		n, ok := v.(int64)
		if !ok {
			return span{}, invalidQuery("Query parameter '%s' is NULL", name)
		}
		ts[i] = n
	}
	return within(ts[0], ts[1]), nil
}

// mergeTouches records the partitions the submissions MERGE modifies
// (temp._fake_match against temp._fake_src): those of the rows it
// updates or deletes and those their new created_at moves them to,
// rewritten, and those it inserts into.
func (s *Server) mergeTouches(tx *sql.Tx, ref string) error {
	if err := s.touch(tx, ref, `rowid IN (SELECT trow FROM temp._fake_match WHERE clause > 0)`, true); err != nil {
		return err
	}
	if err := s.touchQuery(tx, ref, `SELECT DISTINCT `+dayOf("p.created_at")+` FROM temp._fake_match AS m
		JOIN temp._fake_src AS p ON p.rowid = m.prow WHERE m.clause = 3`, true); err != nil {
		return err
	}
	return s.touchQuery(tx, ref, `SELECT DISTINCT `+dayOf("created_at")+` FROM temp._fake_src
		WHERE NOT twin AND action = 'insert' AND rowid NOT IN (SELECT prow FROM temp._fake_match)`, false)
}

// readTombstones reads the tombstones of the given forms.
func (s *Server) readTombstones(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := materialise(tx, "form_ids", params["form_ids"]); err != nil {
			return nil, err
		}
		if err := s.scan(tx, t["tombs"], []string{"form_id", "tombstone", "pending"}, allPartitions); err != nil {
			return nil, err
		}
		return s.query(tx, []*bqv2.TableFieldSchema{col("form_id", "STRING"), col("tombstone", "STRING"), col("pending", "BOOLEAN")},
			`SELECT form_id, tombstone, pending FROM `+quoteIdent(t["tombs"])+`
			WHERE form_id IN (SELECT value FROM temp.param_form_ids) ORDER BY form_id, tombstone`)
	})
}

// writeTombstones is a script's MERGE of @tombstones into sync_tombstones
// on (form_id, tombstone): a removed one matched is deleted, another
// matched gets its pending flag, one not matched and not removed is
// inserted. Nothing when the script has no such statement (ref "").
func (s *Server) writeTombstones(tx *sql.Tx, ref string, params map[string]param) error {
	if ref == "" {
		return nil
	}
	if err := materialise(tx, "tombstones", params["tombstones"]); err != nil {
		return err
	}
	if err := s.scan(tx, ref, []string{"form_id", "tombstone"}, allPartitions); err != nil {
		return err
	}
	tb := quoteIdent(ref)
	var dup string
	err := tx.QueryRow(`SELECT t.tombstone FROM ` + tb + ` AS t JOIN temp.param_tombstones AS s
		ON t.form_id = s.form_id AND t.tombstone = s.tombstone GROUP BY t.rowid HAVING count(*) > 1 LIMIT 1`).Scan(&dup)
	if err == nil {
		return invalidQuery("UPDATE/MERGE must match at most one source row for each target row (tombstone %s)", dup)
	} else if err != sql.ErrNoRows {
		return err
	}
	match := `EXISTS (SELECT 1 FROM temp.param_tombstones AS s WHERE s.form_id = ` + tb + `.form_id AND s.tombstone = ` + tb + `.tombstone`
	if _, err := s.dmlStep(tx, ref, `DELETE FROM `+tb+` WHERE `+match+` AND s.removed)`, false); err != nil {
		return err
	}
	if _, err := s.dmlStep(tx, ref, `UPDATE `+tb+` SET pending = s.pending FROM temp.param_tombstones AS s
		WHERE s.form_id = `+tb+`.form_id AND s.tombstone = `+tb+`.tombstone AND NOT s.removed`, false); err != nil {
		return err
	}
	q := `INSERT INTO ` + tb + ` (form_id, tombstone, pending, forgotten_at)
		SELECT s.form_id, s.tombstone, s.pending, @synced_at FROM temp.param_tombstones AS s
		WHERE NOT s.removed AND NOT EXISTS (SELECT 1 FROM ` + tb + ` AS t WHERE t.form_id = s.form_id AND t.tombstone = s.tombstone)`
	args, err := named(q, params)
	if err != nil {
		return err
	}
	if _, err := s.dmlStep(tx, ref, q, true, args...); err != nil {
		return err
	}
	s.countDML(ref)
	return nil
}

// moveTombstones is the script that moves the tombstones sync_state's
// forgotten lists into sync_tombstones, leaving the salt and the count,
// and moves the revision of each state it changes.
func (s *Server) moveTombstones(t map[string]string, params map[string]param) (*result, error) {
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if err := s.takeLock(tx, t["lock"], params); err != nil {
			return nil, err
		}
		st, tb := quoteIdent(t["state"]), quoteIdent(t["tombs"])
		for range 2 { // the INSERT's read, then the UPDATE's
			if err := s.scan(tx, t["state"], []string{"form_id", "forgotten"}, allPartitions); err != nil {
				return nil, err
			}
		}
		if err := s.scan(tx, t["tombs"], []string{"form_id", "tombstone"}, allPartitions); err != nil {
			return nil, err
		}
		q := `INSERT INTO ` + tb + ` (form_id, tombstone, pending, forgotten_at)
			SELECT s.form_id, k.value, EXISTS (SELECT 1 FROM json_each(s.forgotten, '$.pending') AS p WHERE p.value = k.value), @synced_at
			FROM ` + st + ` AS s, json_each(s.forgotten, '$.keys') AS k
			WHERE s.forgotten IS NOT NULL AND json_type(s.forgotten, '$.keys') = 'array'
			AND NOT EXISTS (SELECT 1 FROM ` + tb + ` AS t WHERE t.form_id = s.form_id AND t.tombstone = k.value)`
		args, err := named(q, params)
		if err != nil {
			return nil, err
		}
		n, err := exec(tx, q, args...)
		if err != nil {
			return nil, err
		}
		s.countDML(t["tombs"])
		q = `UPDATE ` + st + ` SET forgotten = json_object('salt', json_extract(forgotten, '$.salt'), 'keys', json('[]'),
				'count', CAST(json_extract(forgotten, '$.count') AS INTEGER)),
			revision = COALESCE(revision, 0) + 1, updated_at = @synced_at
			WHERE forgotten IS NOT NULL AND json_type(forgotten, '$.keys') = 'array' AND json_array_length(forgotten, '$.keys') > 0`
		m, err := s.dml(tx, t["state"], q, params)
		if err != nil {
			return nil, err
		}
		return &result{dml: n + m}, nil
	})
}
