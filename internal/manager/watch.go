package manager

import (
	"context"

	"github.com/agent2env/agent2env/internal/agent"
)

// WatchDir watches directory p of sandbox id (every directory below it
// when recursive) with the agent's inotify watch, until ctx ends or the
// watch is closed.
func (m *Manager) WatchDir(ctx context.Context, id, p string, recursive bool) (w *agent.DirWatch, err error) {
	err = m.fileOp(ctx, id, p, func(c *agent.Client, p string) (err error) {
		w, err = c.WatchDir(ctx, p, recursive)
		return err
	})
	return w, err
}
