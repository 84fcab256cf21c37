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
	sbs map[string]*store.Sandbox
}

func (r *reservations) add(sb *store.Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sbs == nil {
		r.sbs = map[string]*store.Sandbox{}
	}
	c := *sb // the store may round its times in place
	r.sbs[sb.ID] = &c
}

func (r *reservations) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sbs, id)
}

func (r *reservations) list() []*store.Sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*store.Sandbox, 0, len(r.sbs))
	for _, sb := range r.sbs {
		out = append(out, sb)
	}
	return out
}

// withReserved adds to the stored records sbs the reserved ones not among
// them.
func withReserved(sbs, reserved []*store.Sandbox) []*store.Sandbox {
	if len(reserved) == 0 {
		return sbs
	}
	stored := make(map[string]bool, len(sbs))
	for _, sb := range sbs {
		stored[sb.ID] = true
	}
	for _, sb := range reserved {
		if !stored[sb.ID] {
			sbs = append(sbs, sb)
		}
	}
	return sbs
}
