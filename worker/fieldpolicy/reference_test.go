package fieldpolicy

import (
	"bytes"
	"encoding/json"
)

// canonical returns v as encoding/json's round trip gives it (numbers as
// written, HTML not escaped): the form the project stores fields in. It is
// the tests' reference; the package itself uses jsonscan.AppendCanonical.
func canonical(v []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
