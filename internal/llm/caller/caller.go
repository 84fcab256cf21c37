// Package caller carries who made a call to the daemon's LLM proxy (and
// its MCP server) in a request's context: the sandbox the request came
// from, known by the channel it arrived on and so unforgeable from inside
// the sandbox; the run it belongs to; and the per-run LLM key it presented.
// The daemon sets it before the proxy runs; the proxy's observers, the
// archive and budgets read it. The zero Caller is an operator's call
// (authenticated by an API key, or none on loopback).
package caller

import "context"

// Caller identifies the origin of a request. Fields are empty when unknown.
type Caller struct {
	// Sandbox is the id of the sandbox the request came from, set only
	// for requests that arrived on a sandbox's own channel.
	Sandbox string
	// Run is the task run the sandbox or key belongs to, if any.
	Run string
	// Key is the id (never the secret) of the per-run LLM key presented.
	Key string
	// Tenant is whom the call's exchanges belong to (auth.Tenant): the
	// tenant of its API key, or of the API key that made its per-run key;
	// for a sandbox's calls, the tenant of the task run the sandbox is
	// made for (store.Run.Tenant), as the run is; "" for the calls of
	// any other sandbox, which every key reaches as it reaches
	// sandboxes, and for every call of a daemon without API keys.
	Tenant string
}

type ctxKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// From returns the Caller in ctx, the zero Caller if there is none.
func From(ctx context.Context) Caller {
	c, _ := ctx.Value(ctxKey{}).(Caller)
	return c
}

// EnvRun is the environment variable naming the run, in every command the
// task runner starts in a run's sandbox, for the agent and its tools to
// read. The daemon does not take it from requests: it knows the run of a
// sandbox from the runner.
const EnvRun = "AGENT2ENV_RUN_ID"
