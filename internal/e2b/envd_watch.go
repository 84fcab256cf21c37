package e2b

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem"
	"github.com/agent2env/agent2env/internal/service"
)

// Bounds of the watchers of CreateWatcher.
const (
	// watcherIdle ends a watcher whose events nobody asked for this long
	// (a client that went away without RemoveWatcher).
	watcherIdle = 10 * time.Minute
	// maxWatchers bounds the watchers of the daemon, maxWatcherEvents the
	// events one keeps unread.
	maxWatchers      = 1000
	maxWatcherEvents = 10000
)

// watchers keeps the watchers of CreateWatcher, by id: each reads its
// directory watch from a goroutine of its own, which ends with the watch,
// and keeps the events until GetWatcherEvents takes them; a timer, not a
// goroutine, forgets it once idle. It is safe for concurrent use.
type watchers struct {
	idle time.Duration

	mu sync.Mutex
	m  map[string]*watcher
}

// watcher is one watch of a sandbox's directory.
type watcher struct {
	sandbox string
	w       service.DirWatcher
	// Guarded by watchers.mu.
	events []*filesystem.FilesystemEvent
	err    error       // why it stopped watching
	read   time.Time   // when its events were last taken
	idle   *time.Timer // runs expire
}

func newWatchers() *watchers {
	return &watchers{idle: watcherIdle, m: make(map[string]*watcher)}
}

// add keeps watch w of sandbox's, its changes turned into envd's events by
// event, and returns its id. It closes w when it cannot keep it.
func (ws *watchers) add(sandbox string, w service.DirWatcher, event func(service.FileEvent) *filesystem.FilesystemEvent) (string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := "w" + hex.EncodeToString(b[:])
	wt := &watcher{sandbox: sandbox, w: w, read: time.Now()}
	ws.mu.Lock()
	if len(ws.m) >= maxWatchers {
		ws.mu.Unlock()
		w.Close()
		return "", connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d directory watchers are open: remove one first", maxWatchers))
	}
	ws.m[id] = wt
	wt.idle = time.AfterFunc(ws.idle, func() { ws.expire(id, wt) })
	ws.mu.Unlock()
	go ws.run(wt, event)
	return id, nil
}

// run keeps the events of wt until its watch ends (closed, or failed).
func (ws *watchers) run(wt *watcher, event func(service.FileEvent) *filesystem.FilesystemEvent) {
	for {
		ev, err := wt.w.Next()
		var out *filesystem.FilesystemEvent
		if err == nil {
			// Outside ws.mu: it may stat the file in the sandbox, which
			// takes a round trip (or, the sandbox paused, waits for it).
			out = event(ev)
		}
		ws.mu.Lock()
		switch {
		case err != nil:
			wt.err = rpcError(err)
		case len(wt.events) >= maxWatcherEvents:
			err = fmt.Errorf("more than %d events were not read: the watcher stopped", maxWatcherEvents)
			wt.err = connect.NewError(connect.CodeResourceExhausted, err)
		default:
			wt.events = append(wt.events, out)
		}
		ws.mu.Unlock()
		if err != nil {
			wt.w.Close()
			return
		}
	}
}

// expire forgets wt, watcher id, and closes its watch when nobody has
// asked for its events for ws.idle; else it runs again when that will be.
func (ws *watchers) expire(id string, wt *watcher) {
	ws.mu.Lock()
	if ws.m[id] != wt {
		ws.mu.Unlock()
		return
	}
	if left := ws.idle - time.Since(wt.read); left > 0 {
		wt.idle.Reset(left)
		ws.mu.Unlock()
		return
	}
	delete(ws.m, id)
	ws.mu.Unlock()
	wt.w.Close()
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
		w.idle.Stop()
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
	w, err := ws.get(sandbox, id)
	if err == nil {
		delete(ws.m, id)
		w.idle.Stop()
	}
	ws.mu.Unlock()
	if err != nil {
		return err
	}
	return w.w.Close()
}
