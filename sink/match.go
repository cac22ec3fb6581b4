package sink

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
