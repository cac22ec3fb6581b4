package sqlite

// applicationID marks a SQLite file as a formsync database
// (PRAGMA application_id): "FSYN".
const applicationID = 0x4653594e

// migrations[i] brings the schema from version i to version i+1. Append
// only: a released migration never changes.
var migrations = []string{
	// 1: the initial schema.
	`
-- WITHOUT ROWID: clustered by form and key, one B-tree fewer per insert;
-- measured ~10% faster than a rowid table for 200k rows of ~150 bytes.
-- fields/files carry no json_valid CHECK: sink.NewRow only produces
-- canonical JSON, and parsing every row again measurably slowed commits.
CREATE TABLE submissions (
	form_id        TEXT    NOT NULL,
	submission_id  INTEGER NULL,
	submission_key TEXT    NOT NULL CHECK (submission_key <> ''),
	created_at     TEXT    NOT NULL,
	is_spam        INTEGER NOT NULL CHECK (is_spam IN (0, 1)),
	fields         TEXT    NOT NULL,
	files          TEXT    NOT NULL,
	synced_at      TEXT    NOT NULL,
	PRIMARY KEY (form_id, submission_key)
) WITHOUT ROWID;
CREATE INDEX submissions_form_created ON submissions (form_id, created_at);
-- Rows keyed by content (older response form): found cheaply when a form
-- starts answering with ids and its rows must be re-keyed.
CREATE INDEX submissions_legacy ON submissions (form_id, submission_key) WHERE submission_id IS NULL;

CREATE TABLE sync_state (
	form_id              TEXT    NOT NULL PRIMARY KEY,
	watermark_created_at TEXT    NULL,
	watermark_id         INTEGER NOT NULL DEFAULT 0,
	watermark_boundary   TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(watermark_boundary)),
	sort_order           TEXT    NOT NULL DEFAULT '',
	last_total           INTEGER NOT NULL DEFAULT -1,
	"rows"               INTEGER NOT NULL DEFAULT 0,
	field_names          TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(field_names)),
	last_success_at      TEXT    NULL,
	last_error_at        TEXT    NULL,
	last_error           TEXT    NOT NULL DEFAULT '',
	backfill             TEXT    NULL CHECK (backfill IS NULL OR json_valid(backfill)),
	updated_at           TEXT    NOT NULL
);
`,
	// 2: sync_state's columns take the names they have in BigQuery, so
	// that one query reads the state of either sink.
	`
ALTER TABLE sync_state RENAME COLUMN watermark_created_at TO wm_created_at;
ALTER TABLE sync_state RENAME COLUMN watermark_id TO wm_id;
ALTER TABLE sync_state RENAME COLUMN watermark_boundary TO boundary;
ALTER TABLE sync_state RENAME COLUMN "rows" TO row_count;
`,
	// 3: every submission as the API sent it (rows stored before keep
	// NULL), and the revision that commits compare to refuse writing over
	// a state another process committed after it was read.
	`
ALTER TABLE submissions ADD COLUMN raw TEXT NULL;
ALTER TABLE sync_state ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
`,
	// 4: deletions and erasure. deleted_at is when a reconcile found the
	// submission no longer served upstream (NULL while it is); row_count
	// counts the rows without it and deleted_count the rows with it. The
	// state keeps when the form was last reconciled, the field policy its
	// rows were stored under and the tombstones of forgotten submissions
	// (state.Forgotten as JSON, NULL when none was forgotten). The views
	// are re-created after it (Open) so that they leave deleted rows out.
	`
ALTER TABLE submissions ADD COLUMN deleted_at TEXT NULL;
ALTER TABLE sync_state ADD COLUMN deleted_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_state ADD COLUMN last_reconcile_at TEXT NULL;
ALTER TABLE sync_state ADD COLUMN field_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE sync_state ADD COLUMN forgotten TEXT NULL CHECK (forgotten IS NULL OR json_valid(forgotten));
`,
	// 5: what the last commit of each form did (rows inserted, updated,
	// restored, marked deleted, forgotten), as a JSON object, NULL until
	// a commit writes it.
	`
ALTER TABLE sync_state ADD COLUMN last_commit TEXT NULL CHECK (last_commit IS NULL OR json_valid(last_commit));
`,
	// 6: submissions the API serves more than once indistinguishably
	// (state.Form.Copies), as a JSON object of content key to count, NULL
	// when there are none.
	`
ALTER TABLE sync_state ADD COLUMN copies TEXT NULL CHECK (copies IS NULL OR json_valid(copies));
`,
	// 7: typed views and attachments as rows. field_types is the type of
	// each field's view column (state.Form.FieldTypes as JSON), filled
	// from the stored rows after it (Open: typeViews) and the views made
	// again typed. submission_files has one row per file of every row not
	// marked deleted, whatever shape files has: an array of files, or an
	// object keyed by input name whose values are a file or an array of
	// files. A table or view of the user's holding its name is left
	// alone (IF NOT EXISTS). Its columns and values are BigQuery's
	// (filesViewQuery).
	`
ALTER TABLE sync_state ADD COLUMN field_types TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(field_types));
CREATE VIEW IF NOT EXISTS submission_files AS ` + filesViewBase + `
`,
	// 8: where each file of a stored row stands in the user's files store
	// (sink.FileKeeper), one row per (form_id, submission_key, url), with
	// the columns of BigQuery's table. A copy belongs to its row: the
	// triggers take it away with the row (a forget, a removed twin, a
	// removal, a row deleted by hand) and to the row's new key when the
	// row is re-keyed from its content key to its id. Neither fires for
	// the statements of a commit's inserts and updates. The index finds
	// the copies that name an object (NamedDigests). submission_files is
	// made again with the copies' columns after it (Open: filesViewCopies).
	`
CREATE TABLE submission_file_copies (
	form_id        TEXT    NOT NULL,
	submission_key TEXT    NOT NULL,
	url            TEXT    NOT NULL,
	sha256         TEXT    NULL,
	object_uri     TEXT    NULL,
	size           INTEGER NULL,
	content_type   TEXT    NULL,
	stored_at      TEXT    NULL,
	reason         TEXT    NULL,
	recorded_at    TEXT    NOT NULL,
	PRIMARY KEY (form_id, submission_key, url)
) WITHOUT ROWID;
CREATE INDEX submission_file_copies_sha256 ON submission_file_copies (sha256) WHERE sha256 IS NOT NULL;
CREATE TRIGGER submission_file_copies_follow_delete AFTER DELETE ON submissions
BEGIN
	DELETE FROM submission_file_copies WHERE form_id = old.form_id AND submission_key = old.submission_key;
END;
CREATE TRIGGER submission_file_copies_follow_rekey AFTER UPDATE OF submission_key ON submissions
	WHEN new.submission_key IS NOT old.submission_key
BEGIN
	UPDATE OR REPLACE submission_file_copies SET submission_key = new.submission_key
	WHERE form_id = old.form_id AND submission_key = old.submission_key;
END;
`,
}

// SchemaVersion is the schema version this package writes (PRAGMA
// user_version): len(migrations).
const SchemaVersion = 8
