package oci

import (
	"context"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Pause freezes every process of the sandbox with its cgroup's freezer
// (freezer.go) and returns once all are frozen.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if err := r.pausable(id, "pause"); err != nil {
		return err
	}
	start := time.Now()
	if err := r.cgroups.freezer(id).freeze(ctx); err != nil {
		return fmt.Errorf("pause sandbox %s: %w", id, err)
	}
	r.log.Debug("sandbox paused", "sandbox", id, "took", time.Since(start))
	return nil
}

// Resume thaws the sandbox's cgroup.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if err := r.pausable(id, "resume"); err != nil {
		return err
	}
	if err := r.cgroups.freezer(id).thaw(); err != nil {
		return fmt.Errorf("resume sandbox %s: %w", id, err)
	}
	return nil
}

// pausable checks that sandbox id exists and its agent runs (frozen or
// not), and that the host has a freezer.
func (r *Runtime) pausable(id, op string) error {
	if !r.canPause {
		return fmt.Errorf("%s sandbox %s: the host mounts no cgroup freezer: %w", op, id, errdefs.ErrNotImplemented)
	}
	if _, err := r.readMeta(id); err != nil {
		return fmt.Errorf("%s sandbox %s: %w", op, id, err)
	}
	if pid, _ := r.agentState(r.dir(id)); pid == 0 {
		return errdefs.Precondition("%s sandbox %s: it is not running", op, id)
	}
	return nil
}
