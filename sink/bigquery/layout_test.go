package bigquery

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	bq "cloud.google.com/go/bigquery"
)

// TestOpenChecksTheTablesLayout: tables made outside formsync are checked
// at Open, and every difference that would make each commit fail (or
// read every form's rows) is named with its fix; a table that requires a
// partition filter is accepted, and one clustered otherwise
// (TestOpenWarnsOfAnotherClustering).
func TestOpenChecksTheTablesLayout(t *testing.T) {
	t.Parallel()
	day := &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"}
	byForm := &bq.Clustering{Fields: []string{"form_id"}}
	retyped := submissionsSchema()
	retyped[3] = &bq.FieldSchema{Name: "created_at", Type: bq.StringFieldType, Required: true}
	required := submissionsSchema()
	required[8] = &bq.FieldSchema{Name: "raw", Type: bq.StringFieldType, Required: true}
	for _, c := range []struct {
		name string
		meta bq.TableMetadata
		want []string // in the error; none: Open succeeds
	}{
		{"as formsync makes it", bq.TableMetadata{Schema: submissionsSchema(), TimePartitioning: day, Clustering: byForm}, nil},
		{"partition filter required", bq.TableMetadata{Schema: submissionsSchema(), TimePartitioning: &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"}, RequirePartitionFilter: true, Clustering: byForm}, nil},
		{"by month, clustered by more", bq.TableMetadata{Schema: submissionsSchema(), TimePartitioning: &bq.TimePartitioning{Type: bq.MonthPartitioningType, Field: "created_at"}, Clustering: &bq.Clustering{Fields: []string{"form_id", "is_spam"}}}, nil},
		{"not partitioned", bq.TableMetadata{Schema: submissionsSchema(), Clustering: byForm}, []string{"it is not partitioned", "PARTITION BY DATE(created_at)"}},
		{"partitioned on another column", bq.TableMetadata{Schema: submissionsSchema(), TimePartitioning: &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "synced_at"}, Clustering: byForm}, []string{"partitioned on synced_at, not on created_at"}},
		{"a column of another type", bq.TableMetadata{Schema: retyped, TimePartitioning: day, Clustering: byForm}, []string{"column created_at is STRING, formsync writes TIMESTAMP"}},
		{"a required column formsync leaves NULL", bq.TableMetadata{Schema: required, TimePartitioning: day, Clustering: byForm}, []string{"column raw is REQUIRED", "DROP NOT NULL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, cfg, ds := olderDataset(t, nil)
			if err := ds.Table(submissionsTable).Create(t.Context(), &c.meta); err != nil {
				t.Fatal(err)
			}
			s, err := Open(t.Context(), cfg)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("Open accepted the table")
			}
			if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "formsync bug") {
				t.Errorf("Open: %v; want ErrInvalid, not called a formsync bug", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open: %v\nwant it to say %q", err, w)
				}
			}
		})
	}
}

// TestOpenWarnsOfAnotherClustering: a submissions table not clustered
// first by form_id gives every statement the same answer, and only costs
// more: Open accepts it and logs a warning that says what it costs and
// how to cluster it as formsync does.
func TestOpenWarnsOfAnotherClustering(t *testing.T) {
	t.Parallel()
	day := &bq.TimePartitioning{Type: bq.DayPartitioningType, Field: "created_at"}
	for name, clustering := range map[string]*bq.Clustering{
		"not clustered":        nil,
		"clustered by is_spam": {Fields: []string{"is_spam", "form_id"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, cfg, ds := olderDataset(t, nil)
			if err := ds.Table(submissionsTable).Create(t.Context(), &bq.TableMetadata{Schema: submissionsSchema(), TimePartitioning: day, Clustering: clustering}); err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
			s, err := Open(t.Context(), cfg)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			s.Close()
			for _, w := range []string{"level=WARN", "billed for the rows of every form", "bq update --clustering_fields=form_id test-project:formsync_test.submissions"} {
				if !strings.Contains(log.String(), w) {
					t.Errorf("log:\n%s\nwant it to say %q", log.String(), w)
				}
			}
		})
	}
}
