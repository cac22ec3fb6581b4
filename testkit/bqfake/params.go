package bqfake

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The wire form of query parameters, decoded by hand: the generated API
// types cannot tell a NULL value from an empty string.
type pType struct {
	Type        string  `json:"type"`
	ArrayType   *pType  `json:"arrayType"`
	StructTypes []field `json:"structTypes"`
}

type field struct {
	Name string `json:"name"`
	Type *pType `json:"type"`
}

type pValue struct {
	Value        *string            `json:"value"`
	ArrayValues  []*pValue          `json:"arrayValues"`
	StructValues map[string]*pValue `json:"structValues"`
}

type param struct {
	Type  *pType
	Value *pValue
}

// String is the parameter type as GoogleSQL writes it, e.g.
// ARRAY<STRUCT<a STRING, b INT64>>.
func (t *pType) String() string {
	if t == nil {
		return "?"
	}
	switch t.Type {
	case "ARRAY":
		return "ARRAY<" + t.ArrayType.String() + ">"
	case "STRUCT":
		parts := make([]string, len(t.StructTypes))
		for i, f := range t.StructTypes {
			parts[i] = f.Name + " " + f.Type.String()
		}
		return "STRUCT<" + strings.Join(parts, ", ") + ">"
	}
	return t.Type
}

// decodeParams finds queryParameters at path in a request body.
func decodeParams(raw []byte, path ...string) (map[string]param, error) {
	for _, p := range path {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid", "bqfake: decoding request: %v", err)
		}
		raw = obj[p]
		if raw == nil {
			return map[string]param{}, nil
		}
	}
	var body struct {
		ParameterMode   string `json:"parameterMode"`
		QueryParameters []struct {
			Name           string  `json:"name"`
			ParameterType  *pType  `json:"parameterType"`
			ParameterValue *pValue `json:"parameterValue"`
		} `json:"queryParameters"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid", "bqfake: decoding query parameters: %v", err)
	}
	out := map[string]param{}
	for _, qp := range body.QueryParameters {
		if qp.Name == "" {
			return nil, invalidQuery("bqfake: positional query parameters are not supported")
		}
		if qp.ParameterType == nil {
			return nil, invalidQuery("Query parameter '%s' has no type", qp.Name)
		}
		if qp.ParameterValue == nil {
			qp.ParameterValue = &pValue{}
		}
		out[qp.Name] = param{qp.ParameterType, qp.ParameterValue}
	}
	return out, nil
}

// scalar converts a scalar parameter value to the SQLite value the fake
// stores for that type.
func scalar(t *pType, v *pValue) (any, error) {
	if v == nil || v.Value == nil {
		return nil, nil
	}
	s := *v.Value
	switch t.Type {
	case "STRING", "JSON":
		return s, nil
	case "INT64":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, invalidQuery("Invalid INT64 value: %s", s)
		}
		return n, nil
	case "BOOL":
		switch strings.ToLower(s) {
		case "true":
			return int64(1), nil
		case "false":
			return int64(0), nil
		}
		return nil, invalidQuery("Invalid BOOL value: %s", s)
	case "TIMESTAMP":
		us, err := parseTimestamp(s)
		if err != nil {
			return nil, invalidQuery("Invalid TIMESTAMP value: %s", s)
		}
		return us, nil
	case "FLOAT64":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, invalidQuery("Invalid FLOAT64 value: %s", s)
		}
		return f, nil
	}
	return nil, invalidQuery("bqfake: parameter type %s is not supported", t.Type)
}

// materialise writes an ARRAY parameter into the temp table param_<name>:
// one row per element, a column per STRUCT field (or one column "value").
// UNNEST(@name) becomes a read of that table.
func materialise(tx *sql.Tx, name string, p param) error {
	if p.Type.Type != "ARRAY" || p.Type.ArrayType == nil {
		return invalidQuery("bqfake: parameter %s: want an ARRAY, got %s", name, p.Type)
	}
	et := p.Type.ArrayType
	cols := []field{{Name: "value", Type: et}}
	if et.Type == "STRUCT" {
		cols = et.StructTypes
	}
	names := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		names[i], marks[i] = quoteIdent(c.Name), "?"
	}
	table := "temp." + quoteIdent("param_"+name)
	if _, err := tx.Exec("DROP TABLE IF EXISTS " + table); err != nil {
		return err
	}
	if _, err := tx.Exec("CREATE TEMP TABLE " + quoteIdent("param_"+name) + " (" + strings.Join(names, ", ") + ")"); err != nil {
		return fmt.Errorf("bqfake: materialising parameter %s: %w", name, err)
	}
	ins, err := tx.Prepare("INSERT INTO " + table + " VALUES (" + strings.Join(marks, ", ") + ")")
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, ev := range p.Value.ArrayValues {
		args := make([]any, len(cols))
		for i, c := range cols {
			v := ev
			if et.Type == "STRUCT" {
				v = ev.StructValues[c.Name]
				// How BigQuery passes a NULL member of a STRUCT inside an
				// ARRAY parameter was never checked against the service;
				// the fake refuses it rather than guess.
				if v == nil || v.Value == nil && v.ArrayValues == nil && v.StructValues == nil {
					return invalidQuery("bqfake: parameter %s: member %s of element is NULL: NULL inside a STRUCT of an ARRAY parameter is not supported", name, c.Name)
				}
			}
			a, err := scalar(c.Type, v)
			if err != nil {
				return err
			}
			args[i] = a
		}
		if _, err := ins.Exec(args...); err != nil {
			return err
		}
	}
	return nil
}
