package sink

import (
	"errors"
	"fmt"

	"github.com/formsync/formsync/internal/jsonscan"
)

// AppendCanonical appends the canonical form of the single JSON value src
// to dst: what decoding it with encoding/json (UseNumber) and encoding it
// again (SetEscapeHTML(false)) produces, keys sorted and unique. Content
// keys hash it, so it never changes (see jsonscan.AppendCanonical).
func AppendCanonical(dst, src []byte) ([]byte, error) {
	dst, err := jsonscan.AppendCanonical(dst, src)
	return dst, canonicalError(err)
}

// CanonicalJSON is AppendCanonical for strings.
func CanonicalJSON(s string) (string, error) {
	b, err := AppendCanonical(nil, []byte(s))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// canonicalError says ErrTooDeep for a value nested too deeply.
func canonicalError(err error) error {
	if err == nil {
		return nil // before errors.As, whose target escapes
	}
	var deep *jsonscan.DepthError
	if errors.As(err, &deep) {
		return fmt.Errorf("%w: more than %d levels", ErrTooDeep, deep.Limit)
	}
	return err
}
