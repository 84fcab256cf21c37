package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/moby/sys/mountinfo"
)

// Status reports on one sandbox.
func (r *Runtime) Status(ctx context.Context, id string) (sandbox.Status, error) {
	m, err := r.readMeta(id)
	if err != nil {
		return sandbox.Status{}, fmt.Errorf("sandbox status %s: %w", id, err)
	}
	return r.status(m), nil
}

func (r *Runtime) status(m *meta) sandbox.Status {
	st := sandbox.Status{ID: m.ID, State: sandbox.StateCreated, CreatedAt: m.CreatedAt, Labels: m.Labels}
	pid, started := r.agentState(r.dir(m.ID))
	switch {
	case pid > 0:
		st.State, st.Pid = sandbox.StateRunning, pid
		// An unreadable freezer is logged, not reported: a state other
		// than running or paused would have the manager fail the sandbox.
		if frozen, err := r.cgroups.freezer(m.ID).frozen(); err != nil {
			r.log.Warn("read the freezer state of a sandbox", "sandbox", m.ID, "err", err)
		} else if frozen {
			st.State = sandbox.StatePaused
		}
	case started:
		st.State = sandbox.StateStopped
	}
	return st
}

// List reports on every complete sandbox, ordered by id.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Status, error) {
	ids, err := r.ids()
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	out := make([]sandbox.Status, 0, len(ids))
	for _, id := range ids {
		m, err := r.readMeta(id)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // being created or deleted
		}
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		out = append(out, r.status(m))
	}
	return out, nil
}

// ids returns the names of the sandbox dirs in Root, complete or not.
func (r *Runtime) ids() ([]string, error) {
	ents, err := os.ReadDir(r.cfg.Root)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && validID.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Agent returns the client of the sandbox's agent. There is one per
// sandbox; Delete closes it.
func (r *Runtime) Agent(ctx context.Context, id string) (*agent.Client, error) {
	if _, err := r.readMeta(id); err != nil {
		return nil, fmt.Errorf("sandbox agent %s: %w", id, err)
	}
	return r.client(id), nil
}

func (r *Runtime) client(id string) *agent.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.clients[id]
	if c == nil {
		c = agent.NewClient(r.gateLocked(id).dialer(agent.UnixDialer(filepath.Join(r.dir(id), fileSock))), "")
		r.clients[id] = c
	}
	return c
}

// gate returns the dialGate of sandbox id's agent client.
func (r *Runtime) gate(id string) *dialGate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gateLocked(id)
}

// gateLocked is gate for a caller holding r.mu.
func (r *Runtime) gateLocked(id string) *dialGate {
	g := r.gates[id]
	if g == nil {
		g = &dialGate{}
		r.gates[id] = g
	}
	return g
}

func (r *Runtime) cachedClient(id string) *agent.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clients[id]
}

// Usage reads the sandbox's cgroup counters and the use of its disk. A
// sandbox that is not running uses no CPU, memory or pids.
func (r *Runtime) Usage(ctx context.Context, id string) (sandbox.Usage, error) {
	if _, err := r.readMeta(id); err != nil {
		return sandbox.Usage{}, fmt.Errorf("sandbox usage %s: %w", id, err)
	}
	var u sandbox.Usage
	if pid, _ := r.agentState(r.dir(id)); pid > 0 {
		var err error
		if u.CPUNanos, u.MemoryBytes, u.Pids, err = r.cgroups.usage(id); err != nil {
			return sandbox.Usage{}, fmt.Errorf("sandbox usage %s: %w", id, err)
		}
	}
	disk := filepath.Join(r.dir(id), dirDisk)
	if ok, _ := isMountpoint(disk); ok {
		var err error
		if u.DiskBytes, err = diskUsage(disk); err != nil {
			return sandbox.Usage{}, fmt.Errorf("sandbox usage %s: %w", id, err)
		}
	}
	return u, nil
}

// Recover re-adopts the sandboxes a previous daemon left and cleans up the
// rest: sandbox dirs that never became complete, containers, mounts and
// cgroups of sandboxes that no longer exist. Running sandboxes keep running
// with their mounts, paused ones stay paused; the others are reported
// stopped (or created) and are mounted again by Start.
func (r *Runtime) Recover(ctx context.Context) ([]sandbox.Status, error) {
	ids, err := r.ids()
	if err != nil {
		return nil, fmt.Errorf("recover sandboxes: %w", err)
	}
	var out []sandbox.Status
	var errs []error
	var half []string
	live := map[string]bool{}
	for _, id := range ids {
		m, err := r.readMeta(id)
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			half = append(half, id)
		case err != nil:
			live[id] = true // keep what cannot be read
			errs = append(errs, fmt.Errorf("recover sandbox %s: %w", id, err))
		default:
			live[id] = true
			st := r.status(m)
			out = append(out, st)
			// A running sandbox's egress proxy went with the old daemon. A
			// sandbox left without one is cut off, not a reason to fail
			// the daemon's start.
			alive := st.State == sandbox.StateRunning || st.State == sandbox.StatePaused
			if alive && m.Egress != nil {
				if r.cfg.Egress == nil {
					r.log.Error("sandbox needs network egress, which this runtime is not configured for", "sandbox", id)
				} else if err := r.serveEgress(id, m.Egress); err != nil {
					r.log.Error("serve egress proxy of recovered sandbox", "sandbox", id, "err", err)
				}
			}
			if alive && m.Services && r.cfg.Services != nil {
				if err := r.serveServices(id); err != nil {
					r.log.Error("serve daemon services to recovered sandbox", "sandbox", id, "err", err)
				}
			}
		}
	}
	// Strays include the containers, mounts and cgroups of half-made
	// sandboxes, so their dirs are plain files and directories after this.
	if err := r.removeStrays(ctx, live); err != nil {
		errs = append(errs, err)
	}
	for _, id := range half {
		r.log.Info("removing half-made sandbox", "sandbox", id)
		if err := r.destroy(ctx, id, false); err != nil {
			errs = append(errs, fmt.Errorf("remove half-made sandbox %s: %w", id, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("recover sandboxes: %w", err)
	}
	return out, nil
}

// removeStrays removes the containers, mounts and cgroups of sandboxes not
// in live. Only containers of our runtime root, mounts under Root and
// cgroups under /agent2env/<root hash> are looked at.
func (r *Runtime) removeStrays(ctx context.Context, live map[string]bool) error {
	var errs []error
	containers, err := r.oci.list(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range containers {
		if !live[id] {
			r.log.Info("removing stray container", "sandbox", id)
			errs = append(errs, r.oci.delete(ctx, id))
		}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(r.cfg.Root))
	if err != nil {
		errs = append(errs, fmt.Errorf("read mountinfo: %w", err))
	}
	var stray []string
	for _, m := range mounts {
		rel, ok := strings.CutPrefix(m.Mountpoint, r.cfg.Root+"/")
		if id, _, _ := strings.Cut(rel, "/"); ok && !live[id] {
			stray = append(stray, m.Mountpoint)
		}
	}
	// Deepest first, each once (a path can be mounted over several times).
	slices.SortFunc(stray, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	for _, p := range slices.Compact(stray) {
		r.log.Info("removing stray mount", "path", p)
		errs = append(errs, unmount(p))
	}
	for _, id := range r.cgroups.ids() {
		if !live[id] {
			r.log.Info("removing stray cgroup", "sandbox", id)
			errs = append(errs, r.cgroups.remove(id))
		}
	}
	return errors.Join(errs...)
}
