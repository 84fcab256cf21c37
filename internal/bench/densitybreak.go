package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// memParts is one part of the sandboxes' memory, summed over them.
type memParts struct {
	procs                          int
	rss, pss, pssAnon, pssFile, us int64
	threads                        int64
}

// add adds the smaps_rollup of pid.
func (m *memParts) add(pid string) {
	rollup := "/proc/" + pid + "/smaps_rollup"
	m.procs++
	m.rss += kbField(rollup, "Rss:")
	m.pss += kbField(rollup, "Pss:")
	m.pssAnon += kbField(rollup, "Pss_Anon:")
	m.pssFile += kbField(rollup, "Pss_File:")
	m.us += kbField(rollup, "Private_Clean:") + kbField(rollup, "Private_Dirty:")
	m.threads += kbField("/proc/"+pid+"/status", "Threads:") >> 10
}

// densityBreakdown prints where n idle sandboxes' memory is, per sandbox:
// each kind of process's RSS, PSS (anonymous and file) and USS, and the
// cgroups' memory.stat (v1: rss, cache, mapped_file, shmem and the kernel
// memory; v2: anon, file, kernel, sock, slab, pagetables) — and the
// daemon's own memory beside the figure it had before the sandboxes.
func densityBreakdown(ids []string, daemonPid int, daemonPssBefore int64) {
	kinds := map[string]*memParts{"agent": {}, "kernel": {}, "other": {}}
	stat := map[string]int64{}
	var kmem int64
	for _, id := range ids {
		procs, _ := sandboxCgroupFile(id, "cgroup.procs", "cgroup.procs")
		for _, pid := range strings.Fields(string(procs)) {
			cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			switch {
			case strings.HasPrefix(string(cmdline), "/.agent2env/"):
				kinds["agent"].add(pid)
			case strings.Contains(strings.Split(string(cmdline), "\x00")[0], "python"):
				kinds["kernel"].add(pid)
			default:
				kinds["other"].add(pid)
			}
		}
		b, _ := sandboxCgroupFile(id, "memory.stat", "memory.stat")
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			stat[k] += n
		}
		b, _ = sandboxCgroupFile(id, "memory.kmem.usage_in_bytes", "memory.kmem.usage_in_bytes")
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		kmem += n
	}
	per := func(v int64) float64 { return float64(v) / float64(len(ids)) / (1 << 20) }
	for _, k := range []string{"agent", "kernel", "other"} {
		m := kinds[k]
		if m.procs == 0 {
			continue
		}
		fmt.Printf("  %-32s %d processes; per sandbox: RSS %.1f MiB, PSS %.1f MiB (anon %.1f, file %.1f), USS %.1f MiB, threads %.1f\n",
			k, m.procs, per(m.rss), per(m.pss), per(m.pssAnon), per(m.pssFile), per(m.us), float64(m.threads)/float64(len(ids)))
	}
	var parts []string
	for _, k := range []string{"rss", "cache", "mapped_file", "shmem", "anon", "file", "kernel", "kernel_stack", "pagetables", "slab", "sock", "percpu"} {
		if v, ok := stat[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, per(v)))
		}
	}
	if kmem > 0 {
		parts = append(parts, fmt.Sprintf("kmem %.2f", per(kmem)))
	}
	fmt.Printf("  %-32s per sandbox, MiB: %s\n", "cgroup memory.stat", strings.Join(parts, ", "))
	rollup := fmt.Sprintf("/proc/%d/smaps_rollup", daemonPid)
	fmt.Printf("  %-32s PSS %.1f MiB, %.1f MiB before the sandboxes: %.2f MiB per sandbox\n",
		"the daemon", float64(kbField(rollup, "Pss:"))/(1<<20), float64(daemonPssBefore)/(1<<20),
		per(kbField(rollup, "Pss:")-daemonPssBefore))
}
