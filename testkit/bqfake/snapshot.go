package bqfake

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// BigQuery's transactions read a snapshot taken when they start, and two
// of them conflict only when both update or delete rows of one table:
// transactions that only insert run side by side and both commit, each
// having read its snapshot (two first commits of one form would both
// find no state and both insert it).
//
// The fake learns what a transaction changes by running it when its job
// starts, on the data as it is then, and rolling it back (a dry run).
// Its conflicts with the transactions running then are judged on the
// tables it updated or deleted rows of. A transaction that only inserts
// applies, when it finishes, the rows its dry run inserted: what it
// computed on its snapshot, whatever committed since. Any other runs
// again when it finishes (the serial outcome, as BigQuery's conflict
// rules leave no other).

// dryRun is a transaction run at its start and rolled back.
type dryRun struct {
	refs    []string
	before  map[string]int64 // each table's largest rowid at the start
	inserts map[string]*insertedRows
	dml     map[string]int // DML statements counted, by "dataset.table"
	res     *result
	meter   *meter
}

// insertedRows are the rows a dry run inserted into one table.
type insertedRows struct {
	cols []string
	rows [][]any
}

// mark notes each table's largest rowid before the transaction runs.
func (d *dryRun) mark(tx *sql.Tx) error {
	d.before = map[string]int64{}
	for _, r := range d.refs {
		var n sql.NullInt64
		if err := tx.QueryRow(`SELECT max(rowid) FROM ` + quoteIdent(r)).Scan(&n); err != nil {
			return fmt.Errorf("bqfake: dry run: %w", err)
		}
		d.before[r] = n.Int64
	}
	return nil
}

// capture keeps the rows the transaction inserted.
func (d *dryRun) capture(tx *sql.Tx) error {
	for _, r := range d.refs {
		rows, err := tx.Query(`SELECT * FROM `+quoteIdent(r)+` WHERE rowid > ? ORDER BY rowid`, d.before[r])
		if err != nil {
			return fmt.Errorf("bqfake: dry run: %w", err)
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return err
		}
		ins := &insertedRows{cols: cols}
		for rows.Next() {
			v := make([]any, len(cols))
			p := make([]any, len(cols))
			for i := range v {
				p[i] = &v[i]
			}
			if err := rows.Scan(p...); err != nil {
				rows.Close()
				return err
			}
			ins.rows = append(ins.rows, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ins.rows) > 0 {
			d.inserts[r] = ins
		}
	}
	return nil
}

// dryRun runs a transaction on the data as it is now and rolls it back;
// nil when it fails (its run when it finishes fails the same way, or
// not, on the data then).
func (s *Server) dryRun(stmt *statement, params map[string]param) *dryRun {
	d := &dryRun{inserts: map[string]*insertedRows{}, dml: map[string]int{}}
	for _, r := range stmt.refs {
		if !slices.Contains(d.refs, r) {
			d.refs = append(d.refs, r)
		}
	}
	s.dry, s.meter = d, newMeter()
	res, err := stmt.run(s, params)
	d.meter = s.meter
	s.dry, s.meter = nil, nil
	if err != nil {
		return nil
	}
	d.res = res
	return d
}

// mutated lists the tables the dry run updated or deleted rows of.
func (d *dryRun) mutated() []string {
	out := []string{}
	for r := range d.meter.mutated {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// applyInserts commits the rows a transaction that only inserts computed
// on its snapshot, and ends its job as runStatement would.
func (s *Server) applyInserts(j *job, stmt *statement, d *dryRun) {
	_, err := s.tx(func(tx *sql.Tx) (*result, error) {
		for _, r := range d.refs {
			ins := d.inserts[r]
			if ins == nil {
				continue
			}
			cols := make([]string, len(ins.cols))
			for i, c := range ins.cols {
				cols[i] = quoteIdent(c)
			}
			q := `INSERT INTO ` + quoteIdent(r) + ` (` + strings.Join(cols, ", ") + `) VALUES (` + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + `)`
			for _, row := range ins.rows {
				if _, err := tx.Exec(q, row...); err != nil {
					return nil, fmt.Errorf("bqfake: applying a transaction's inserts: %w", err)
				}
			}
		}
		return nil, nil
	})
	for k, n := range d.dml {
		s.stats.DML[k] += n
	}
	s.endJob(j, stmt, d.res, d.meter, err)
}
