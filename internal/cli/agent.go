package cli

import (
	"context"
	"log/slog"

	"github.com/agent2env/agent2env/internal/agent"
)

// agentCmd runs the in-sandbox agent as the sandbox's first process.
type agentCmd struct{ env }

func (c *agentCmd) Run(ctx context.Context, args []string) error {
	fs := newFlags(c.env, "agent", "agent [flags]")
	uid := fs.Int("uid", 1000, "user id commands run as (-1: the agent's own)")
	gid := fs.Int("gid", 1000, "group id commands run as")
	cwd := fs.String("cwd", "/workspace", "default working directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.stderr, nil))
	return agent.Run(ctx, agent.Options{UID: *uid, GID: *gid, Cwd: *cwd, Log: log})
}
