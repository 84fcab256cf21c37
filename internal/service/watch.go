package service

// Directory watches: the agent's inotify watch of a sandbox's directory.

import (
	"context"
	"fmt"

	"github.com/agent2env/agent2env/internal/agent"
)

// FileOp is the kind of a change a DirWatch saw.
type FileOp int

// The changes a DirWatch reports.
const (
	// FileCreated: an entry was made (or renamed to this name).
	FileCreated FileOp = iota + 1
	// FileWritten: a file was written, or replaced by an upload.
	FileWritten
	// FileRemoved: an entry was removed.
	FileRemoved
	// FileRenamed: an entry was renamed away from this name (its new
	// name, when in the watched directory, is a FileCreated).
	FileRenamed
	// FileChmodded: an entry's permissions or times changed.
	FileChmodded
)

var fileOps = map[string]FileOp{
	agent.WatchCreate: FileCreated, agent.WatchWrite: FileWritten, agent.WatchRemove: FileRemoved,
	agent.WatchRename: FileRenamed, agent.WatchChmod: FileChmodded,
}

// FileEvent is one change a DirWatch saw.
type FileEvent struct {
	Op FileOp
	// Name is the entry's path relative to the watched directory.
	Name string
}

// DirWatcher is a watch of a sandbox's directory: Next returns its
// changes as they happen, an error once it has ended; Close ends it. Next
// is called from one goroutine at a time; Close from any.
type DirWatcher interface {
	Next() (FileEvent, error)
	Close() error
	// Root is the watched directory.
	Root() string
}

// dirWatch is the agent's watch as a DirWatcher.
type dirWatch struct {
	w    *agent.DirWatch
	root string
}

func (d *dirWatch) Next() (FileEvent, error) {
	ev, err := d.w.Next()
	if err != nil {
		return FileEvent{}, fmt.Errorf("watch %s: %w", d.root, err)
	}
	return FileEvent{Op: fileOps[ev.Op], Name: ev.Name}, nil
}

func (d *dirWatch) Close() error { return d.w.Close() }

func (d *dirWatch) Root() string { return d.root }

// WatchDir watches directory dir of sandbox id (every directory below it
// that the sandbox's user may read, when recursive) with inotify in the
// sandbox, until ctx ends or Close: it returns once the watch is set up.
// A missing directory is ErrNotFound, a file ErrInvalidArgument.
func (s *Sandboxes) WatchDir(ctx context.Context, id, dir string, recursive bool) (DirWatcher, error) {
	root, err := CleanPath(dir)
	if err != nil {
		return nil, err
	}
	w, err := s.m.WatchDir(ctx, id, root, recursive)
	if err != nil {
		return nil, err
	}
	return &dirWatch{w: w, root: root}, nil
}
