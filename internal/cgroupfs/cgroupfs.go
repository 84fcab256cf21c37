// Package cgroupfs reads a cgroup's counters (CPU time, memory, pids) from
// the cgroup filesystem, v1 and v2 alike, and finds the calling process's
// own cgroup there — from the host's side (the oci runtime reading a
// sandbox's cgroup) or from inside a container (the agent reading its own).
package cgroupfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// CPU returns the cumulative CPU time, in nanoseconds, of the cgroup at dir
// in the hierarchy that holds the cpuacct controller (v1) or in cgroup2.
func CPU(dir string, v2 bool) (uint64, error) {
	if v2 {
		usec, err := ReadKeyed(filepath.Join(dir, "cpu.stat"), "usage_usec")
		return usec * 1000, err
	}
	return ReadUint(filepath.Join(dir, "cpuacct.usage"))
}

// Memory returns the memory the cgroup at dir uses, page cache included.
func Memory(dir string, v2 bool) (uint64, error) {
	if v2 {
		return ReadUint(filepath.Join(dir, "memory.current"))
	}
	return ReadUint(filepath.Join(dir, "memory.usage_in_bytes"))
}

// Pids returns the number of tasks in the cgroup at dir (v1 and v2 name
// the file alike).
func Pids(dir string) (uint64, error) {
	return ReadUint(filepath.Join(dir, "pids.current"))
}

// ReadUint reads a file holding one unsigned number.
func ReadUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// ReadKeyed reads the value of key from a "key value" per line file.
func ReadKeyed(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}

// Self returns the directory of the calling process's cgroup in the
// hierarchy that holds controller, and whether that hierarchy is cgroup2.
// It reads /proc/self/cgroup and the process's mount table, so it finds
// the cgroup from inside a container too: with a cgroup namespace the
// process sees its cgroup as the hierarchy's root; without one, a v1
// container has its own cgroup bind-mounted at the mount point.
func Self(controller string) (dir string, v2 bool, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, fmt.Errorf("read own cgroup: %w", err)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return "", false, fmt.Errorf("read own cgroup mounts: %w", err)
	}
	return find(string(b), mounts, controller)
}

// find is Self on the contents of /proc/self/cgroup and the cgroup mounts.
func find(procCgroup string, mounts []*mountinfo.Info, controller string) (string, bool, error) {
	var unified string // the cgroup2 path, when there is one
	for _, line := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
		// hierarchy-id:controllers:path; cgroup2's controllers are empty.
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			unified = f[2]
			continue
		}
		if !slices.Contains(strings.Split(f[1], ","), controller) {
			continue
		}
		for _, m := range mounts {
			if m.FSType == "cgroup" && slices.Contains(strings.Split(m.VFSOptions, ","), controller) {
				return under(m, f[2]), false, nil
			}
		}
	}
	if unified != "" {
		for _, m := range mounts {
			if m.FSType == "cgroup2" {
				return under(m, unified), true, nil
			}
		}
	}
	return "", false, fmt.Errorf("no cgroup hierarchy with the %s controller is mounted", controller)
}

// under returns where the cgroup path appears below mount m: m shows the
// hierarchy from m.Root down.
func under(m *mountinfo.Info, path string) string {
	rel, err := filepath.Rel(m.Root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return m.Mountpoint // the cgroup is above what is mounted: a namespace's view
	}
	return filepath.Join(m.Mountpoint, rel)
}

// SelfUsage reads the counters of the calling process's own cgroup.
func SelfUsage() (cpuNanos, memory, pids uint64, err error) {
	read := func(controller string, counter func(dir string, v2 bool) (uint64, error)) (uint64, error) {
		dir, v2, err := Self(controller)
		if err != nil {
			return 0, err
		}
		return counter(dir, v2)
	}
	if cpuNanos, err = read("cpuacct", CPU); err != nil {
		return 0, 0, 0, fmt.Errorf("read cpu time: %w", err)
	}
	if memory, err = read("memory", Memory); err != nil {
		return 0, 0, 0, fmt.Errorf("read memory use: %w", err)
	}
	if pids, err = read("pids", func(dir string, _ bool) (uint64, error) { return Pids(dir) }); err != nil {
		return 0, 0, 0, fmt.Errorf("read pids: %w", err)
	}
	return cpuNanos, memory, pids, nil
}
