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

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/sandbox"
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
	SuggestHostRoom       = "delete sandboxes you no longer need (DELETE /api/v1/sandboxes/{id}); the operator may give the host more of what it lacks (the message says what)"
)

// Usage reports what new sandboxes are admitted against: every sandbox
// record (what --max-sandboxes bounds) and the cpu and memory limits of
// the pending, running and paused ones, warm pools' included, against the host's
// capacity times the overcommit ratios. Its session counts are left zero.
func (m *Manager) Usage(ctx context.Context) (api.Usage, error) {
	// The reservations first: one stored in between is then in both lists,
	// and counted once.
	reserved := m.reserved.list()
	stored, err := m.store.ListSandboxLimits(ctx)
	if err != nil {
		return api.Usage{}, fmt.Errorf("count committed resources: %w", err)
	}
	all := withReserved(stored, reserved)
	u := m.capacity()
	u.Sandboxes = len(all)
	for _, l := range all {
		if committing(l.Status) {
			cpu, _ := quantity.ParseCPU(l.CPU) // records were parsed when made
			mem, _ := quantity.ParseBytes(l.Memory)
			u.MilliCPU += cpu
			u.MemoryBytes += mem
		}
	}
	return u, nil
}

// capacity is a Usage with nothing committed: the host's capacity times
// the overcommit ratios, and MaxSandboxes.
func (m *Manager) capacity() api.Usage {
	return api.Usage{
		MaxSandboxes:        m.cfg.MaxSandboxes,
		MilliCPUCapacity:    int64(float64(m.cfg.Host.MilliCPU) * m.cfg.CPUOvercommit),
		MemoryBytesCapacity: int64(float64(m.cfg.Host.MemoryBytes) * m.cfg.MemoryOvercommit),
	}
}

// committing reports whether the limits of a sandbox of this status count
// against the capacity: it is pending, running or paused (which holds its
// memory: resuming it commits nothing new, so a resume is never refused),
// a warm pool's too (taking one from the pool commits nothing new either).
func committing(status string) bool {
	switch api.SandboxStatus(status) {
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
// so concurrent creates cannot pass the limits together. arrived is
// m.usageReads as the caller found it before it took admitMu (see
// usageBound).
func (m *Manager) admit(ctx context.Context, arrived uint64, milliCPU, memBytes int64, newRecord bool) error {
	if err := m.checkHost(ctx); err != nil {
		return err
	}
	if b := &m.bound; b.gen > arrived && m.refusal(b.u, milliCPU, memBytes, newRecord) == nil {
		b.add(milliCPU, memBytes, newRecord)
		return nil
	}
	gen := m.usageReads.Add(1)
	u, err := m.Usage(ctx)
	if err != nil {
		m.bound = usageBound{}
		return err
	}
	m.bound = usageBound{u: u, gen: gen}
	if err := m.refusal(u, milliCPU, memBytes, newRecord); err != nil {
		return err
	}
	m.bound.add(milliCPU, memBytes, newRecord)
	return nil
}

// checkHost is admit's check of what the host has left that no sandbox's
// limits count: the free space of Config.DiskDir (checkDisk: 507
// NO_SPACE) and what the runtime's host checks (sandbox.HostChecker; the
// oci runtime's process ids: 507 INSUFFICIENT_CAPACITY), each refusal with
// the usage and a suggestion, as admit's others.
func (m *Manager) checkHost(ctx context.Context) error {
	err, code := m.checkDisk(), api.CodeNoSpace
	if hc, ok := m.rt.(sandbox.HostChecker); ok && err == nil {
		err, code = hc.CheckHost(), api.CodeInsufficientCapacity
	}
	if err == nil {
		return nil
	}
	return m.hostRefusal(ctx, err, code)
}

// hostRefusal is err, a refusal for want of what the host has left, with
// wire code code, the usage and a suggestion.
func (m *Manager) hostRefusal(ctx context.Context, err error, code string) error {
	u, uerr := m.Usage(ctx)
	if uerr != nil {
		return errors.Join(err, uerr)
	}
	return ResourceError(errdefs.WithCode(err, code), u, SuggestHostRoom)
}

// checkDisk refuses a sandbox while the file system of Config.DiskDir has
// fewer than Config.DiskReserve bytes free. Sandbox disks are sparse
// files, thin-provisioned: they take room only as their sandboxes write,
// so admission does not add up their sizes (which would cost density),
// and a full file system fails every sandbox's writes at once, with I/O
// errors inside the sandboxes and the store's writes refused. The reserve
// keeps new sandboxes off a file system that is nearly full. A file
// system that cannot be asked is not checked. A runtime that allocates
// each disk whole (the oci runtime's thick disks) checks the disk's size
// itself, with the reserve left free, where it knows the size (the
// default's, a snapshot's) and its allocations are serialized against
// each other; it refuses with errdefs.NoSpace, which launch and restores
// answer as a refusal, with nothing made.
func (m *Manager) checkDisk() error {
	if m.cfg.DiskDir == "" || m.cfg.DiskReserve <= 0 {
		return nil
	}
	free, err := m.freeSpace(m.cfg.DiskDir)
	if err != nil || free >= m.cfg.DiskReserve {
		return nil
	}
	return fmt.Errorf("the host is short of disk space for another sandbox: the file system of %s, which holds the sandboxes' disks, has %s free, less than the %s kept free for them to grow into (--disk-reserve); the operator may free space there: %w",
		m.cfg.DiskDir, quantity.Mebibytes(free), quantity.Mebibytes(m.cfg.DiskReserve), errdefs.ErrResourceExhausted)
}

// freeSpace is Manager.freeSpace's statfs.
func freeSpace(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// refusal is admit's error for a sandbox of milliCPU and memBytes (a new
// record when newRecord is set) against usage u, or nil when it fits.
func (m *Manager) refusal(u api.Usage, milliCPU, memBytes int64, newRecord bool) error {
	if newRecord && m.cfg.MaxSandboxes > 0 && u.Sandboxes >= m.cfg.MaxSandboxes {
		return limitError(u)
	}
	if u.MilliCPU+milliCPU > u.MilliCPUCapacity || u.MemoryBytes+memBytes > u.MemoryBytesCapacity {
		err := fmt.Errorf("the sandbox needs %s cpu and %s of memory, and the host has no room for it: %s of %s cpu and %s of %s of memory are committed: %w",
			cpus(milliCPU), quantity.Mebibytes(memBytes), cpus(u.MilliCPU), cpus(u.MilliCPUCapacity),
			quantity.Mebibytes(u.MemoryBytes), quantity.Mebibytes(u.MemoryBytesCapacity), errdefs.ErrResourceExhausted)
		return ResourceError(errdefs.WithCode(err, api.CodeInsufficientCapacity), u, SuggestLessResources)
	}
	return nil
}

// usageBound is an upper bound of Usage that admission keeps between its
// reads of the store: the last read plus what admit let in since. Without
// it every create of a burst read all the records while holding admitMu,
// one create after another, behind the burst's other reads of the store
// (docs/PERFORMANCE.md, "one read of the records per burst"). A caller
// reuses the bound only when its read began after the caller arrived
// (gen > arrived): the store as of a moment during the caller's own
// request, as when it read it itself. Every increase of what Usage counts
// goes through admit under admitMu and is added to the bound; what was
// deleted or stopped since only leaves the bound above the truth, and a
// sandbox the bound would refuse is refused only after a read of its own.
type usageBound struct {
	u   api.Usage
	gen uint64 // the read's number in m.usageReads; 0: no read
}

// add counts a sandbox admit let in.
func (b *usageBound) add(milliCPU, memBytes int64, newRecord bool) {
	if newRecord {
		b.u.Sandboxes++
	}
	b.u.MilliCPU += milliCPU
	b.u.MemoryBytes += memBytes
}

func cpus(milli int64) string { return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64) }

// limitError is the 429 of a create past MaxSandboxes.
func limitError(u api.Usage) error {
	err := fmt.Errorf("%d sandboxes exist, stopped and failed ones included, and the maximum is %d (--max-sandboxes); delete some first: %w",
		u.Sandboxes, u.MaxSandboxes, errdefs.ErrResourceExhausted)
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
