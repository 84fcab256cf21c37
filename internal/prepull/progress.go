package prepull

import (
	"sync"

	"github.com/agent2env/agent2env/internal/image"
)

// tracker turns the image store's progress events into a task's progress:
// layers unpacked (ready) of layers seen (total). The store reports only
// the layers it has to fetch, as it starts each one, so total grows while
// the pull runs; layers already stored count neither way. A build counts
// as one unit, ready once the image is stored.
//
// The zero value is ready to use; it is safe for concurrent use.
type tracker struct {
	mu       sync.Mutex
	started  bool
	building bool
	done     bool
	layers   map[string]bool // layer item → unpacked
	last     [2]int          // the progress last reported as changed
}

// observe takes one event and reports whether the task's visible state
// (started, ready, total) changed.
func (t *tracker) observe(ev image.Progress) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch ev.Phase {
	case image.PhaseBuild:
		t.building = true
	case image.PhaseDownload, image.PhaseUnpack:
		if t.building || ev.Item == "" {
			// A build unpacks its one layer too; it is still the build.
			break
		}
		if t.layers == nil {
			t.layers = map[string]bool{}
		}
		// An unpack reads the whole blob, so it is over once Current
		// reaches a known Total.
		t.layers[ev.Item] = t.layers[ev.Item] || (ev.Phase == image.PhaseUnpack && ev.Total > 0 && ev.Current >= ev.Total)
	case image.PhaseDone:
		t.done = true
	}
	first := !t.started
	t.started = true
	ready, total := t.progressLocked()
	changed := first || [2]int{ready, total} != t.last
	t.last = [2]int{ready, total}
	return changed
}

// progress returns the current ready and total.
func (t *tracker) progress() (ready, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.progressLocked()
}

func (t *tracker) progressLocked() (ready, total int) {
	if t.building {
		if t.done {
			return 1, 1
		}
		return 0, 1
	}
	if t.done {
		return len(t.layers), len(t.layers)
	}
	for _, ok := range t.layers {
		if ok {
			ready++
		}
	}
	return ready, len(t.layers)
}

// completed returns the progress of a completed task: everything ready,
// and at least one unit even when nothing had to be fetched (the image was
// stored already).
func (t *tracker) completed() (ready, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 1
	if !t.building && len(t.layers) > 1 {
		n = len(t.layers)
	}
	return n, n
}
