package manager

import (
	"sync"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// snapshotUses makes the restores from a snapshot and its deletion
// exclusive: a restore reads the snapshot's files, which a deletion
// removes. Any number of restores of one snapshot run at once; a deletion
// waits for none of them but is refused while one runs, and a restore that
// would start while the snapshot is being deleted is refused. Snapshots
// are local files (the oci runtime's), so this daemon's count is all
// there is. The zero value is ready; it is safe for concurrent use.
type snapshotUses struct {
	mu sync.Mutex
	// n is, by snapshot id, the restores reading it, or deleting while it
	// is being deleted; no entry: neither.
	n map[string]int
}

// deleting marks a snapshot being deleted.
const deleting = -1

// use counts one more restore of snapshot id, and returns the func that
// ends it; a snapshot being deleted is 404.
func (u *snapshotUses) use(id string) (done func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n[id] == deleting {
		return nil, beingDeleted(id)
	}
	if u.n == nil {
		u.n = map[string]int{}
	}
	u.n[id]++
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.n[id]--; u.n[id] == 0 {
			delete(u.n, id)
		}
	}, nil
}

// remove marks snapshot id being deleted, and returns the func that ends
// that; a snapshot that restores read is 409, one being deleted 404.
func (u *snapshotUses) remove(id string) (done func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch n := u.n[id]; {
	case n == deleting:
		return nil, beingDeleted(id)
	case n > 0:
		return nil, errdefs.WithCode(errdefs.Precondition("cannot delete snapshot %s: %d sandboxes are being made from it; delete it once they are made", id, n), api.CodeConflict)
	}
	if u.n == nil {
		u.n = map[string]int{}
	}
	u.n[id] = deleting
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.n, id)
	}, nil
}

func beingDeleted(id string) error {
	return errdefs.WithCode(errdefs.NotFound("snapshot %s not found: it is being deleted", id), api.CodeNotFound)
}
