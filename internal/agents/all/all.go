// Package all lists every agent adapter, by the name task files use: the
// one place adapters are registered.
package all

import (
	"sort"

	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/claudecode"
	"github.com/agent2env/agent2env/internal/agents/codex"
	"github.com/agent2env/agent2env/internal/agents/custom"
	"github.com/agent2env/agent2env/internal/agents/geminicli"
	"github.com/agent2env/agent2env/internal/agents/opencode"
	"github.com/agent2env/agent2env/internal/agents/qwencode"
)

var adapters = map[string]agents.Adapter{}

func init() {
	for _, a := range []agents.Adapter{
		claudecode.Adapter{}, codex.Adapter{}, geminicli.Adapter{},
		opencode.Adapter{}, qwencode.Adapter{}, custom.Adapter{},
	} {
		adapters[a.Name()] = a
	}
}

// Get returns the adapter of the agent called name.
func Get(name string) (agents.Adapter, bool) {
	a, ok := adapters[name]
	return a, ok
}

// Names lists the agents, sorted.
func Names() []string {
	names := make([]string, 0, len(adapters))
	for n := range adapters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
