package sink

import (
	"encoding/json"
)

// Match selects stored rows of one form: those whose submission key is one
// of Keys, and, when Field is set, those whose fields object has a member
// named Field (exactly, case included) holding the JSON string Value.
type Match struct {
	Keys  []string
	Field string
	Value string
}

// Empty reports whether m selects nothing.
func (m Match) Empty() bool { return len(m.Keys) == 0 && m.Field == "" }

// FieldIs reports whether the fields object (JSON) has a member named name
// that is the JSON string value: the test Match applies to a row's fields,
// for sinks that apply it in Go.
func FieldIs(fields, name, value string) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(fields), &m); err != nil {
		return false
	}
	raw, ok := m[name]
	if !ok {
		return false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return false
	}
	return s == value
}
