package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/fsnotify/fsnotify"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// The operations of a WatchEvent.
const (
	WatchCreate = "create"
	WatchWrite  = "write"
	WatchRemove = "remove"
	WatchRename = "rename"
	WatchChmod  = "chmod"
)

// WatchEvent is a change under a watched directory (GET /v1/watch).
type WatchEvent struct {
	// Op is one of WatchCreate, WatchWrite, WatchRemove, WatchRename
	// (the old name of a renamed entry; its new name is a create, or a
	// write when it replaced an entry) and WatchChmod.
	Op string `json:"op"`
	// Name is the entry's path relative to the watched directory.
	Name string `json:"name"`
}

// Frame kinds of the watch stream: the watch is set up (empty), an event
// (a WatchEvent), the end (an errorBody).
const (
	frameWatchStart byte = 's'
	frameWatchEvent byte = 'w'
	frameWatchEnd   byte = 'z'
)

// maxWatchDirs bounds the directories one recursive watch watches (a
// variable for the tests).
var maxWatchDirs = 10000

// watchOps maps fsnotify's operations to a WatchEvent's, in the order a
// change with several is reported.
var watchOps = []struct {
	op   fsnotify.Op
	name string
}{
	{fsnotify.Create, WatchCreate}, {fsnotify.Write, WatchWrite}, {fsnotify.Remove, WatchRemove},
	{fsnotify.Rename, WatchRename}, {fsnotify.Chmod, WatchChmod},
}

// uploadTemp matches the temporary files of uploads (handleUpload), which
// a watch does not report: an upload is a create of its file, or a write
// when it replaces one, as if it wrote the file in place.
var uploadTemp = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\.upload-[0-9]+$`) })

// handleWatch streams the changes under a directory (?path=&recursive=)
// with inotify until the client goes away: a start frame once the
// directory is watched, an event frame a change, and an end frame when
// the watch fails. Directories are watched as the sandbox's user: those
// it may not read are not watched.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	root, ok := s.pathParam(w, r, "path")
	if !ok {
		return
	}
	recursive, err := strconv.ParseBool(r.URL.Query().Get("recursive"))
	if err != nil && r.URL.Query().Get("recursive") != "" {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("recursive: %w", err))
		return
	}
	err = s.asUser(func() error {
		fi, err := os.Stat(root)
		if err == nil && !fi.IsDir() {
			err = &fs.PathError{Op: "watch", Path: root, Err: errors.New("not a directory")}
		}
		if err == nil {
			// A link to a directory (E2B's /home/user) watches the
			// directory, whose events are named as from the link: the
			// walk that adds the watches does not follow a link.
			root, err = filepath.EvalSymlinks(root)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			writeFSError(w, err)
		} else {
			writeError(w, http.StatusBadRequest, "NOT_A_DIRECTORY", err)
		}
		return
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			err = fmt.Errorf("the kernel's inotify instances are used up (fs.inotify.max_user_instances): %w: %w", errdefs.ErrResourceExhausted, err)
		}
		writeWatchError(w, fmt.Errorf("watch %s: %w", root, err))
		return
	}
	defer fw.Close()
	dw := &dirWatch{s: s, fw: fw, root: root, recursive: recursive, known: map[string]bool{}, watched: map[string]bool{}}
	if err := dw.add(root); err != nil {
		writeWatchError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	out := &frameWriter{w: w, flush: http.NewResponseController(w).Flush}
	if out.frame(frameWatchStart, nil) != nil {
		return
	}
	err = dw.run(r.Context(), func(ev WatchEvent) error {
		b, _ := json.Marshal(ev)
		return out.frame(frameWatchEvent, b)
	})
	if err != nil && r.Context().Err() == nil {
		b, _ := json.Marshal(errorBody{Error: err.Error(), Code: "WATCH_FAILED"})
		_ = out.frame(frameWatchEnd, b)
	}
}

// writeWatchError answers a watch that could not be set up: 429 when a
// limit stopped it, the file system's answer when the directory could not
// be watched (its permissions), 500 otherwise.
func writeWatchError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errdefs.ErrResourceExhausted):
		writeError(w, http.StatusTooManyRequests, "WATCH_FAILED", err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrNotExist):
		writeFSError(w, err)
	default:
		writeError(w, http.StatusInternalServerError, "WATCH_FAILED", err)
	}
}

// dirWatch is the inotify watch of one request. It knows the entries of
// the watched directories, so that an entry created over one (a rename
// onto it: an upload) is reported as a write.
type dirWatch struct {
	s         *Server
	fw        *fsnotify.Watcher
	root      string
	recursive bool
	known     map[string]bool // the entries' paths
	watched   map[string]bool // the directories' paths
}

// add watches dir and, when the watch is recursive, every directory
// below it that the user may read, and learns their entries.
func (dw *dirWatch) add(dir string) error {
	return dw.s.asUser(func() error {
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == dir {
					return fmt.Errorf("watch %s: %w", p, err)
				}
				return nil // gone or unreadable: not watched
			}
			if p != dir {
				dw.known[p] = true
			}
			if !d.IsDir() {
				return nil
			}
			if p != dir && !dw.recursive {
				return filepath.SkipDir
			}
			if len(dw.watched) >= maxWatchDirs {
				return fmt.Errorf("watch %s: more than %d directories: %w", dw.root, maxWatchDirs, errdefs.ErrResourceExhausted)
			}
			if err := dw.fw.Add(p); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					return fmt.Errorf("watch %s: the kernel's inotify watches are used up (fs.inotify.max_user_watches): %w", p, errdefs.ErrResourceExhausted)
				}
				if p == dir {
					return fmt.Errorf("watch %s: %w", p, err)
				}
				return nil
			}
			dw.watched[p] = true
			return nil
		})
	})
}

// run hands the watch's events to emit until ctx is done, emit fails or
// the watch does.
func (dw *dirWatch) run(ctx context.Context, emit func(WatchEvent) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err, ok := <-dw.fw.Errors:
			if !ok {
				return nil
			}
			return fmt.Errorf("watch %s: %w", dw.root, err)
		case ev, ok := <-dw.fw.Events:
			if !ok {
				return nil
			}
			name, err := filepath.Rel(dw.root, ev.Name)
			if err != nil || name == "." || strings.HasPrefix(name, "../") || uploadTemp().MatchString(filepath.Base(name)) {
				continue // the root itself, or an upload's temporary file
			}
			for _, o := range watchOps {
				if !ev.Has(o.op) {
					continue
				}
				op := o.name
				switch o.op {
				case fsnotify.Create:
					if dw.known[ev.Name] {
						op = WatchWrite // created over an entry
					}
					if err := dw.created(ev.Name); err != nil {
						return err
					}
				case fsnotify.Remove, fsnotify.Rename:
					if !dw.known[ev.Name] {
						// A watched directory's own removal or move,
						// after its parent's event of it.
						continue
					}
					dw.forget(ev.Name)
				}
				if err := emit(WatchEvent{Op: op, Name: name}); err != nil {
					return err
				}
			}
		}
	}
}

// created learns entry p, and watches it when it is a directory of a
// recursive watch.
func (dw *dirWatch) created(p string) error {
	dw.known[p] = true
	if !dw.recursive {
		return nil
	}
	var isDir bool
	_ = dw.s.asUser(func() error {
		fi, err := os.Lstat(p)
		isDir = err == nil && fi.IsDir()
		return err
	})
	if !isDir {
		return nil
	}
	return dw.add(p)
}

// forget forgets entry p and, a directory, all below it (inotify has
// dropped the watches of removed directories; those of one renamed away
// are dropped here).
func (dw *dirWatch) forget(p string) {
	below := func(k string) bool { return k == p || strings.HasPrefix(k, p+"/") }
	for k := range dw.watched {
		if below(k) {
			_ = dw.fw.Remove(k) // gone already, when removed
			delete(dw.watched, k)
		}
	}
	for k := range dw.known {
		if below(k) {
			delete(dw.known, k)
		}
	}
}

// DirWatch is a watch of a sandbox's directory (Client.WatchDir).
type DirWatch struct {
	body      io.ReadCloser
	events    chan WatchEvent
	err       error // final once events is closed
	done      chan struct{}
	closeOnce sync.Once
}

// WatchDir watches the directory at path (and every directory below it
// when recursive) and returns once the watch is set up; its Next returns
// the changes. Close it to end the watch.
func (c *Client) WatchDir(ctx context.Context, path string, recursive bool) (*DirWatch, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/watch", url.Values{"path": {path}, "recursive": {strconv.FormatBool(recursive)}}, nil)
	if err != nil {
		return nil, err
	}
	w := &DirWatch{body: resp.Body, events: make(chan WatchEvent, 64), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(w.events)
		var seenStart bool
		w.err = c.readFrames(ctx, resp.Body, "watch", func(kind byte, p []byte) (bool, error) {
			switch kind {
			case frameWatchStart:
				seenStart = true
				started <- nil
			case frameWatchEvent:
				var ev WatchEvent
				if err := json.Unmarshal(p, &ev); err != nil {
					return true, fmt.Errorf("decode watch event: %w", err)
				}
				select {
				case w.events <- ev:
				case <-w.done:
					return true, errors.New("the watch is closed")
				}
			case frameWatchEnd:
				var eb errorBody
				_ = json.Unmarshal(p, &eb)
				return true, fmt.Errorf("%s: %w", eb.Error, errdefs.ErrUnavailable)
			}
			return false, nil
		})
		if !seenStart {
			started <- w.err
		}
	}()
	if err := <-started; err != nil {
		resp.Body.Close()
		return nil, err
	}
	return w, nil
}

// Next returns the next change; an error once the watch has ended (the
// context's error after Close or the context's end).
func (w *DirWatch) Next() (WatchEvent, error) {
	ev, ok := <-w.events
	if !ok {
		return WatchEvent{}, w.err
	}
	return ev, nil
}

// Close ends the watch.
func (w *DirWatch) Close() error {
	w.closeOnce.Do(func() { close(w.done) })
	return w.body.Close()
}
