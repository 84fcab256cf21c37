package llmtest

import (
	"net/http"

	"github.com/agent2env/agent2env/internal/llm/caller"
)

// Test headers that WithTestCaller reads.
const (
	HeaderSandbox = "X-Test-Sandbox"
	HeaderRun     = "X-Test-Run"
	HeaderTenant  = "X-Test-Tenant"
)

// WithTestCaller puts the caller named by the request's HeaderSandbox,
// HeaderRun and HeaderTenant into its context before h runs, as the daemon
// does for the sandbox a request came from (or the key it presented):
// tests of what is recorded per caller.
func WithTestCaller(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := caller.Caller{Sandbox: r.Header.Get(HeaderSandbox), Run: r.Header.Get(HeaderRun), Tenant: r.Header.Get(HeaderTenant)}
		h.ServeHTTP(w, r.WithContext(caller.WithCaller(r.Context(), c)))
	})
}
