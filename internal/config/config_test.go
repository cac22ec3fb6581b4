package config_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/formsync/formsync/internal/config"
)

func TestProblems(t *testing.T) {
	other := errors.New("no field")
	joined := errors.Join(config.Errorf("PageSize", "%d is outside 1..100", 101), other, config.Errorf("BaseURL", "bad: %w", fs.ErrInvalid))
	err := fmt.Errorf("lib: invalid configuration: %w", joined)
	got := config.Problems(err)
	if len(got) != 3 {
		t.Fatalf("Problems: %d, want 3: %v", len(got), got)
	}
	var fe *config.FieldError
	if !errors.As(got[0], &fe) || fe.Field != "PageSize" || fe.Err.Error() != "101 is outside 1..100" || fe.Error() != "PageSize: 101 is outside 1..100" {
		t.Errorf("first problem %#v", got[0])
	}
	if got[1] != other {
		t.Errorf("second problem %v, want the error that names no field", got[1])
	}
	if !errors.Is(got[2], fs.ErrInvalid) || !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("a wrapped sentinel is lost: %v", got[2])
	}
	if config.Problems(nil) != nil {
		t.Error("Problems(nil) is not nil")
	}
}
