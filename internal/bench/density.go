package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
)

// densityTarget is the density figure: this many idle sandboxes,
// each with a live Python kernel, within densityBudget of memory.
const (
	densityTarget = 2000
	densityBudget = 16 << 30
)

// benchDensity makes n code contexts, each in a sandbox of its own with a
// live Python kernel (print(1) ran in it), and measures what they hold:
// the host's MemAvailable delta per sandbox, the sandboxes' cgroup charge
// and the PSS of their processes, against the PSS of a bare idle python3
// process of the host in the same run. From the per-sandbox delta it
// projects densityTarget sandboxes against densityBudget. It then deletes
// them and counts what stayed behind: mounts, cgroups and processes of the
// deleted sandboxes, and the memory not given back.
func benchDensity(n int) error {
	restore, err := roomForPids(n)
	if err != nil {
		return err
	}
	defer restore()
	_, d, err := startFirst()
	if err != nil {
		return err
	}
	defer d.stop()
	// Untimed: the first context makes the image.
	var c api.Context
	if err := d.post("/api/v1/contexts", api.CreateContextRequest{Language: "python"}, &c); err != nil {
		return err
	}
	if err := d.del("/api/v1/contexts/" + c.ContextID); err != nil {
		return err
	}
	basePss, err := idlePythonPss()
	if err != nil {
		return fmt.Errorf("python baseline: %w", err)
	}
	time.Sleep(time.Second)
	daemonPss := kbField(fmt.Sprintf("/proc/%d/smaps_rollup", d.cmd.Process.Pid), "Pss:")
	before := memAvailable()
	start := time.Now()
	var ctxs []api.Context
	defer func() {
		for _, c := range ctxs { // what an error left
			d.del("/api/v1/contexts/" + c.ContextID)
		}
	}()
	for range n {
		var c api.Context
		if err := d.post("/api/v1/contexts", api.CreateContextRequest{Language: "python"}, &c); err != nil {
			return fmt.Errorf("context %d of %d: %w", len(ctxs)+1, n, err)
		}
		ctxs = append(ctxs, c)
		if err := d.printOne(c.ContextID); err != nil {
			return err
		}
	}
	made := time.Since(start)
	time.Sleep(2 * time.Second)
	after := memAvailable()
	ids := make([]string, len(ctxs))
	var charged, pss int64
	for i, c := range ctxs {
		ids[i] = c.SandboxID
		charged += cgroupMemory(c.SandboxID)
		pss += sandboxPss(c.SandboxID)
	}
	perSandbox := float64(before-after) / float64(n)
	projected := perSandbox * densityTarget
	fmt.Printf("%-34s %d made in %s; per sandbox: host MemAvailable delta %.1f MiB, cgroup charge %.1f MiB, PSS %.1f MiB | idle python3 PSS %.1f MiB | ratio %.1fx | %d would take %.1f GiB: target %d within %d GiB\n",
		"idle sandboxes with a python kernel", n, made.Round(time.Millisecond), perSandbox/(1<<20),
		float64(charged)/float64(n)/(1<<20), float64(pss)/float64(n)/(1<<20), float64(basePss)/(1<<20),
		float64(pss)/float64(n)/float64(basePss), densityTarget, projected/(1<<30), densityTarget, densityBudget>>30)
	densityBreakdown(ids, d.cmd.Process.Pid, daemonPss)

	for len(ctxs) > 0 {
		if err := d.del("/api/v1/contexts/" + ctxs[0].ContextID); err != nil {
			return err
		}
		ctxs = ctxs[1:]
	}
	time.Sleep(2 * time.Second)
	mounts, cgroups, procs := leftBehind(ids)
	fmt.Printf("%-34s mounts %d, cgroups %d, processes %d of the %d deleted sandboxes; MemAvailable %.1f MiB below the start | target 0 leaks\n",
		"  after deleting them", mounts, cgroups, procs, n, float64(before-memAvailable())/(1<<20))
	return nil
}

// pidsPerSandbox is what the bench counts of process ids for an idle
// sandbox with a kernel (its agent's threads and the kernel: 22 measured),
// and pidMaxPath the host's limit of them.
const (
	pidsPerSandbox = 24
	pidMaxPath     = "/proc/sys/kernel/pid_max"
	systemdPidMax  = "4194304"
)

// roomForPids makes sure the host's process ids hold n idle sandboxes
// more than there are threads now: where kernel.pid_max is lower, it sets
// it to systemd's default (4,194,304, what most hosts run with; Linux
// starts at 32,768, which holds about 1,300) and says so, and restore puts
// the old value back. The daemon would refuse the sandboxes past the
// limit with 507 INSUFFICIENT_CAPACITY.
func roomForPids(n int) (restore func(), err error) {
	b, err := os.ReadFile(pidMaxPath)
	if err != nil {
		return nil, err
	}
	old := strings.TrimSpace(string(b))
	pidMax, err := strconv.Atoi(old)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pidMaxPath, err)
	}
	threads, err := hostThreads()
	if err != nil {
		return nil, err
	}
	if need := threads + n*pidsPerSandbox + 1024; need > pidMax {
		if err := os.WriteFile(pidMaxPath, []byte(systemdPidMax), 0); err != nil {
			return nil, fmt.Errorf("%d sandboxes need about %d process ids, kernel.pid_max is %d, and it cannot be raised: %w", n, need, pidMax, err)
		}
		fmt.Printf("kernel.pid_max raised from %s to %s (systemd's default) for this run: %d sandboxes need about %d process ids\n", old, systemdPidMax, n, need)
		return func() { _ = os.WriteFile(pidMaxPath, []byte(old), 0) }, nil
	}
	return func() {}, nil
}

// hostThreads is the count of threads on the host (loadavg's fourth field
// is "runnable/existing").
func hostThreads() (int, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) < 4 {
		return 0, fmt.Errorf("/proc/loadavg: %q", b)
	}
	_, existing, _ := strings.Cut(fields[3], "/")
	return strconv.Atoi(existing)
}

// idlePythonPss is the PSS of an idle python3 of the host.
func idlePythonPss() (int64, error) {
	cmd := exec.Command("python3", "-c", "import sys; sys.stdin.read()")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	time.Sleep(500 * time.Millisecond)
	return kbField(fmt.Sprintf("/proc/%d/smaps_rollup", cmd.Process.Pid), "Pss:"), nil
}

// sandboxPss sums the PSS of the processes in the sandbox's cgroup.
func sandboxPss(id string) int64 {
	procs, _ := sandboxCgroupFile(id, "cgroup.procs", "cgroup.procs")
	var total int64
	for _, pid := range strings.Fields(string(procs)) {
		total += kbField("/proc/"+pid+"/smaps_rollup", "Pss:")
	}
	return total
}

// leftBehind counts the mounts, cgroup directories and processes that
// still name one of the sandboxes ids.
func leftBehind(ids []string) (mounts, cgroups, procs int) {
	info, _ := os.ReadFile("/proc/self/mountinfo")
	for _, id := range ids {
		mounts += strings.Count(string(info), id)
		for _, pattern := range []string{"/sys/fs/cgroup/*/agent2env/*/" + id, "/sys/fs/cgroup/agent2env/*/" + id} {
			paths, _ := filepath.Glob(pattern)
			cgroups += len(paths)
		}
		if b, ok := sandboxCgroupFile(id, "cgroup.procs", "cgroup.procs"); ok {
			procs += len(strings.Fields(string(b)))
		}
	}
	return mounts, cgroups, procs
}
