package sink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"time"
)

// wireRow is a Row as one NDJSON line: the schema of the BigQuery staging
// table, and what the SQLite sink reads back.
type wireRow struct {
	FormID        string          `json:"form_id"`
	SubmissionID  json.RawMessage `json:"submission_id"` // a string or, from older spools, a number
	SubmissionKey string          `json:"submission_key"`
	ContentKey    string          `json:"content_key"`
	CreatedAt     string          `json:"created_at"`
	IsSpam        bool            `json:"is_spam"`
	Fields        string          `json:"fields"`
	Files         string          `json:"files"`
	Raw           string          `json:"raw"`
}

// Spool stages rows in a temporary NDJSON file so that a run's memory does
// not grow with the number of rows it reads. A Spool is written by one
// goroutine, then read (possibly several times, e.g. on a retried upload)
// after Finish.
type Spool struct {
	f       *os.File
	w       *bufio.Writer
	line    []byte
	n       int
	size    int64
	minAt   time.Time
	maxAt   time.Time
	done    bool
	removed bool
	// finishErr is why Finish failed: the file does not hold every row
	// appended, so the spool must not be read.
	finishErr error
	// descIDs says that every row so far has an id, each below the one
	// before it (prevID): no key repeats, and the reverse order is
	// ascending.
	descIDs bool
	prevID  int64
	// byContent says that some row so far has no id: it is keyed by its
	// content.
	byContent bool
	// withID says that some row so far has an id; minID is the least.
	withID bool
	minID  int64
	// With sortKeys set (SortContentKeys), while every row is keyed by
	// content, rows are gathered in run and written sorted by key, a run
	// at a time (spoolsort.go); runs says where each went.
	sortKeys bool
	run      runBuffer
	runs     []fileRun
	// written is how many bytes went to w.
	written int64
	// days holds the UTC days of the rows' created_at: the daily
	// partitions a commit of them writes.
	days map[int64]struct{}
}

// SpoolPattern is the name of every spool file (os.CreateTemp's pattern),
// so that the leftovers of a killed process can be found.
const SpoolPattern = "formsync-spool-*.ndjson"

// NewSpool creates an empty spool in dir ("" for the system temporary
// directory).
func NewSpool(dir string) (*Spool, error) {
	f, err := os.CreateTemp(dir, SpoolPattern)
	if err != nil {
		return nil, fmt.Errorf("creating spool file: %w", err)
	}
	return &Spool{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Append stages one row.
func (s *Spool) Append(r Row) error {
	if s.done {
		return errors.New("spool: append after finish")
	}
	s.line = appendWireRow(s.line[:0], r)
	s.size += int64(len(s.line))
	if s.sortKeys && r.SubmissionID == nil && !s.withID {
		if err := s.addToRun(s.line); err != nil {
			return err
		}
	} else {
		// The rows gathered so far precede this one.
		if err := s.flushRun(); err != nil {
			return err
		}
		if err := s.write(s.line); err != nil {
			return err
		}
	}
	switch {
	case r.SubmissionID == nil:
		s.descIDs = false
		s.byContent = true
	case s.n == 0:
		s.descIDs = true
	default:
		s.descIDs = s.descIDs && *r.SubmissionID < s.prevID
	}
	if r.SubmissionID != nil {
		if !s.withID || *r.SubmissionID < s.minID {
			s.minID = *r.SubmissionID
		}
		s.prevID = *r.SubmissionID
		s.withID = true
	}
	if s.days == nil {
		s.days = map[int64]struct{}{}
	}
	s.days[dayOf(r.CreatedAt)] = struct{}{}
	if s.n == 0 || r.CreatedAt.Before(s.minAt) {
		s.minAt = r.CreatedAt
	}
	if s.n == 0 || r.CreatedAt.After(s.maxAt) {
		s.maxAt = r.CreatedAt
	}
	s.n++
	return nil
}

// write writes staged bytes to the file.
func (s *Spool) write(b []byte) error {
	n, err := s.w.Write(b)
	s.written += int64(n)
	if err != nil {
		return fmt.Errorf("spool: writing row: %w", err)
	}
	return nil
}

// Len is the number of rows staged.
func (s *Spool) Len() int { return s.n }

// Days is the number of distinct UTC days the rows' created_at fall on:
// the daily partitions a commit of them writes (BigQuery allows one job
// to write at most 4,000).
func (s *Spool) Days() int { return len(s.days) }

// dayOf is t's UTC day, counted from the Unix epoch.
func dayOf(t time.Time) int64 {
	sec := t.Unix()
	day := sec / 86400
	if sec%86400 < 0 {
		day--
	}
	return day
}

// Size is the number of NDJSON bytes staged.
func (s *Spool) Size() int64 { return s.size }

// MinID is the least submission id among the rows, and whether any row
// has an id.
func (s *Spool) MinID() (id int64, ok bool) { return s.minID, s.withID }

// CreatedRange is the smallest and largest created_at staged; both zero
// when the spool is empty. Sinks use it to prune the partitions a MERGE
// touches.
func (s *Spool) CreatedRange() (earliest, latest time.Time) { return s.minAt, s.maxAt }

// Finish flushes the spool; after it the spool can only be read. If it
// fails, every later Finish and every read fails the same way: the file
// does not hold every row appended.
func (s *Spool) Finish() error {
	if s.done {
		return s.finishErr
	}
	s.done = true
	if err := s.flushRun(); err != nil {
		s.finishErr = err
		return err
	}
	s.run = runBuffer{}
	if err := s.w.Flush(); err != nil {
		s.finishErr = fmt.Errorf("spool: flushing %s: %w", s.f.Name(), err)
		return s.finishErr
	}
	// A finished spool may wait a while for its commit, beside others:
	// its write buffers are not needed any more.
	s.w, s.line = nil, nil
	return nil
}

// Open returns the staged NDJSON from the start. The caller closes it.
func (s *Spool) Open() (io.ReadCloser, error) { return s.reopen() }

// reopen opens the staged file for reading, once the spool is finished.
func (s *Spool) reopen() (*os.File, error) {
	if !s.done {
		return nil, errors.New("spool: open before finish")
	}
	if s.finishErr != nil {
		return nil, s.finishErr
	}
	f, err := os.Open(s.f.Name())
	if err != nil {
		return nil, fmt.Errorf("spool: reopening: %w", err)
	}
	return f, nil
}

// Rows reads the staged rows back in the order they were appended, but, in
// a spool that sorts them (SortContentKeys), for rows keyed by content
// staged before any row with an id: those are written sorted by key a MiB
// at a time (RowsByKey). Rows under one key always keep the order they were
// staged in, and so does every row with an id, before and after the
// others.
func (s *Spool) Rows() iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		var p wireParser
		for line, err := range s.lines() {
			if err != nil {
				yield(Row{}, err)
				return
			}
			r, perr := p.parse(line)
			if perr != nil {
				yield(Row{}, fmt.Errorf("spool: decoding row %d: %w", p.rows+1, perr))
				return
			}
			p.rows++
			if !yield(r, nil) {
				return
			}
		}
	}
}

// lines yields the staged lines in the order they are in the file, each
// valid until the next.
func (s *Spool) lines() iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		rc, err := s.Open()
		if err != nil {
			yield(nil, err)
			return
		}
		defer rc.Close()
		br := bufio.NewReaderSize(rc, 64<<10)
		var long []byte
		for {
			line, err := readLine(br, &long)
			if len(line) > 0 && !yield(line, nil) {
				return
			}
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, fmt.Errorf("spool: reading: %w", err))
				return
			}
		}
	}
}

// readLine reads one line of br, '\n' included; a line longer than br's
// buffer is assembled in *long.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	*long = append((*long)[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = br.ReadSlice('\n')
		*long = append(*long, line...)
	}
	return *long, err
}

// DescendingIDs reports whether every staged row has an id and each id is
// below the one staged before it: then no submission is staged twice, and
// RowsReversed yields the rows in ascending id order. A first sync reads a
// newest-first form this way.
func (s *Spool) DescendingIDs() bool { return s.descIDs && s.n > 0 }

// ByContent reports whether some staged row has no id and is keyed by its
// content (the older response form): such keys are hashes, in no order
// related to the order the rows were read in.
func (s *Spool) ByContent() bool { return s.byContent }

// reverseChunk is how much RowsReversed reads at a time.
const reverseChunk = 64 << 10

// RowsReversed reads the staged rows back in the reverse of the order they
// were appended, reading the file backwards a chunk at a time, so that its
// memory does not grow with the spool.
func (s *Spool) RowsReversed() iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		f, err := s.reopen()
		if err != nil {
			yield(Row{}, err)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			yield(Row{}, fmt.Errorf("spool: reopening: %w", err))
			return
		}
		off := fi.Size()
		// pending is the file's bytes [off, end of the rows not yet
		// yielded); spare is the buffer it moves to when a chunk is read
		// before it.
		var pending, spare []byte
		var p wireParser
		for {
			// Yield every line of pending that starts after a newline
			// within it, or at the start of the file.
			for len(pending) > 0 {
				body := bytes.TrimSuffix(pending, []byte("\n"))
				i := bytes.LastIndexByte(body, '\n')
				if i < 0 && off > 0 {
					break
				}
				r, perr := p.parse(pending[i+1:])
				if perr != nil {
					yield(Row{}, fmt.Errorf("spool: decoding row %d from the end: %w", p.rows+1, perr))
					return
				}
				p.rows++
				if !yield(r, nil) {
					return
				}
				pending = pending[:i+1]
			}
			if off == 0 {
				return
			}
			n := min(int64(reverseChunk), off)
			off -= n
			spare = slices.Grow(spare[:0], int(n)+len(pending))[:int(n)+len(pending)]
			copy(spare[n:], pending)
			if _, err := f.ReadAt(spare[:n], off); err != nil {
				yield(Row{}, fmt.Errorf("spool: reading: %w", err))
				return
			}
			pending, spare = spare, pending
		}
	}
}

// Remove closes and deletes the spool file. It is safe to call more than once.
func (s *Spool) Remove() error {
	if s.removed {
		return nil
	}
	s.removed = true
	cerr := s.f.Close()
	if err := os.Remove(s.f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("spool: removing: %w", err)
	}
	return cerr
}
