package auth

import (
	"context"
	"strings"
)

// What a sandbox's own code makes through the daemon's services (its MCP
// server: sessions, contexts and the sandboxes for them) belongs to the
// sandbox: its tenant is SandboxTenant(id) — RunTenant(run) for a task
// run's sandbox — out of reach of every other tenant, and listed to the
// API key that made the sandbox; the sandboxes made for it are owned by
// the sandbox (store.Sandbox.Owner), counted against its limits and
// deleted with it.

type ownerKey struct{}

// SandboxTenant is the tenant of what sandbox id's code makes.
func SandboxTenant(id string) string { return "sandbox:" + id }

// TenantSandbox returns the sandbox whose code a SandboxTenant stands for
// ("" for any other tenant).
func TenantSandbox(tenant string) string { return cut(tenant, "sandbox:") }

// TenantRun returns the run whose agent a RunTenant stands for ("" for
// any other tenant).
func TenantRun(tenant string) string { return cut(tenant, "run:") }

// Maker names who made what has tenant, a SandboxTenant or a RunTenant:
// "the code of sandbox ID" or "the agent of run ID".
func Maker(tenant string) string {
	if r := TenantRun(tenant); r != "" {
		return "the agent of run " + r
	}
	return "the code of sandbox " + TenantSandbox(tenant)
}

func cut(tenant, prefix string) string {
	if id, ok := strings.CutPrefix(tenant, prefix); ok {
		return id
	}
	return ""
}

// RunTenant is the tenant of what task run id's agent makes.
func RunTenant(id string) string { return "run:" + id }

// WithOwner returns ctx carrying the sandbox on whose behalf its request
// is made: set only for requests that came on that sandbox's own channel.
func WithOwner(ctx context.Context, sandboxID string) context.Context {
	return context.WithValue(ctx, ownerKey{}, sandboxID)
}

// OwnerOf returns the sandbox ctx's request is made for ("" when the
// request is an API client's).
func OwnerOf(ctx context.Context) string {
	s, _ := ctx.Value(ownerKey{}).(string)
	return s
}
