package formsapi

import (
	"encoding/json"
	"time"
)

// Submission is one form submission, decoded from either response form.
type Submission struct {
	// ID is nil in the older response form, which has no id.
	ID *int64
	// CreatedAt is UTC; the older form gives microseconds, the newer
	// milliseconds.
	CreatedAt time.Time
	IsSpam    bool
	// Fields is the raw JSON object of form inputs; Files the raw JSON array
	// of attachments (shape not documented by the API).
	Fields json.RawMessage
	Files  json.RawMessage
	// Raw is the submission object exactly as sent (invalid UTF-8
	// replaced), for the sinks' raw column.
	Raw json.RawMessage
}

// Page is one page of a form's submissions.
type Page struct {
	FormID      string
	Submissions []Submission
	// Pagination as the server reported it. PerPage is the page size in
	// effect, which the older form fixes at 25 whatever limit was asked.
	Total       int
	Count       int
	PerPage     int
	CurrentPage int
	TotalPages  int
	// Next and Previous are the server's links; empty when null or absent
	// (always absent in the older form).
	Next     string
	Previous string
	// Newer reports whether the page came in the newer response form
	// (links present or submissions carrying ids).
	Newer bool
}
