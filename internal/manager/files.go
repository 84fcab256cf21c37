package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// fileErr gives not-found errors from the agent the file code.
func fileErr(err error) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.WithCode(err, api.CodeFileNotFound)
	}
	if errors.Is(err, errdefs.ErrResourceExhausted) {
		return errdefs.WithCode(err, api.CodeNoSpace)
	}
	return err
}

// Upload streams r into the file at p in the sandbox.
func (m *Manager) Upload(ctx context.Context, id, p string, mode os.FileMode, r io.Reader) (agent.FileInfo, error) {
	p, err := CleanPath(p)
	if err != nil {
		return agent.FileInfo{}, err
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agent.FileInfo{}, err
	}
	fi, err := c.Upload(ctx, p, mode, r)
	if err != nil {
		return agent.FileInfo{}, fmt.Errorf("upload %s to sandbox %s: %w", p, id, fileErr(err))
	}
	return fi, nil
}

// Download opens the file at p in the sandbox; the caller closes it. The
// size is -1 when unknown.
func (m *Manager) Download(ctx context.Context, id, p string) (io.ReadCloser, int64, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, 0, err
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	rc, size, err := c.Download(ctx, p)
	if err != nil {
		return nil, 0, fmt.Errorf("download %s from sandbox %s: %w", p, id, fileErr(err))
	}
	return rc, size, nil
}

// Logs returns the sandbox's console output (at most the last limit bytes)
// and its event history.
func (m *Manager) Logs(ctx context.Context, id string, limit int64) (string, []string, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return "", nil, err
	}
	evs, err := m.store.Events(ctx, id)
	if err != nil {
		return "", nil, err
	}
	events := make([]string, len(evs))
	for i, ev := range evs {
		events[i] = ev.At.Format("2006-01-02T15:04:05.000Z07:00") + " " + ev.Status
		if ev.Message != "" {
			events[i] += ": " + ev.Message
		}
	}
	var logs string
	if lr, ok := m.rt.(sandbox.LogReader); ok {
		b, err := lr.Logs(ctx, id, limit)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return "", nil, fmt.Errorf("read logs of sandbox %s: %w", id, err)
		}
		logs = string(b)
	}
	return logs, events, nil
}
