package sink

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
)

// Rows keyed by content carry hashes for keys, in no order related to the
// order they are read in, and a table keyed by them is written all over
// when they are inserted as read. So, when asked (SortContentKeys), while
// every row of a spool is keyed by content, the spool gathers its rows in
// memory, sortRunBytes at a time, and writes each such run sorted by key;
// RowsByKey merges the runs. The
// sorting happens while the rows are read from the API, the merge reads the
// spool file once, and no other file is written. A million rows of the
// older response form are some 700 runs, read 4 KiB at a time each.

// sortRunBytes is how many bytes of staged lines a run holds at most
// (unless one line is longer). 2 MiB was as fast, but a backfill, which
// reads into one spool while it commits another, peaked at 70 MiB against
// 62 (BENCHMARKS.md section 8.3). A variable so that tests can sort in
// small runs.
var sortRunBytes = 1 << 20

// fileRun is a sorted run's place in the spool file.
type fileRun struct{ off, len int64 }

// runBuffer gathers the lines of a run.
type runBuffer struct {
	buf   []byte
	lines []runLine
}

// runLine is one line of a run: where it is in the run's buffer, and its key.
type runLine struct {
	off, len       int
	keyOff, keyLen int
}

// SortContentKeys makes the spool write rows keyed by content sorted by
// key, in runs that RowsByKey merges, for as long as no row with an id is
// staged: for a destination that inserts rows faster in key order. Call it
// before the first Append.
func (s *Spool) SortContentKeys() { s.sortKeys = true }

// OnlyContentKeys reports whether the spool holds rows and none of them has
// an id: every row is keyed by its content, and rows under different keys
// do not depend on each other's order.
func (s *Spool) OnlyContentKeys() bool { return s.n > 0 && !s.withID }

// KeyOrdered reports whether RowsByKey can read the spool: it sorts rows
// keyed by content, and holds nothing else.
func (s *Spool) KeyOrdered() bool { return s.sortKeys && s.OnlyContentKeys() }

// addToRun adds a line to the run, writing the run first when the line
// would make it longer than sortRunBytes.
func (s *Spool) addToRun(line []byte) error {
	ko, kl, ok := wireKey(line)
	if !ok {
		return fmt.Errorf("spool: row %d has no submission key in the spool's layout", s.n+1)
	}
	rb := &s.run
	if len(rb.buf) > 0 && len(rb.buf)+len(line) > sortRunBytes {
		if err := s.flushRun(); err != nil {
			return err
		}
	}
	rb.lines = append(rb.lines, runLine{off: len(rb.buf), len: len(line), keyOff: len(rb.buf) + ko, keyLen: kl})
	rb.buf = append(rb.buf, line...)
	return nil
}

// flushRun writes the run's lines, sorted by key (stably: lines under one
// key keep their order), and empties it.
func (s *Spool) flushRun() error {
	rb := &s.run
	if len(rb.lines) == 0 {
		return nil
	}
	slices.SortStableFunc(rb.lines, func(a, b runLine) int {
		return bytes.Compare(rb.buf[a.keyOff:a.keyOff+a.keyLen], rb.buf[b.keyOff:b.keyOff+b.keyLen])
	})
	start := s.written
	for _, l := range rb.lines {
		if err := s.write(rb.buf[l.off : l.off+l.len]); err != nil {
			return err
		}
	}
	s.runs = append(s.runs, fileRun{off: start, len: s.written - start})
	rb.buf, rb.lines = rb.buf[:0], rb.lines[:0]
	return nil
}

// RowsByKey reads the staged rows back ordered by submission key; rows
// staged under one key keep the order they were staged in. Only a spool
// that sorts rows keyed by content and holds nothing else (KeyOrdered) can
// be read so; a commit of such rows reads them this way so that the table's
// B-tree grows at one edge rather than being written all over.
func (s *Spool) RowsByKey() iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		switch {
		case !s.KeyOrdered():
			if s.n > 0 {
				yield(Row{}, errors.New("spool: rows not staged in key order cannot be read in it"))
			}
			return
		case len(s.runs) == 1:
			for r, err := range s.Rows() {
				if !yield(r, err) || err != nil {
					return
				}
			}
			return
		}
		f, err := s.reopen()
		if err != nil {
			yield(Row{}, err)
			return
		}
		defer f.Close()
		var p wireParser
		err = mergeRuns(f, s.runs, func(line []byte) bool {
			r, err := p.parse(line)
			if err != nil {
				yield(Row{}, fmt.Errorf("spool: decoding row %d in key order: %w", p.rows+1, err))
				return false
			}
			p.rows++
			return yield(r, nil)
		})
		if err != nil {
			yield(Row{}, err)
		}
	}
}

// mergeRuns passes the lines of every run of f to emit in key order; of
// lines with one key, those of an earlier run first. It stops when emit
// returns false. The runs share one buffer of sortRunBytes, or of
// minMergeBuffer a run when there are more runs than that allows.
func mergeRuns(f *os.File, runs []fileRun, emit func([]byte) bool) error {
	per := max(sortRunBytes/len(runs), minMergeBuffer)
	slab := make([]byte, per*len(runs))
	h := make(mergeHeap, 0, len(runs))
	for i, r := range runs {
		c := &runCursor{idx: i, f: f, off: r.off, end: r.off + r.len, buf: slab[i*per : (i+1)*per : (i+1)*per]}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		c := h[0]
		if !emit(c.line) {
			return nil
		}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return nil
}

// minMergeBuffer is the least a run is read through at a time.
const minMergeBuffer = 4 << 10

// runCursor reads a run of the file, from off to end, a buffer at a time;
// line and key are its current line, valid until next.
type runCursor struct {
	idx      int
	f        *os.File
	off, end int64
	buf      []byte
	r, w     int // buf[r:w] is read and not yet returned
	line     []byte
	key      []byte
}

func (c *runCursor) next() (bool, error) {
	for {
		if i := bytes.IndexByte(c.buf[c.r:c.w], '\n'); i >= 0 {
			line := c.buf[c.r : c.r+i+1]
			c.r += i + 1
			ko, kl, ok := wireKey(line)
			if !ok {
				return false, errors.New("spool: a sorted run holds a line without a key")
			}
			c.line, c.key = line, line[ko:ko+kl]
			return true, nil
		}
		if c.off == c.end {
			if c.r < c.w {
				return false, errors.New("spool: a sorted run ends in the middle of a line")
			}
			return false, nil
		}
		// Keep the partial line at the start, doubling the buffer when
		// the line fills it, and read after it.
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
		if c.w == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		n := int(min(int64(len(c.buf)-c.w), c.end-c.off))
		// A short read (io.EOF) means the file lost bytes the run had.
		if _, err := c.f.ReadAt(c.buf[c.w:c.w+n], c.off); err != nil {
			return false, fmt.Errorf("spool: reading a sorted run: %w", err)
		}
		c.w += n
		c.off += int64(n)
	}
}

type mergeHeap []*runCursor

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].idx < h[j].idx
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*runCursor)) }
func (h *mergeHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// wireKeyTag precedes the submission key in a line appendWireRow wrote.
// Every string before it is JSON-quoted, so its first occurrence is the
// field itself.
var wireKeyTag = []byte(`,"submission_key":"`)

// wireKey finds the submission key in a spool line, quoted as
// appendWireRow quotes it: its offset and length. Keys are compared so:
// one key is always quoted to the same bytes, so rows under one key stay
// together and in order, which is all a commit needs; content keys and ids
// hold nothing to escape and order as the keys themselves.
func wireKey(line []byte) (off, n int, ok bool) {
	i := bytes.Index(line, wireKeyTag)
	if i < 0 {
		return 0, 0, false
	}
	off = i + len(wireKeyTag)
	for j := off; j < len(line); j++ {
		switch line[j] {
		case '\\':
			j++
		case '"':
			return off, j - off, true
		}
	}
	return 0, 0, false
}
