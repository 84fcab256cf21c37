package main

import (
	"context"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// goCreateExec times what the compatible APIs' SDKs are measured against:
// a create of req through agent2env's Go client, its wait for running and
// an exec of cmd. The delete that follows is not timed.
func goCreateExec(c *client.Client, req api.CreateSandboxRequest, cmd []string) (time.Duration, error) {
	ctx := context.Background()
	start := time.Now()
	sb, err := c.Sandbox.Create(ctx, req)
	if err != nil {
		return 0, err
	}
	id := sb.ID
	if sb.Status != api.StatusRunning {
		if _, err = c.Sandbox.WaitForReady(ctx, id, 10*time.Millisecond); err != nil {
			_ = c.Sandbox.Delete(ctx, id)
			return 0, err
		}
	}
	res, err := c.Sandbox.Execute(ctx, id, api.ExecRequest{Command: cmd})
	took := time.Since(start)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exec %v exited %d", cmd, res.ExitCode)
	}
	if derr := c.Sandbox.Delete(ctx, id); err == nil {
		err = derr
	}
	return took, err
}
