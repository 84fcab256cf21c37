// Package custom is the adapter of the custom agent: the task's entrypoint
// run by /bin/sh in the workdir, with the environment every agent gets
// (the proxy's base URLs and key, the model, the goal, the MCP servers)
// and nothing else; its output is plain lines.
package custom

import (
	"errors"
	"strings"

	"github.com/agent2env/agent2env/internal/agents"
)

// Adapter is the custom agent's adapter. The zero value is ready.
type Adapter struct{}

var _ agents.Adapter = Adapter{}

// Name implements agents.Adapter.
func (Adapter) Name() string { return "custom" }

// Plan implements agents.Adapter.
func (Adapter) Plan(in agents.Input) (*agents.Plan, error) {
	if strings.TrimSpace(in.Entrypoint) == "" {
		return nil, errors.New("the custom agent needs an entrypoint")
	}
	return &agents.Plan{Command: []string{"/bin/sh", "-c", in.Entrypoint}, Env: agents.Env(in), Dir: in.Workdir}, nil
}

// NewParser implements agents.Adapter.
func (Adapter) NewParser() agents.Parser { return agents.Lines{} }
