package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Every thread on a machine takes a process id, in the host's namespace
// whatever namespace it runs in, and the kernel has at most kernel.pid_max
// of them (and kernel.threads-max threads); a sandbox's pids limit bounds
// its own share, not what all of them take together. An idle sandbox holds
// about sandboxPids: its agent keeps spare threads (16, so that a sandbox
// whose processes are used up cannot crash it) besides the Go runtime's,
// and a code context holds a kernel. Linux's default pid_max is 32,768 (or
// 1,024 per cpu), which is spent at about 1,300 idle sandboxes; systemd
// raises it to 4,194,304 (systemdPidMax) on 64-bit hosts. Past the limit a
// new process of any sandbox, or of the host, fails to start, and a new
// agent dies at its start. So the runtime refuses a sandbox that would
// leave the host fewer than pidsReserve ids (CheckHost, asked before every
// create and start), and says at its start how many idle sandboxes the
// host's ids allow when that is fewer than fewSandboxes.
const (
	sandboxPids   = 24
	systemdPidMax = 4194304
	fewSandboxes  = 10000
)

// pidsReserve is how many process ids CheckHost leaves to the host and to
// the sandboxes already running: 1/64 of the limit, at least 512.
func pidsReserve(limit int64) int64 {
	return max(512, limit/64)
}

// hostPids is what a host has of process ids: limit is the lower of
// kernel.pid_max and kernel.threads-max, used the threads that exist now.
type hostPids struct {
	pidMax, threadsMax int64
	used               int64
}

func (h hostPids) limit() int64 { return min(h.pidMax, h.threadsMax) }

// room is how many more idle sandboxes the host's process ids allow.
func (h hostPids) room() int64 {
	return max(0, (h.limit()-pidsReserve(h.limit())-h.used)/sandboxPids)
}

// readHostPids reads the limits and the count of threads from procfs
// (mounted at proc: /proc on a host).
func readHostPids(proc string) (hostPids, error) {
	var h hostPids
	var err error
	if h.pidMax, err = readProcInt(filepath.Join(proc, "sys/kernel/pid_max")); err != nil {
		return h, err
	}
	if h.threadsMax, err = readProcInt(filepath.Join(proc, "sys/kernel/threads-max")); err != nil {
		return h, err
	}
	// The fourth field of loadavg is "runnable/existing" threads.
	b, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if err != nil {
		return h, err
	}
	fields := strings.Fields(string(b))
	if len(fields) < 4 {
		return h, fmt.Errorf("%s: %q: no thread count", filepath.Join(proc, "loadavg"), b)
	}
	_, existing, ok := strings.Cut(fields[3], "/")
	if h.used, err = strconv.ParseInt(existing, 10, 64); !ok || err != nil {
		return h, fmt.Errorf("%s: thread count %q", filepath.Join(proc, "loadavg"), fields[3])
	}
	return h, nil
}

func readProcInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// check is CheckHost's answer for h.
func (h hostPids) check() error {
	if h.room() > 0 {
		return nil
	}
	return fmt.Errorf("the host is out of process ids for another sandbox: %d threads exist, the host allows %d (kernel.pid_max %d, kernel.threads-max %d), and an idle sandbox holds about %d; the operator may raise kernel.pid_max (sysctl -w kernel.pid_max=%d, systemd's default): %w",
		h.used, h.limit(), h.pidMax, h.threadsMax, sandboxPids, systemdPidMax, errdefs.ErrResourceExhausted)
}

var _ sandbox.HostChecker = (*Runtime)(nil)

// CheckHost implements sandbox.HostChecker: it refuses a sandbox when the
// host's process ids would run short (see sandboxPids). A host whose
// procfs does not tell is not checked.
func (r *Runtime) CheckHost() error {
	h, err := readHostPids("/proc")
	if err != nil {
		return nil
	}
	return h.check()
}

// logHostPids says, at the runtime's start, how many more idle sandboxes
// the host's process ids allow, when they allow fewer than fewSandboxes.
func (r *Runtime) logHostPids() {
	h, err := readHostPids("/proc")
	if err != nil {
		r.log.Warn("cannot read the host's process id limits; creates are not checked against them", "err", err)
		return
	}
	if room := h.room(); room < fewSandboxes {
		r.log.Warn(fmt.Sprintf("the host's process ids allow about %d more idle sandboxes; past them creates are refused with 507 INSUFFICIENT_CAPACITY. To run more, raise kernel.pid_max (sysctl -w kernel.pid_max=%d, systemd's default)", room, systemdPidMax),
			"pid_max", h.pidMax, "threads_max", h.threadsMax, "threads", h.used)
	}
}
