// Package files keeps the files attached to submissions, which the form
// service deletes 30 days after upload, in storage the user owns.
//
// [Entries] lists the files of a submission's files JSON, in every shape
// the service sends, as the same rows the submission_files views give.
package files
