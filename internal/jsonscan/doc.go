// Package jsonscan is formsync's one JSON reader and writer. It reads JSON
// the way encoding/json reads it and writes it the way encoding/json
// writes it, without reflection: the page scan of formsapi, the canonical
// form content keys hash (sink), the spool's lines and the field policy's
// in-place rewrite all go through it.
//
// A Reader reads one text held in memory, token by token (PeekKind,
// ReadToken) or value by value (ReadValue, a slice of the text), and
// accepts exactly what encoding/json accepts: invalid UTF-8 inside
// strings, duplicate member names, nesting up to 10,000 levels.
// AppendQuoted writes a string as encoding/json does, AppendUnquote reads
// one as it does, and AppendCanonical writes its decode-and-encode round
// trip, which content keys hash. FuzzMatchesEncodingJSON holds all of it
// to encoding/json, byte for byte.
//
// It is written by hand because it is on the hot path of every sync: the
// reflective round trip was a fifth of a sync's CPU time, and jsontext
// (github.com/go-json-experiment/json), measured in its place, took 1.3 to
// 2.3 times the CPU of these scanners on the paths that use them.
package jsonscan
