package daemon

import (
	"context"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/store"
)

// The task runner and the LLM proxy, connected: a run's model calls are
// its liveness (runProgress), its tokens and conversations come from the
// archive (runLLMUsage), and the models a task may name are the proxy's.

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

// runLLMUsage reads a run's model calls from the archive (run.LLMUsage).
type runLLMUsage struct {
	archive func() *archive.Archive
}

var _ run.LLMUsage = runLLMUsage{}

// syncWait bounds the wait for the archive's index to hold the calls of
// a run that just ended.
const syncWait = 5 * time.Second

// RunUsage implements run.LLMUsage: the exchanges of run id, or, when
// none carries its id, those of its sandbox.
func (u runLLMUsage) RunUsage(ctx context.Context, id, sandboxID string) (api.RunLLMUsage, []string, bool) {
	a := u.archive()
	if a == nil {
		return api.RunLLMUsage{}, nil, false
	}
	sctx, cancel := context.WithTimeout(ctx, syncWait)
	err := a.Sync(sctx)
	cancel()
	if err != nil {
		return api.RunLLMUsage{}, nil, false
	}
	for _, f := range []store.LLMExchangeFilter{{RunID: id}, {SandboxID: sandboxID}} {
		if f == (store.LLMExchangeFilter{}) {
			continue
		}
		usage, convs, err := sumExchanges(ctx, a, f)
		if err != nil {
			return api.RunLLMUsage{}, nil, false
		}
		if usage.Requests > 0 {
			return usage, convs, true
		}
	}
	return api.RunLLMUsage{}, nil, false
}

// sumExchanges adds up the exchanges f selects and lists their
// conversations, first started first.
func sumExchanges(ctx context.Context, a *archive.Archive, f store.LLMExchangeFilter) (api.RunLLMUsage, []string, error) {
	var u api.RunLLMUsage
	var convs []string
	seen := map[string]bool{}
	p := store.Page{Limit: api.MaxPageSize}
	for {
		xs, next, err := a.List(ctx, f, p)
		if err != nil {
			return u, nil, err
		}
		for _, x := range xs {
			u.Requests++
			u.InputTokens += int64(x.InputTokens)
			u.OutputTokens += int64(x.OutputTokens)
			u.CachedTokens += int64(x.CachedTokens)
			if c := x.Conversation; c != "" && !seen[c] {
				seen[c] = true
				convs = append(convs, c)
			}
		}
		if next == "" {
			return u, convs, nil
		}
		p.After = next
	}
}
