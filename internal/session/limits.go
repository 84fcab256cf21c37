package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/store"
)

// Host is the machine's cpu and memory, before overcommit.
type Host struct {
	MilliCPU    int64
	MemoryBytes int64
}

// ReadHost returns this machine's cpus and memory (MemTotal).
func ReadHost() Host {
	h := Host{MilliCPU: int64(runtime.NumCPU()) * 1000}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				h.MemoryBytes = kb << 10
			}
		}
	}
	return h
}

// committed is what sandboxes' limits add up to.
type committed struct {
	sandboxes        int
	milliCPU, memory int64
	running          []string // ids of the running sandboxes
}

// commitments adds up the limits of the sandboxes clients and services
// asked for that are pending or running (warm pools' are not counted:
// taking one commits nothing new).
func (s *Service) commitments(ctx context.Context) (committed, error) {
	sbs, _, err := s.store.ListSandboxPage(ctx, store.SandboxFilter{ExcludePooled: true}, store.Page{})
	if err != nil {
		return committed{}, err
	}
	var c committed
	for _, sb := range sbs {
		c.sandboxes++
		if sb.Status != string(api.StatusPending) && sb.Status != string(api.StatusRunning) {
			continue
		}
		cpu, _ := quantity.ParseCPU(sb.CPU) // stored records were parsed when made
		mem, _ := quantity.ParseBytes(sb.Memory)
		c.milliCPU += cpu
		c.memory += mem
		if sb.Status == string(api.StatusRunning) {
			c.running = append(c.running, sb.ID)
		}
	}
	return c, nil
}

// usage reports the load for a resource error, with c already counted.
func (s *Service) usage(ctx context.Context, c committed) api.Usage {
	u := api.Usage{
		Sandboxes: c.sandboxes, MaxSandboxes: s.cfg.MaxSandboxes,
		MilliCPU: c.milliCPU, MilliCPUCapacity: int64(float64(s.host.MilliCPU) * s.cfg.CPUOvercommit),
		MemoryBytes: c.memory, MemoryBytesCapacity: int64(float64(s.host.MemoryBytes) * s.cfg.MemoryOvercommit),
	}
	if n, err := s.store.CountSessions(ctx); err == nil {
		u.Sessions = n
	}
	s.mu.Lock()
	busy := len(s.active)
	s.mu.Unlock()
	u.IdleSessions = max(u.Sessions-busy, 0)
	return u
}

// resourceError gives err the usage and a suggestion (api.ResourceError).
func resourceError(err error, u api.Usage, suggestion string) error {
	return errdefs.WithDetails(err, map[string]any{"usage": u, "suggestion": suggestion})
}

// provision makes the sandbox of a new session, unless the host's
// capacity would be exceeded (507 INSUFFICIENT_CAPACITY) or the manager's
// maximum of sandboxes is reached (429 RESOURCE_LIMIT): then nothing is
// made and the error carries the usage and a suggestion.
func (s *Service) provision(ctx context.Context, sess *store.Session, lang string) (contexts.Warm, error) {
	if lang == "" {
		lang = api.LanguagePython
	}
	mounts, err := s.mounts(sess)
	if err != nil {
		return contexts.Warm{}, err
	}
	req := contexts.SandboxRequest{Language: lang, Template: sess.Template, ManagedBy: ManagedBy, Mounts: mounts}
	if !sameCPU(sess.CPU, s.cfg.PoolCPU) || !sameBytes(sess.Memory, s.cfg.PoolMemory) {
		req.CPU, req.Memory = sess.CPU, sess.Memory
	}
	cpu, _ := quantity.ParseCPU(sess.CPU) // flavors are checked at start
	mem, _ := quantity.ParseBytes(sess.Memory)
	release, err := s.reserve(ctx, sess, cpu, mem)
	if err != nil {
		return contexts.Warm{}, err
	}
	w, err := s.ctxs.Provision(ctx, req)
	release()
	if errors.Is(err, errdefs.ErrResourceExhausted) && errdefs.Code(err) == api.CodeLimitExceeded {
		c, cerr := s.commitments(ctx)
		if cerr != nil {
			return contexts.Warm{}, err
		}
		return contexts.Warm{}, resourceError(err, s.usage(ctx, c),
			"delete idle sessions (DELETE /api/v1/sessions/{id}) or sandboxes, or raise --max-sandboxes")
	}
	return w, err
}

// reserve counts a new sandbox's limits against the host's capacity until
// release is called (by then its record counts them).
func (s *Service) reserve(ctx context.Context, sess *store.Session, cpu, mem int64) (release func(), err error) {
	s.capacity.Lock()
	defer s.capacity.Unlock()
	c, err := s.commitments(ctx)
	if err != nil {
		return nil, fmt.Errorf("count committed resources: %w", err)
	}
	c.milliCPU += s.reserved.milliCPU
	c.memory += s.reserved.memory
	u := s.usage(ctx, c)
	if c.milliCPU+cpu > u.MilliCPUCapacity || c.memory+mem > u.MemoryBytesCapacity {
		suggestion := "delete idle sessions (DELETE /api/v1/sessions/{id}) or sandboxes"
		if sess.Flavor != api.FlavorSmall {
			suggestion = "use flavor small, or " + suggestion
		}
		err := fmt.Errorf("session %s needs %s cpu and %s memory (flavor %s), and the host has no room: %dm of %dm cpu and %d of %d bytes of memory are committed: %w",
			sess.ID, sess.CPU, sess.Memory, sess.Flavor, c.milliCPU, u.MilliCPUCapacity, c.memory, u.MemoryBytesCapacity, errdefs.ErrResourceExhausted)
		return nil, resourceError(errdefs.WithCode(err, api.CodeInsufficientCapacity), u, suggestion)
	}
	s.reserved.milliCPU += cpu
	s.reserved.memory += mem
	return func() {
		s.capacity.Lock()
		defer s.capacity.Unlock()
		s.reserved.milliCPU -= cpu
		s.reserved.memory -= mem
	}, nil
}

func sameCPU(a, b string) bool {
	x, err1 := quantity.ParseCPU(a)
	y, err2 := quantity.ParseCPU(b)
	return err1 == nil && err2 == nil && x == y
}

func sameBytes(a, b string) bool {
	x, err1 := quantity.ParseBytes(a)
	y, err2 := quantity.ParseBytes(b)
	return err1 == nil && err2 == nil && x == y
}
