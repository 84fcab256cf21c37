package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem"
)

// Bounds of the watchers of CreateWatcher.
const (
	// DefaultWatchInterval is how often a watch looks at its directory.
	DefaultWatchInterval = 200 * time.Millisecond
	// watcherIdle ends a watcher whose events nobody asked for this long
	// (a client that went away without RemoveWatcher).
	watcherIdle = 10 * time.Minute
	// maxWatchers bounds the watchers of the daemon, maxWatcherEvents the
	// events one keeps unread.
	maxWatchers      = 1000
	maxWatcherEvents = 10000
	// watchPollTimeout bounds one look at a watched directory.
	watchPollTimeout = 30 * time.Second
)

// pollFunc looks at a watched directory once and returns its changes.
type pollFunc func(ctx context.Context) ([]*filesystem.FilesystemEvent, error)

// watchers keeps the watchers of CreateWatcher, by id: each polls its
// directory from a goroutine of its own and keeps the events until
// GetWatcherEvents takes them. It is safe for concurrent use.
type watchers struct {
	interval, idle time.Duration

	mu sync.Mutex
	m  map[string]*watcher
}

// watcher is one watch of a sandbox's directory.
type watcher struct {
	sandbox string
	stop    context.CancelFunc
	// Guarded by watchers.mu.
	events []*filesystem.FilesystemEvent
	err    error     // why it stopped watching
	read   time.Time // when its events were last taken
}

func newWatchers(interval time.Duration) *watchers {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	return &watchers{interval: interval, idle: watcherIdle, m: make(map[string]*watcher)}
}

// add starts a watcher of sandbox's that polls with poll, and returns its
// id.
func (ws *watchers) add(sandbox string, poll pollFunc) (string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := "w" + hex.EncodeToString(b[:])
	ctx, stop := context.WithCancel(context.Background())
	w := &watcher{sandbox: sandbox, stop: stop, read: time.Now()}
	ws.mu.Lock()
	if len(ws.m) >= maxWatchers {
		ws.mu.Unlock()
		stop()
		return "", connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d directory watchers are open: remove one first", maxWatchers))
	}
	ws.m[id] = w
	ws.mu.Unlock()
	go ws.run(ctx, id, w, poll)
	return id, nil
}

// run polls for w until it is removed, fails or is left idle.
func (ws *watchers) run(ctx context.Context, id string, w *watcher, poll pollFunc) {
	t := time.NewTicker(ws.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, watchPollTimeout)
		events, err := poll(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		ws.mu.Lock()
		done := true
		switch {
		case time.Since(w.read) > ws.idle:
			delete(ws.m, id)
		case err != nil:
			w.err = rpcError(err)
		case len(w.events)+len(events) > maxWatcherEvents:
			w.err = connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("more than %d events were not read: the watcher stopped", maxWatcherEvents))
		default:
			w.events = append(w.events, events...)
			done = false
		}
		ws.mu.Unlock()
		if done {
			w.stop()
			return
		}
	}
}

// get returns watcher id of sandbox; ws.mu is held.
func (ws *watchers) get(sandbox, id string) (*watcher, error) {
	w := ws.m[id]
	if w == nil || w.sandbox != sandbox {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found", id))
	}
	return w, nil
}

// take returns and forgets the events watcher id of sandbox has seen; the
// error that stopped it, once, after its last events.
func (ws *watchers) take(sandbox, id string) ([]*filesystem.FilesystemEvent, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, err := ws.get(sandbox, id)
	if err != nil {
		return nil, err
	}
	w.read = time.Now()
	events := w.events
	w.events = nil
	if len(events) == 0 && w.err != nil {
		delete(ws.m, id)
		return nil, w.err
	}
	if events == nil {
		events = []*filesystem.FilesystemEvent{}
	}
	return events, nil
}

// remove stops and forgets watcher id of sandbox.
func (ws *watchers) remove(sandbox, id string) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, err := ws.get(sandbox, id)
	if err != nil {
		return err
	}
	w.stop()
	delete(ws.m, id)
	return nil
}
