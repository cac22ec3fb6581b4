// Package jsonscan reads JSON the way encoding/json reads it and writes it
// the way encoding/json writes it, without reflection: the page scan of
// formsapi, the canonical form content keys hash (sink), the spool's
// lines and the field policy's in-place rewrite all go through it.
//
// Reading is jsontext's tokenizer (github.com/go-json-experiment/json),
// set to accept what encoding/json accepts: invalid UTF-8 inside strings,
// duplicate member names, nesting up to 10,000 levels. What is written by
// hand here is what no library writes byte for byte as encoding/json
// does: its string escaping (AppendQuoted) and its round trip's canonical
// form (AppendCanonical). FuzzMatchesEncodingJSON holds both, and the
// reading, to encoding/json.
package jsonscan
