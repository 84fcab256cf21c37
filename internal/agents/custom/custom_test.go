package custom

import (
	"testing"

	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

// TestConformance runs the suite without samples: a custom agent prints
// plain lines and has no result line (its exit code is the result).
func TestConformance(t *testing.T) {
	agenttest.Run(t, Adapter{})
}

func TestNoEntrypoint(t *testing.T) {
	in := agenttest.Input()
	in.Entrypoint = " "
	if _, err := (Adapter{}).Plan(in); err == nil {
		t.Error("Plan without an entrypoint succeeded")
	}
}
