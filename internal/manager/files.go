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

// fileOp runs op on the agent of running sandbox id with p cleaned
// (CleanPath), giving its error the file code. The error is the agent's,
// which names the path and the system call that failed: the surfaces send
// it as the message, which their clients prefix with what they asked for
// ("download %s from sandbox %s") — said here too, it would be said twice.
func (m *Manager) fileOp(ctx context.Context, id, p string, op func(c *agent.Client, p string) error) error {
	p, err := CleanPath(p)
	if err != nil {
		return err
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return err
	}
	return fileErr(op(c, p))
}

// Upload streams r into the file at p in the sandbox.
func (m *Manager) Upload(ctx context.Context, id, p string, mode os.FileMode, r io.Reader) (fi agent.FileInfo, err error) {
	err = m.fileOp(ctx, id, p, func(c *agent.Client, p string) (err error) {
		fi, err = c.Upload(ctx, p, mode, r)
		return err
	})
	return fi, err
}

// PutFile sends one file of an UploadFiles: the file at p with mode's
// permissions, read from r to its end.
type PutFile func(p string, mode os.FileMode, r io.Reader) error

// UploadFiles writes files into the sandbox as one change: files is called
// with put, which sends one file (its path checked as CleanPath does),
// streaming it. Once files returns nil, the files are put in place
// together and described in the order sent; when it, or a put, fails, none
// is, and what was at their paths is left as it was. An agent older than
// batch uploads (a sandbox paused across an upgrade) is given each file as
// it comes, as Upload does.
func (m *Manager) UploadFiles(ctx context.Context, id string, files func(put PutFile) error) ([]agent.FileInfo, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	b, err := c.StartUpload(ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		var out []agent.FileInfo
		err := files(func(p string, mode os.FileMode, r io.Reader) error {
			fi, err := m.Upload(ctx, id, p, mode, r)
			out = append(out, fi)
			return err
		})
		return out, err
	}
	if err != nil {
		return nil, fmt.Errorf("upload to sandbox %s: %w", id, fileErr(err))
	}
	err = files(func(p string, mode os.FileMode, r io.Reader) error {
		cp, err := CleanPath(p)
		if err != nil {
			return err
		}
		if err := b.Add(cp, mode, r); err != nil {
			return fmt.Errorf("upload %s to sandbox %s: %w", cp, id, fileErr(err))
		}
		return nil
	})
	if err != nil {
		b.Abort()
		return nil, err
	}
	fis, err := b.Commit()
	if err != nil {
		return nil, fmt.Errorf("upload to sandbox %s: %w", id, fileErr(err))
	}
	return fis, nil
}

// Download opens the file at p in the sandbox; the caller closes it. The
// size is -1 when unknown.
func (m *Manager) Download(ctx context.Context, id, p string) (rc io.ReadCloser, size int64, err error) {
	err = m.fileOp(ctx, id, p, func(c *agent.Client, p string) (err error) {
		rc, size, err = c.Download(ctx, p)
		return err
	})
	return rc, size, err
}

// DownloadFrom is Download from byte offset on, read from there by the
// agent; size is what is left from offset.
func (m *Manager) DownloadFrom(ctx context.Context, id, p string, offset int64) (rc io.ReadCloser, size int64, err error) {
	err = m.fileOp(ctx, id, p, func(c *agent.Client, p string) (err error) {
		rc, size, err = c.DownloadFrom(ctx, p, offset)
		return err
	})
	return rc, size, err
}

// Stat describes the file at p in the sandbox (a symbolic link itself, not
// its target).
func (m *Manager) Stat(ctx context.Context, id, p string) (fi agent.FileInfo, err error) {
	err = m.fileOp(ctx, id, p, func(c *agent.Client, p string) (err error) {
		fi, err = c.Stat(ctx, p)
		return err
	})
	return fi, err
}

// StatTarget describes what path p leads to in the sandbox, a final
// symlink followed (agent.Client.StatTarget).
func (m *Manager) StatTarget(ctx context.Context, id, p string) (fi agent.FileInfo, err error) {
	err = m.fileOp(ctx, id, p, func(c *agent.Client, p string) (err error) {
		fi, err = c.StatTarget(ctx, p)
		return err
	})
	return fi, err
}

// ListDir describes the entries of directory p in the sandbox.
func (m *Manager) ListDir(ctx context.Context, id, p string) (fis []agent.FileInfo, err error) {
	err = m.fileOp(ctx, id, p, func(c *agent.Client, p string) (err error) {
		fis, err = c.List(ctx, p)
		return err
	})
	return fis, err
}

// Mkdir makes directory p in the sandbox, and its parents.
func (m *Manager) Mkdir(ctx context.Context, id, p string) error {
	return m.fileOp(ctx, id, p, func(c *agent.Client, p string) error {
		return c.Mkdir(ctx, p, true)
	})
}

// Logs returns the sandbox's console output (at most the last limit bytes)
// and its event history, with how many of its oldest events the store
// dropped (store.MaxEvents).
func (m *Manager) Logs(ctx context.Context, id string, limit int64) (*api.LogsResponse, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return nil, err
	}
	evs, dropped, err := m.store.Events(ctx, id)
	if err != nil {
		return nil, err
	}
	events := make([]string, len(evs))
	for i, ev := range evs {
		events[i] = ev.At.Format("2006-01-02T15:04:05.000Z07:00") + " " + ev.Status
		if ev.Message != "" {
			events[i] += ": " + ev.Message
		}
	}
	out := &api.LogsResponse{Events: events, EventsDropped: dropped}
	if lr, ok := m.rt.(sandbox.LogReader); ok {
		b, err := lr.Logs(ctx, id, limit)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return nil, fmt.Errorf("read logs of sandbox %s: %w", id, err)
		}
		out.Logs = string(b)
	}
	return out, nil
}
