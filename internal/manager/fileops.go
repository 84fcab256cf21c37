package manager

import (
	"context"

	"github.com/agent2env/agent2env/internal/agent"
)

// Move renames from to to in the sandbox (both cleaned as CleanPath).
func (m *Manager) Move(ctx context.Context, id, from, to string) error {
	to, err := CleanPath(to)
	if err != nil {
		return err
	}
	return m.fileOp(ctx, id, from, func(c *agent.Client, from string) error {
		return c.Move(ctx, from, to)
	})
}

// Remove deletes the file or empty directory at p in the sandbox, and a
// directory's contents when recursive.
func (m *Manager) Remove(ctx context.Context, id, p string, recursive bool) error {
	return m.fileOp(ctx, id, p, func(c *agent.Client, p string) error {
		return c.Remove(ctx, p, recursive)
	})
}
