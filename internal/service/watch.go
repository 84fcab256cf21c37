package service

// Directory watches by polling: the agent has no change notification
// (inotify) call, so a watch compares what a directory holds, looked at
// again and again, with what it held the time before. What that cannot
// see is documented on DirWatch.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// FileOp is the kind of a change a DirWatch saw.
type FileOp int

// The changes a DirWatch reports.
const (
	// FileCreated: an entry that was not there is.
	FileCreated FileOp = iota + 1
	// FileWritten: a file's size or modification time changed.
	FileWritten
	// FileRemoved: an entry that was there is not.
	FileRemoved
	// FileChmodded: an entry's permissions changed, and nothing else.
	FileChmodded
)

// FileEvent is one change a DirWatch saw.
type FileEvent struct {
	Op FileOp
	// Name is the entry's path relative to the watched directory.
	Name string
	// Stat is the entry as the watch saw it; nil for a removal.
	Stat *FileStat
}

// DirWatch watches a directory of a sandbox by polling: each Poll lists
// the directory (all below it when recursive, MaxWalkEntries at most) and
// reports how it differs from the previous listing. Changes between two
// polls that undo each other are not seen (a file made and removed), a
// file written several times is one FileWritten, and a rename is a
// FileRemoved of the old name and a FileCreated of the new one. A
// DirWatch is used by one goroutine at a time.
type DirWatch struct {
	s         *Sandboxes
	id, root  string
	recursive bool
	last      map[string]FileStat // by path
}

// WatchDir starts watching directory dir of sandbox id: it takes the
// listing the first Poll compares with. A missing directory is
// ErrNotFound, a file ErrInvalidArgument.
func (s *Sandboxes) WatchDir(ctx context.Context, id, dir string, recursive bool) (*DirWatch, error) {
	root, err := CleanPath(dir)
	if err != nil {
		return nil, err
	}
	w := &DirWatch{s: s, id: id, root: root, recursive: recursive}
	if w.last, err = w.list(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// list returns what the watched directory holds now.
func (w *DirWatch) list(ctx context.Context) (map[string]FileStat, error) {
	depth := 1
	if w.recursive {
		depth = 0
	}
	entries, err := w.s.Walk(ctx, w.id, w.root, depth)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", w.root, err)
	}
	out := make(map[string]FileStat, len(entries))
	for _, e := range entries {
		out[e.Path] = e
	}
	return out, nil
}

// Poll lists the directory again and returns the changes since the
// previous listing, in lexical order of their names (a removal before a
// creation of the same name).
func (w *DirWatch) Poll(ctx context.Context) ([]FileEvent, error) {
	now, err := w.list(ctx)
	if err != nil {
		return nil, err
	}
	events := diffListings(w.root, w.last, now)
	w.last = now
	return events, nil
}

// diffListings returns the changes from listing old to listing now of
// directory root.
func diffListings(root string, old, now map[string]FileStat) []FileEvent {
	var events []FileEvent
	rel := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, root), "/") }
	for p, n := range now {
		o, ok := old[p]
		switch {
		case !ok || o.IsDir != n.IsDir || o.Link != n.Link:
			if ok { // replaced by another kind of entry
				events = append(events, FileEvent{Op: FileRemoved, Name: rel(p)})
			}
			events = append(events, FileEvent{Op: FileCreated, Name: rel(p), Stat: &n})
		case !n.IsDir && (o.Size != n.Size || !o.ModTime.Equal(n.ModTime)):
			events = append(events, FileEvent{Op: FileWritten, Name: rel(p), Stat: &n})
		case o.Mode != n.Mode:
			events = append(events, FileEvent{Op: FileChmodded, Name: rel(p), Stat: &n})
		}
	}
	for p := range old {
		if _, ok := now[p]; !ok {
			events = append(events, FileEvent{Op: FileRemoved, Name: rel(p)})
		}
	}
	sortEvents(events)
	return events
}

// sortEvents orders events by name, a removal before what replaced it.
func sortEvents(events []FileEvent) {
	slices.SortFunc(events, func(a, b FileEvent) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(opRank(a.Op), opRank(b.Op)))
	})
}

// opRank puts a removal first among the events of one name.
func opRank(op FileOp) int {
	if op == FileRemoved {
		return 0
	}
	return 1
}
