package files

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

// Entry is one file of a submission's files: the row submission_files
// gives for it, in both sinks.
type Entry struct {
	// Input is the input name when files is keyed by input; nil for the
	// array shape.
	Input *string
	// Position is the 0-based place of the file within its input (or
	// within the array); an element that is not an object keeps its
	// place, so positions can skip.
	Position int
	// Name, URL and Type are the file's members of those names when they
	// are strings or numbers; nil otherwise.
	Name, URL, Type *string
	// Size is the file's size when it is an integer (a JSON integer, or
	// text in JSON's integer syntax) that fits 64 bits; nil otherwise. It
	// is what the service declared, never trusted for the stored object.
	Size *int64
}

// integerText is JSON's integer syntax, the only text a size is read from
// (the views' integerText).
var integerText = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// Entries lists the file entries of a submission's files, in every shape
// the service sends: an array of files (Input nil, Position the place in
// the array), or an object keyed by input name whose values are one file
// (Position 0) or an array of files. An element that is not an object (a
// bare URL string, null) is no file and gives no entry, as in the
// submission_files views. Inputs come in key order, as in canonical JSON;
// a key given twice counts once, with its last value, as encoding/json
// and the sinks' canonical form read it. files that is neither an array
// nor an object (null, empty) has no entries; text that is not JSON is an
// error.
func Entries(files json.RawMessage) ([]Entry, error) {
	files = bytes.TrimSpace(files)
	if len(files) == 0 {
		return nil, nil
	}
	switch files[0] {
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(files, &elems); err != nil {
			return nil, fmt.Errorf("reading files: %w", err)
		}
		return appendElems(nil, nil, elems)
	case '{':
		var inputs map[string]json.RawMessage
		if err := json.Unmarshal(files, &inputs); err != nil {
			return nil, fmt.Errorf("reading files: %w", err)
		}
		names := make([]string, 0, len(inputs))
		for name := range inputs {
			names = append(names, name)
		}
		sort.Strings(names)
		var out []Entry
		for _, name := range names {
			v := bytes.TrimSpace(inputs[name])
			input := &name
			var err error
			switch {
			case len(v) > 0 && v[0] == '[':
				var elems []json.RawMessage
				if err := json.Unmarshal(v, &elems); err != nil {
					return nil, fmt.Errorf("reading files of input %q: %w", name, err)
				}
				out, err = appendElems(out, input, elems)
			default:
				out, err = appendElems(out, input, []json.RawMessage{v})
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if !json.Valid(files) {
		return nil, fmt.Errorf("reading files: not JSON")
	}
	return nil, nil
}

// appendElems appends an entry for each element of one input (or of the
// array shape) that is an object.
func appendElems(out []Entry, input *string, elems []json.RawMessage) ([]Entry, error) {
	for i, raw := range elems {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			continue
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return nil, fmt.Errorf("reading a file entry: %w", err)
		}
		out = append(out, Entry{
			Input:    input,
			Position: i,
			Name:     scalarText(members["name"]),
			URL:      scalarText(members["url"]),
			Type:     scalarText(members["type"]),
			Size:     integer(members["size"]),
		})
	}
	return out, nil
}

// scalarText is a member's value as text when it is a string or a number
// (an integer as written, another number in its shortest form, as the
// views' JSON_VALUE and CAST give it for ordinary values); nil otherwise.
func scalarText(raw json.RawMessage) *string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return &s
	case c == '-' || c >= '0' && c <= '9':
		s := string(raw)
		if integerText.MatchString(s) {
			return &s
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
		return &s
	}
	return nil
}

// integer is a member's value when it is an integer that fits 64 bits: a
// JSON integer, or a string holding one.
func integer(raw json.RawMessage) *int64 {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	s := string(raw)
	if raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
	}
	if !integerText.MatchString(s) {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}
