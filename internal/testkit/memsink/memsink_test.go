package memsink_test

import (
	"testing"

	"github.com/formsync/formsync/internal/testkit/memsink"
	"github.com/formsync/formsync/internal/testkit/sinktest"
)

func TestContract(t *testing.T) {
	t.Parallel()
	sinktest.Run(t, func(t *testing.T) sinktest.Sink {
		s := memsink.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
