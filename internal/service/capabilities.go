package service

import (
	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// WithRuntime makes Capabilities answer for rt, the manager's runtime;
// without it the service claims none.
func WithRuntime(rt sandbox.Runtime) SandboxesOption { return func(s *Sandboxes) { s.rt = rt } }

// Capabilities says what the runtime can do that runtimes differ in: what
// the manager would refuse with 501 is false.
func (s *Sandboxes) Capabilities() api.Capabilities {
	if s.rt == nil {
		return api.Capabilities{}
	}
	caps := s.rt.Capabilities()
	_, pauser := s.rt.(sandbox.Pauser)
	_, checkpointer := s.rt.(sandbox.Checkpointer)
	return api.Capabilities{Runtime: s.rt.Name(), Pause: pauser && caps.Pause, Snapshots: checkpointer && caps.Checkpoint}
}
