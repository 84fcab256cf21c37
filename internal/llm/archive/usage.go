package archive

import (
	"context"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/store"
)

// syncWait bounds RunUsage's wait for the index to hold the calls of a
// run that just ended.
const syncWait = 5 * time.Second

// RunUsage sums the exchanges of task run id that reached a provider
// (not those refused by a limit): those carrying its id (a per-run key's,
// or a sandbox's calls the runner knew), else those of its sandbox; with
// the ids of their conversations, first started first.
// False when the archive holds none, or its index could not catch up
// within syncWait. (It is the task runner's run.LLMUsage.)
func (a *Archive) RunUsage(ctx context.Context, id, sandboxID string) (api.RunLLMUsage, []string, bool) {
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
		usage, convs, err := a.sum(ctx, f)
		if err != nil {
			return api.RunLLMUsage{}, nil, false
		}
		if usage.Requests > 0 {
			return usage, convs, true
		}
	}
	return api.RunLLMUsage{}, nil, false
}

// sum adds up the exchanges f selects and lists their conversations,
// first started first.
func (a *Archive) sum(ctx context.Context, f store.LLMExchangeFilter) (api.RunLLMUsage, []string, error) {
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
			if x.Provider == "" { // refused, or for no model: no call made
				continue
			}
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
