package memory_test

import (
	"testing"

	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/testkit/sinktest"
)

func TestContract(t *testing.T) {
	t.Parallel()
	sinktest.Run(t, func(t *testing.T) sinktest.Sink {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		return s
	}, sinktest.KeepsFiles)
}
