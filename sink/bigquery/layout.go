package bigquery

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	bq "cloud.google.com/go/bigquery"
)

// checkLayout compares a table that already exists (made by an earlier
// formsync, by Terraform or by hand) with what formsync's statements take
// for granted of it, want: the type and mode of every column both have
// (missing columns are migrate's), and for submissions its partitioning on
// created_at and its clustering on form_id. Every difference is listed at
// once, each with how to fix it; nil when there is none. Without this, a
// table partitioned otherwise or a column of another type would make every
// commit's MERGE fail, after the pages were read, with a message that
// reads like formsync's own bug. A partition filter required on the table
// (require_partition_filter) is accepted: the statements filter on
// created_at.
//
// A table clustered otherwise than formsync clusters it (not first by
// form_id) is accepted with a warning, returned: every statement gives
// the same answer on it, and each commit, forget and read of a form only
// reads more (the blocks of every form in the partitions it scans).
func checkLayout(res, table string, have *bq.TableMetadata, want *bq.TableMetadata) (warnings []string, err error) {
	var diffs []string
	for _, w := range want.Schema {
		i := slices.IndexFunc(have.Schema, func(f *bq.FieldSchema) bool { return strings.EqualFold(f.Name, w.Name) })
		if i < 0 {
			continue
		}
		h := have.Schema[i]
		switch {
		case baseType(h.Type) != baseType(w.Type) || h.Repeated != w.Repeated:
			diffs = append(diffs, fmt.Sprintf("column %s is %s, formsync writes %s to it: recreate the column as %s (ALTER TABLE `%s` DROP COLUMN %s, ADD COLUMN %s %s; its values are lost) or let formsync create the table afresh",
				h.Name, typeName(h), typeName(w), typeName(w), table, h.Name, h.Name, typeName(w)))
		case h.Required && !w.Required:
			diffs = append(diffs, fmt.Sprintf("column %s is REQUIRED, and formsync stores NULL in it: make it NULLABLE (ALTER TABLE `%s` ALTER COLUMN %s DROP NOT NULL)", h.Name, table, h.Name))
		}
	}
	if tp := want.TimePartitioning; tp != nil {
		switch hp := have.TimePartitioning; {
		case hp == nil && have.RangePartitioning != nil:
			diffs = append(diffs, fmt.Sprintf("it is partitioned by integer range on %s, not by time on %s: %s", have.RangePartitioning.Field, tp.Field, repartition(table, tp.Field)))
		case hp == nil:
			diffs = append(diffs, fmt.Sprintf("it is not partitioned, and formsync's statements prune partitions on %s: %s", tp.Field, repartition(table, tp.Field)))
		case !strings.EqualFold(hp.Field, tp.Field):
			field := cmp.Or(hp.Field, "ingestion time")
			diffs = append(diffs, fmt.Sprintf("it is partitioned on %s, not on %s: %s", field, tp.Field, repartition(table, tp.Field)))
		}
	}
	if c := want.Clustering; c != nil {
		if have.Clustering == nil || len(have.Clustering.Fields) == 0 || !strings.EqualFold(have.Clustering.Fields[0], c.Fields[0]) {
			got := "not clustered"
			if have.Clustering != nil && len(have.Clustering.Fields) > 0 {
				got = "clustered by " + strings.Join(have.Clustering.Fields, ", ")
			}
			warnings = append(warnings, fmt.Sprintf("table %s is %s, not first by %s: every commit, forget and read of a form is billed for the rows of every form in the partitions it scans, not for its own; to cluster it as formsync does: bq update --clustering_fields=%s %s",
				table, got, c.Fields[0], strings.Join(c.Fields, ","), strings.Replace(table, ".", ":", 1)))
		}
	}
	if len(diffs) == 0 {
		return warnings, nil
	}
	return warnings, &Error{
		Op: "checking the table's layout", Resource: res, Kind: ErrInvalid,
		Err:  fmt.Errorf("the table is not laid out as formsync writes it: %s", strings.Join(diffs, "; ")),
		Hint: "the table was made or changed outside formsync; fix it as said, or point FORMSYNC_BQ_DATASET at a dataset where formsync creates its own",
	}
}

// repartition says how to rebuild a table partitioned by day on field,
// clustered by form_id (partitioning cannot be changed in place).
func repartition(table, field string) string {
	return fmt.Sprintf("BigQuery cannot change it in place; copy the table (CREATE TABLE `%[1]s_new` PARTITION BY DATE(%[2]s) CLUSTER BY form_id AS SELECT * FROM `%[1]s`), drop the old one and rename the copy (ALTER TABLE `%[1]s_new` RENAME TO %[3]s) while formsync is stopped",
		table, field, table[strings.LastIndex(table, ".")+1:])
}

// baseType folds the legacy and standard SQL names of a type together.
func baseType(t bq.FieldType) string {
	switch s := strings.ToUpper(string(t)); s {
	case "INT64":
		return "INTEGER"
	case "FLOAT64":
		return "FLOAT"
	case "BOOL":
		return "BOOLEAN"
	case "STRUCT":
		return "RECORD"
	default:
		return s
	}
}

// typeName is a column's type as a DDL statement writes it.
func typeName(f *bq.FieldSchema) string {
	names := map[string]string{"INTEGER": "INT64", "FLOAT": "FLOAT64", "BOOLEAN": "BOOL", "RECORD": "STRUCT"}
	t := baseType(f.Type)
	if n, ok := names[t]; ok {
		t = n
	}
	if f.Repeated {
		return "ARRAY<" + t + ">"
	}
	return t
}

// checkFilesView refuses something other than a view under the name of
// the submission_files view (a table of the user's): formsync would
// otherwise replace it, or fail to, at every Open.
func checkFilesView(res string, have *bq.TableMetadata) error {
	if have.Type == bq.ViewTable {
		return nil
	}
	kind := cmp.Or(strings.ToLower(string(have.Type)), "table")
	return &Error{
		Op: "checking the files view", Resource: res, Kind: ErrInvalid,
		Err:  fmt.Errorf("a %s holds the name of the view formsync makes there (one row per file attached to a submission)", kind),
		Hint: "rename or drop it (formsync then makes the view), or point FORMSYNC_BQ_DATASET at a dataset of formsync's own",
	}
}
