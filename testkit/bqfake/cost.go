package bqfake

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"

	bqv2 "google.golang.org/api/bigquery/v2"
)

// The fake's model of what a query job processes (statistics.
// totalBytesProcessed), simple enough to reason about in a test:
//
//   - A read of a table costs, for every column the statement reads, the
//     size of that column in every row of every partition it scans: 8
//     bytes for INT64, FLOAT64 and TIMESTAMP, 1 for BOOL, 2 + length for
//     STRING and JSON (BigQuery's logical sizes), 0 for NULL.
//   - A table partitioned by a column (TimePartitioning.Field, by day) is
//     scanned in the partitions a constant filter on that column names;
//     any other statement scans every partition. Clustering is not
//     modelled: a filter on form_id prunes nothing here (BigQuery would
//     read fewer blocks), so the figures are an upper bound.
//   - A MERGE, UPDATE or DELETE also costs every column of every
//     partition it modifies (BigQuery rewrites them); rows only inserted
//     cost nothing more.
//   - A job may modify at most 4,000 partitions of a table, as in
//     BigQuery ("Too many partitions produced by query, allowed 4000").
//
// Each handler declares its reads (scan) and the rows it modifies
// (touch); runStatement puts the sum in the job's statistics.

// maxPartitionsModified is BigQuery's limit of partitions one job may
// modify in one table.
const maxPartitionsModified = 4000

// dayMicros is one day in microseconds: a TIMESTAMP's day partition is
// its microseconds divided by it, rounded down.
const dayMicros = 86_400_000_000

// meter is what the running job has processed so far.
type meter struct {
	bytes int64
	// touched are the partitions (days) modified per table, and
	// rewritten those whose every column a DML statement has paid for.
	touched, rewritten map[string]map[int64]bool
	// mutated are the tables whose stored rows the statement updated or
	// deleted: what BigQuery's transactions conflict on (rows only
	// inserted do not conflict).
	mutated map[string]bool
}

func newMeter() *meter {
	return &meter{touched: map[string]map[int64]bool{}, rewritten: map[string]map[int64]bool{}, mutated: map[string]bool{}}
}

// mutate records that the running statement updated or deleted stored
// rows of the table ref.
func (s *Server) mutate(ref string) {
	if s.meter != nil {
		s.meter.mutated[ref] = true
	}
}

// span is the part of a partitioned table a statement's constant filter
// on the partitioning column selects: every partition (all), or the
// partitions of some ranges of days (inclusive).
type span struct {
	all  bool
	days [][2]int64
}

// allPartitions is the span of a statement without a constant filter on
// the partitioning column: on a table that requires one
// (requirePartitionFilter), BigQuery refuses it.
var allPartitions = span{all: true}

// everyPartition is the span of a constant filter that names every
// partition (created_at BETWEEN the smallest and the largest TIMESTAMP):
// it prunes nothing, and satisfies requirePartitionFilter.
var everyPartition = span{days: [][2]int64{{firstDay, lastDay}}}

// Days beyond any TIMESTAMP BigQuery holds (years 1 to 9999).
const (
	firstDay = -719163
	lastDay  = 2932896
)

// within is the partitions a filter created_at BETWEEN from AND to
// (micros) scans: those of the days from and to and the days between.
func within(from, to int64) span { return span{days: [][2]int64{{floorDay(from), floorDay(to)}}} }

// beyond is the partitions a filter created_at < before OR created_at >
// after scans: every partition holding a time outside before..after.
func beyond(before, after int64) span {
	return span{days: [][2]int64{{firstDay, floorDay(before - 1)}, {floorDay(after + 1), lastDay}}}
}

// or is the partitions of either span.
func (sp span) or(o span) span {
	if sp.all || o.all {
		return allPartitions
	}
	return span{days: append(slices.Clone(sp.days), o.days...)}
}

func floorDay(micros int64) int64 { return floorDiv(micros, dayMicros) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// partitionField is the column a table is partitioned on by day, or "".
func (s *Server) partitionField(ref string) string {
	t := s.tables[ref]
	if t == nil || t.TimePartitioning == nil {
		return ""
	}
	return t.TimePartitioning.Field
}

// where is the SQLite condition selecting the rows of the partitions sp
// names, TRUE for an unpartitioned table or every partition.
func (s *Server) where(ref string, sp span) string {
	f := s.partitionField(ref)
	if f == "" || sp.all {
		return "1"
	}
	conds := []string{"0"}
	for _, d := range sp.days {
		if d[0] <= d[1] {
			conds = append(conds, fmt.Sprintf("(%s >= %d AND %s < %d)", quoteIdent(f), d[0]*dayMicros, quoteIdent(f), (d[1]+1)*dayMicros))
		}
	}
	return "(" + strings.Join(conds, " OR ") + ")"
}

// partitionFilter refuses, as BigQuery does, a read of a table that
// requires a partition filter (requirePartitionFilter) by a statement with
// no constant filter on its partitioning column.
func (s *Server) partitionFilter(ref string, sp span) error {
	t := s.tables[ref]
	f := s.partitionField(ref)
	if t == nil || f == "" || !sp.all {
		return nil
	}
	if t.RequirePartitionFilter || t.TimePartitioning.RequirePartitionFilter {
		return invalidQuery("Cannot query over table '%s' without a filter over column(s) '%s' that can be used for partition elimination", ref, f)
	}
	return nil
}

// sizeExpr is the SQLite expression of a column's logical size in a row.
func sizeExpr(f *bqv2.TableFieldSchema) string {
	c := quoteIdent(f.Name)
	switch normType(f.Type) {
	case "STRING", "JSON", "BYTES":
		return "COALESCE(2 + length(CAST(" + c + " AS BLOB)), 0)"
	case "BOOLEAN":
		return "(" + c + " IS NOT NULL)"
	}
	return "(8 * (" + c + " IS NOT NULL))"
}

// scan bills a read of the columns cols (nil: every column) of the table
// ref in the partitions sp names.
func (s *Server) scan(tx *sql.Tx, ref string, cols []string, sp span) error {
	if err := s.partitionFilter(ref, sp); err != nil {
		return err
	}
	if s.meter == nil {
		return nil
	}
	t := s.tables[ref]
	if t == nil || t.Schema == nil {
		return nil
	}
	var sizes []string
	for _, f := range t.Schema.Fields {
		if cols == nil || slices.Contains(cols, f.Name) {
			sizes = append(sizes, sizeExpr(f))
		}
	}
	if len(sizes) == 0 {
		return nil
	}
	var n int64
	err := tx.QueryRow(`SELECT COALESCE(SUM(` + strings.Join(sizes, " + ") + `), 0) FROM ` + quoteIdent(ref) + ` WHERE ` + s.where(ref, sp)).Scan(&n)
	if err != nil {
		return fmt.Errorf("bqfake: metering a read of %s: %w", ref, err)
	}
	s.meter.bytes += n
	return nil
}

// touch records the partitions of the rows of ref that the SQLite
// condition cond selects as modified by this job (before they change:
// call it again after an UPDATE that moves rows), and bills every column
// of each partition not yet rewritten by this job when rewrite is set.
func (s *Server) touch(tx *sql.Tx, ref, cond string, rewrite bool, args ...any) error {
	if s.meter == nil {
		return nil
	}
	f := s.partitionField(ref)
	if f == "" {
		return nil
	}
	return s.touchQuery(tx, ref, `SELECT DISTINCT `+dayOf(quoteIdent(f))+` FROM `+quoteIdent(ref)+` WHERE `+cond, rewrite, args...)
}

// touchQuery records the days the SQLite query days returns (one column)
// as partitions of ref modified by this job; see touch.
func (s *Server) touchQuery(tx *sql.Tx, ref, days string, rewrite bool, args ...any) error {
	if s.meter == nil || s.partitionField(ref) == "" {
		return nil
	}
	rows, err := tx.Query(days, args...)
	if err != nil {
		return fmt.Errorf("bqfake: partitions modified in %s: %w", ref, err)
	}
	var list []int64
	for rows.Next() {
		var d sql.NullInt64
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return err
		}
		if d.Valid {
			list = append(list, d.Int64)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	return s.touchDays(tx, ref, list, rewrite)
}

// touchDays records days as partitions of ref modified by this job, and
// bills the rewrite of those not rewritten yet when rewrite is set.
func (s *Server) touchDays(tx *sql.Tx, ref string, days []int64, rewrite bool) error {
	if s.meter == nil || s.partitionField(ref) == "" {
		return nil
	}
	if s.meter.touched[ref] == nil {
		s.meter.touched[ref], s.meter.rewritten[ref] = map[int64]bool{}, map[int64]bool{}
	}
	for _, d := range days {
		s.meter.touched[ref][d] = true
		if rewrite && !s.meter.rewritten[ref][d] {
			s.meter.rewritten[ref][d] = true
			if err := s.scan(tx, ref, nil, within(d*dayMicros, d*dayMicros)); err != nil {
				return err
			}
		}
	}
	if n := len(s.meter.touched[ref]); n > maxPartitionsModified {
		return invalidQuery("Too many partitions produced by query, allowed %d, query produces at least %d partitions", maxPartitionsModified, n)
	}
	return nil
}

// dayOf is the SQLite expression of a TIMESTAMP column's day partition.
func dayOf(col string) string {
	return fmt.Sprintf("CAST(floor(%s / %d.0) AS INTEGER)", col, int64(dayMicros))
}
