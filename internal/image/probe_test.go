package image

import (
	"slices"
	"testing"

	"github.com/agent2env/agent2env/internal/agent"
)

// TestJupyterProbeEnv checks that the code-interpreter image's environment
// has its agent answer OpenSandbox's readiness probe, with the agent's own
// variable and address.
func TestJupyterProbeEnv(t *testing.T) {
	want := agent.EnvJupyterProbe + "=" + agent.JupyterProbeAddr
	if jupyterProbe != want {
		t.Fatalf("jupyterProbe = %q, want %q", jupyterProbe, want)
	}
	if env := recipes["agent2env/code-interpreter:latest"].env; !slices.Contains(env, want) {
		t.Errorf("code-interpreter image env %v lacks %s", env, want)
	}
}
