package daemon

import (
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/run"
)

// The task runner and the LLM proxy, connected: a run's model calls are
// its liveness (runProgress), its tokens and conversations come from the
// archive (archive.RunUsage), and the models a task may name are the proxy's.

// runProgress tells the runner that a call of c made progress: by the
// sandbox it came from when it came on a sandbox's channel (whatever run
// the sandbox's environment claims), else by the run of its per-run key.
func runProgress(runs run.Signal) func(caller.Caller) {
	return func(c caller.Caller) {
		if c.Sandbox != "" {
			runs.TouchSandbox(c.Sandbox)
			return
		}
		runs.Touch(c.Run)
	}
}
