package manager

import (
	"sync"

	"github.com/agent2env/agent2env/internal/store"
)

// reservations are the records of new sandboxes that admission let in and
// the store has not stored yet: Usage counts them, so that admitMu need
// not be held while a record waits for the store's writer.
type reservations struct {
	mu  sync.Mutex
	sbs map[string]store.SandboxLimits
}

func (r *reservations) add(sb *store.Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sbs == nil {
		r.sbs = map[string]store.SandboxLimits{}
	}
	r.sbs[sb.ID] = limitsOf(sb)
}

func (r *reservations) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sbs, id)
}

func (r *reservations) list() []store.SandboxLimits {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]store.SandboxLimits, 0, len(r.sbs))
	for _, l := range r.sbs {
		out = append(out, l)
	}
	return out
}

// limitsOf is what admission counts of sb.
func limitsOf(sb *store.Sandbox) store.SandboxLimits {
	return store.SandboxLimits{ID: sb.ID, Status: sb.Status, CPU: sb.CPU, Memory: sb.Memory}
}

// withReserved adds to the stored sandboxes' limits those of the reserved
// ones not among them.
func withReserved(stored, reserved []store.SandboxLimits) []store.SandboxLimits {
	if len(reserved) == 0 {
		return stored
	}
	seen := make(map[string]bool, len(stored))
	for _, l := range stored {
		seen[l.ID] = true
	}
	for _, l := range reserved {
		if !seen[l.ID] {
			stored = append(stored, l)
		}
	}
	return stored
}
