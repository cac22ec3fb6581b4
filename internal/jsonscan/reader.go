package jsonscan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is encoding/json's nesting limit, which jsontext shares.
const MaxDepth = 10000

// A Reader reads one JSON text held in memory, token by token or value by
// value, accepting exactly what encoding/json accepts. Values it returns
// are slices of the text. Reset and reused, it does not allocate.
type Reader struct {
	jsontext.Decoder
	src []byte
	buf bytes.Buffer
}

// Reset makes r read src. jsontext reads a bytes.Buffer in place, so that
// src is never copied (nor written to).
func (r *Reader) Reset(src []byte) {
	r.src = src
	r.buf = *bytes.NewBuffer(src)
	r.Decoder.Reset(&r.buf, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// Offset is where the text after the last token or value read starts.
func (r *Reader) Offset() int { return int(r.InputOffset()) }

// ReadValue reads the next value and returns it as a slice of the text,
// capped so that appending to it cannot overwrite what follows.
func (r *Reader) ReadValue() ([]byte, error) {
	v, err := r.Decoder.ReadValue()
	if err != nil {
		return nil, r.Error(err)
	}
	end := r.Offset()
	return r.src[end-len(v) : end : end], nil
}

// End checks that nothing but space follows the value read.
func (r *Reader) End() error {
	if _, err := r.ReadToken(); err != io.EOF {
		return &SyntaxError{Offset: r.Offset(), Msg: "data after the value"}
	}
	return nil
}

// A SyntaxError says where a text stops being JSON.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

// Error turns what the tokenizer returned into a *SyntaxError.
func (r *Reader) Error(err error) error {
	var se *SyntaxError
	if err == nil || errors.As(err, &se) {
		return err
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &SyntaxError{Offset: len(r.src), Msg: "unexpected end"}
	}
	var serr *jsontext.SyntacticError
	if errors.As(err, &serr) {
		return &SyntaxError{Offset: int(serr.ByteOffset), Msg: strings.TrimPrefix(serr.Err.Error(), "jsontext: ")}
	}
	return &SyntaxError{Offset: r.Offset(), Msg: err.Error()}
}

// Valid reports whether src is one JSON text, as encoding/json.Valid does.
func Valid[S ~string | ~[]byte](src S) bool {
	return jsontext.Value(src).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// String returns v without the space around it when that is exactly one
// JSON string, quotes included.
func String[S ~string | ~[]byte](v S) (S, bool) {
	i, j := 0, len(v)
	for i < j && isSpace(v[i]) {
		i++
	}
	for j > i && isSpace(v[j-1]) {
		j--
	}
	if j-i < 2 || v[i] != '"' || !Valid(v[i:j]) {
		return v, false
	}
	return v[i:j], true
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// AppendUnquote appends the text of quoted, a JSON string a Reader
// accepted (quotes included), decoded as encoding/json decodes it: invalid
// UTF-8 and unpaired surrogates become U+FFFD.
func AppendUnquote[S ~string | ~[]byte](dst []byte, quoted S) []byte {
	// jsontext reports invalid UTF-8, having replaced it as encoding/json
	// does; quoted is otherwise valid, so the error says nothing more.
	dst, _ = jsontext.AppendUnquote(dst, quoted)
	return dst
}
