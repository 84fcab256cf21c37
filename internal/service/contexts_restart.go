package service

import (
	"context"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Restart restarts context id of sandbox sandboxID (a sandbox is
// required): the same context with a new interpreter, its state gone.
func (c *Contexts) Restart(ctx context.Context, sandboxID, id string) error {
	if sandboxID == "" {
		return errdefs.Invalid("restarting a context needs its sandbox")
	}
	return c.svc.RestartIn(ctx, sandboxID, id)
}
