package image

import (
	"testing"

	"github.com/agent2env/agent2env/internal/agent"
)

// TestJupyterProbeEnv checks that the code-interpreter image's probe
// variable (TestBuildConfig: in its environment) is the agent's own, with
// the agent's address.
func TestJupyterProbeEnv(t *testing.T) {
	if want := agent.EnvJupyterProbe + "=" + agent.JupyterProbeAddr; jupyterProbe != want {
		t.Fatalf("jupyterProbe = %q, want %q", jupyterProbe, want)
	}
}
