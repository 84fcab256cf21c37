package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// The cgroup freezer, written directly rather than through `runc pause`:
// the write and the wait for the kernel to report the cgroup frozen take
// tens of microseconds, where an exec of the runtime binary takes
// milliseconds. Only the cgroup's state changes, which the runtime binary
// reads back itself (`runc state` says paused, `runc delete --force` of a
// paused container thaws it to kill it).

// freezeTimeout bounds the wait for a cgroup to be frozen: a task in an
// uninterruptible sleep (a write to a slow disk) holds it back.
const freezeTimeout = 5 * time.Second

// freezer is the freezer of one cgroup: v1's freezer.state, or cgroup2's
// cgroup.freeze and cgroup.events.
type freezer struct {
	dir string
	v2  bool
}

// hasFreezer reports whether sandboxes' cgroups can be frozen: a v1
// hierarchy holds the freezer controller, or the host is pure cgroup2
// (whose freezer is in every cgroup). A hybrid host without a v1 freezer
// may not put sandboxes into its empty cgroup2 at all.
func (cg *cgroups) hasFreezer() bool {
	v2only := true
	for _, h := range cg.all {
		if !h.v2 && slices.Contains(h.controllers, "freezer") {
			return true
		}
		v2only = v2only && h.v2
	}
	return v2only
}

// freezer returns the freezer of sandbox id's cgroup.
func (cg *cgroups) freezer(id string) freezer {
	dir, v2 := cg.dir("freezer", id)
	return freezer{dir: dir, v2: v2}
}

// frozen reports whether the cgroup is frozen (or being frozen). A cgroup
// that does not exist is not.
func (f freezer) frozen() (bool, error) {
	if f.v2 {
		b, err := os.ReadFile(filepath.Join(f.dir, "cgroup.freeze"))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return strings.TrimSpace(string(b)) == "1", err
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "freezer.state"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return strings.TrimSpace(string(b)) != "THAWED", err
}

// freeze freezes every task of the cgroup and returns once the kernel says
// all are frozen; if they are not within freezeTimeout (or ctx ends first)
// it thaws them again and fails with ErrUnavailable.
func (f freezer) freeze(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	defer cancel()
	wait := 20 * time.Microsecond
	for {
		done, err := f.step()
		if err != nil {
			return errors.Join(fmt.Errorf("freeze cgroup %s: %w", f.dir, err), f.thaw())
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("freeze cgroup %s: not frozen after %s (a task in an uninterruptible sleep?): %w",
				f.dir, freezeTimeout, errdefs.ErrUnavailable), f.thaw())
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Millisecond)
	}
}

// step asks for the cgroup to be frozen and reports whether it is. v1
// wants FROZEN written again while the state is FREEZING (tasks forked
// meanwhile); cgroup2 keeps the request and reports the outcome in
// cgroup.events.
func (f freezer) step() (bool, error) {
	if f.v2 {
		if err := os.WriteFile(filepath.Join(f.dir, "cgroup.freeze"), []byte("1"), 0); err != nil {
			return false, err
		}
		b, err := os.ReadFile(filepath.Join(f.dir, "cgroup.events"))
		if err != nil {
			return false, err
		}
		return slices.Contains(strings.Split(string(b), "\n"), "frozen 1"), nil
	}
	if err := os.WriteFile(filepath.Join(f.dir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		return false, err
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "freezer.state"))
	return strings.TrimSpace(string(b)) == "FROZEN", err
}

// thaw lets the cgroup's tasks run again; thawing a cgroup that is not
// frozen, or does not exist, does nothing.
func (f freezer) thaw() error {
	file, val := "freezer.state", "THAWED"
	if f.v2 {
		file, val = "cgroup.freeze", "0"
	}
	err := os.WriteFile(filepath.Join(f.dir, file), []byte(val), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("thaw cgroup %s: %w", f.dir, err)
	}
	return nil
}
