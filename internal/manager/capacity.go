package manager

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
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/store"
)

// Host is a machine's cpu and memory, before overcommit.
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

// Suggestions of the manager's resource errors; services that make
// sandboxes for their own records (sessions) may replace them with theirs.
const (
	SuggestFewerSandboxes = "delete sandboxes you no longer need (DELETE /api/v1/sandboxes/{id}), or raise --max-sandboxes"
	SuggestLessResources  = "delete sandboxes you no longer need (DELETE /api/v1/sandboxes/{id}) or ask for less cpu and memory; the operator may raise --cpu-overcommit or --memory-overcommit"
)

// Usage reports what new sandboxes are admitted against: every sandbox
// record (what --max-sandboxes bounds) and the cpu and memory limits of
// the pending, running and paused ones, warm pools' included, against the host's
// capacity times the overcommit ratios. Its session counts are left zero.
func (m *Manager) Usage(ctx context.Context) (api.Usage, error) {
	// The reservations first: one stored in between is then in both lists,
	// and counted once.
	reserved := m.reserved.list()
	sbs, _, err := m.store.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{})
	if err != nil {
		return api.Usage{}, fmt.Errorf("count committed resources: %w", err)
	}
	sbs = withReserved(sbs, reserved)
	u := api.Usage{
		Sandboxes: len(sbs), MaxSandboxes: m.cfg.MaxSandboxes,
		MilliCPUCapacity:    int64(float64(m.cfg.Host.MilliCPU) * m.cfg.CPUOvercommit),
		MemoryBytesCapacity: int64(float64(m.cfg.Host.MemoryBytes) * m.cfg.MemoryOvercommit),
	}
	for _, sb := range sbs {
		if committing(sb) {
			cpu, _ := quantity.ParseCPU(sb.CPU) // records were parsed when made
			mem, _ := quantity.ParseBytes(sb.Memory)
			u.MilliCPU += cpu
			u.MemoryBytes += mem
		}
	}
	return u, nil
}

// committing reports whether sb's limits count against the capacity: it
// is pending, running or paused (which holds its memory: resuming it
// commits nothing new, so a resume is never refused), a warm pool's too
// (taking one from the pool commits nothing new either).
func committing(sb *store.Sandbox) bool {
	switch api.SandboxStatus(sb.Status) {
	case api.StatusPending, api.StatusRunning, api.StatusPaused:
		return true
	}
	return false
}

// admit is the one admission check of every sandbox the manager makes
// (client requests, contexts, sessions, warm pools' refills) and of every
// start of a stopped one: it refuses with 429 RESOURCE_LIMIT when
// MaxSandboxes exist (newRecord set) and with 507 INSUFFICIENT_CAPACITY
// when cpu or memory would pass the capacity. Both errors carry the
// usage and a suggestion. Callers hold m.admitMu until what they admitted
// is counted by Usage (a reserved or stored record, a status of pending),
// so concurrent creates cannot pass the limits together.
func (m *Manager) admit(ctx context.Context, milliCPU, memBytes int64, newRecord bool) error {
	u, err := m.Usage(ctx)
	if err != nil {
		return err
	}
	if newRecord && m.cfg.MaxSandboxes > 0 && u.Sandboxes >= m.cfg.MaxSandboxes {
		return limitError(u)
	}
	if u.MilliCPU+milliCPU > u.MilliCPUCapacity || u.MemoryBytes+memBytes > u.MemoryBytesCapacity {
		err := fmt.Errorf("the sandbox needs %s cpu and %s of memory, and the host has no room for it: %s of %s cpu and %s of %s of memory are committed: %w",
			cpus(milliCPU), mebibytes(memBytes), cpus(u.MilliCPU), cpus(u.MilliCPUCapacity),
			mebibytes(u.MemoryBytes), mebibytes(u.MemoryBytesCapacity), errdefs.ErrResourceExhausted)
		return ResourceError(errdefs.WithCode(err, api.CodeInsufficientCapacity), u, SuggestLessResources)
	}
	return nil
}

func cpus(milli int64) string { return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64) }

func mebibytes(b int64) string { return strconv.FormatInt(b>>20, 10) + "Mi" }

// limitError is the 429 of a create past MaxSandboxes.
func limitError(u api.Usage) error {
	err := fmt.Errorf("%d sandboxes exist, the configured maximum; delete some first: %w", u.Sandboxes, errdefs.ErrResourceExhausted)
	return ResourceError(errdefs.WithCode(err, api.CodeLimitExceeded), u, SuggestFewerSandboxes)
}

// ResourceError gives err the usage and a suggestion, the fields of an
// api.ResourceError body.
func ResourceError(err error, u api.Usage, suggestion string) error {
	return errdefs.WithDetails(err, map[string]any{"usage": u, "suggestion": suggestion})
}

// IsResourceError reports whether err is one of admit's refusals.
func IsResourceError(err error) bool {
	code := errdefs.Code(err)
	return errors.Is(err, errdefs.ErrResourceExhausted) && (code == api.CodeLimitExceeded || code == api.CodeInsufficientCapacity)
}
