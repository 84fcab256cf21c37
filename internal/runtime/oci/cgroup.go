package oci

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/agent2env/agent2env/internal/cgroupfs"
	"golang.org/x/sys/unix"
)

// cgroupParent returns the cgroup, in every hierarchy, under which the
// runtime with state in root makes its sandboxes' cgroups:
// agent2env/<first 8 hex digits of sha256(root)>. Each root has its own, so
// that two daemons (or a daemon and tests) on one host never take each
// other's sandboxes for strays. runtimetest.AssertNoLeaks computes it too.
func cgroupParent(root string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(root)))
	return "agent2env/" + hex.EncodeToString(sum[:4])
}

// hierarchy is one mounted cgroup hierarchy.
type hierarchy struct {
	dir         string   // mount point
	v2          bool     // cgroup2 (unified)
	controllers []string // v1: the controllers (and name=) it holds
}

// cgroups is the host's cgroup layout: pure v1, hybrid (v1 controllers
// plus an empty cgroup2) or pure v2, and the runtime's parent cgroup in it.
// It is read once and never changes.
type cgroups struct {
	all    []hierarchy
	parent string // cgroupParent
}

// cgroupMounts selects the cgroup file systems of mountinfo.
var cgroupMounts = mountinfo.FSTypeFilter("cgroup", "cgroup2")

// readCgroups finds the mounted cgroup hierarchies in mountinfo.
func readCgroups(parent string) (*cgroups, error) {
	mounts, err := mountinfo.GetMounts(cgroupMounts)
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return cgroupsOf(parent, mounts)
}

// cgroupsOf returns the layout of the cgroup mounts.
func cgroupsOf(parent string, mounts []*mountinfo.Info) (*cgroups, error) {
	cg := &cgroups{parent: parent}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			if slices.ContainsFunc(cg.all, func(h hierarchy) bool { return h.v2 }) {
				continue // mounted again elsewhere (CRIU's cgyard): the first is the host's
			}
			cg.all = append(cg.all, hierarchy{dir: m.Mountpoint, v2: true})
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(m.VFSOptions, ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") || strings.HasPrefix(o, "name=") {
					ctrls = append(ctrls, o)
				}
			}
			if slices.ContainsFunc(cg.all, func(h hierarchy) bool { return !h.v2 && sameSet(h.controllers, ctrls) }) {
				continue
			}
			cg.all = append(cg.all, hierarchy{dir: m.Mountpoint, controllers: ctrls})
		}
	}
	if len(cg.all) == 0 {
		return nil, errors.New("no cgroup file system is mounted")
	}
	return cg, nil
}

// root returns the hierarchy that holds controller: its v1 hierarchy when
// there is one, else cgroup2.
func (cg *cgroups) root(controller string) (dir string, v2 bool) {
	for _, h := range cg.all {
		if h.v2 {
			dir, v2 = h.dir, true
		} else if slices.Contains(h.controllers, controller) {
			return h.dir, false
		}
	}
	return dir, v2
}

// path returns the cgroupsPath of sandbox id in its bundle.
func (cg *cgroups) path(id string) string { return "/" + cg.parent + "/" + id }

// dir returns the directory of sandbox id's cgroup in the hierarchy that
// holds controller.
func (cg *cgroups) dir(controller, id string) (dir string, v2 bool) {
	root, v2 := cg.root(controller)
	return filepath.Join(root, cg.parent, id), v2
}

// swapLimitable reports whether a memory+swap limit can be set. On v1 the
// memsw files exist only with swap accounting, and runc fails a container
// whose limit it cannot write. On v2 it always can: crun and runc leave a
// swap limit of 0 unwritten where memory.swap.max does not exist (no swap
// accounting). Looking for that file would not do: it is in non-root
// cgroups only, and only in those whose parent enables the memory
// controller, so on a host whose root cgroup has no such child yet (the
// runtime binary enables it for the sandboxes' own cgroups) the sandboxes
// would get no swap limit, and a memory limit that swap gets round.
func (cg *cgroups) swapLimitable() bool {
	root, v2 := cg.root("memory")
	if v2 {
		return true
	}
	_, err := os.Stat(filepath.Join(root, "memory.memsw.limit_in_bytes"))
	return err == nil
}

// usage reads the cgroup counters of sandbox id.
func (cg *cgroups) usage(id string) (cpuNanos, memory, pids uint64, err error) {
	if cpuNanos, err = cgroupfs.CPU(cg.dir("cpuacct", id)); err != nil {
		return 0, 0, 0, err
	}
	if memory, err = cgroupfs.Memory(cg.dir("memory", id)); err != nil {
		return 0, 0, 0, err
	}
	dir, _ := cg.dir("pids", id)
	if pids, err = cgroupfs.Pids(dir); err != nil {
		return 0, 0, 0, err
	}
	return cpuNanos, memory, pids, nil
}

// ids returns the names of the runtime's sandbox cgroups found in any
// hierarchy.
func (cg *cgroups) ids() []string {
	var out []string
	for _, h := range cg.all {
		ents, _ := os.ReadDir(filepath.Join(h.dir, cg.parent))
		for _, e := range ents {
			if e.IsDir() && !slices.Contains(out, e.Name()) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// warmAttach moves the daemon into the cgroup it is already in, which
// changes nothing but costs what the runtime binary's first move of a
// sandbox into its cgroups costs: the kernel's cgroup_threadgroup_rwsem
// makes the first writer after a quiet spell wait one RCU grace period
// (6-20 ms measured), and writers within about a grace period after that
// wait for nothing. Create calls it as it begins and Start as it runs the
// runtime binary, so that the disk, the mounts and the binary's own
// start-up (about 10 ms for runc, 1 ms for crun) cover the wait. On a
// kernel whose cgroups favour dynamic changes (favordynmods) nobody waits;
// a failure only loses the overlap.
func (cg *cgroups) warmAttach() {
	procs := cg.ownProcs()
	if procs == "" {
		return
	}
	f, err := os.OpenFile(procs, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(strconv.Itoa(os.Getpid()))
}

// ownProcs returns the cgroup.procs file of the daemon's own cgroup in the
// first hierarchy /proc/self/cgroup names, or "". It is read each time, so
// that a daemon moved meanwhile is not moved back.
func (cg *cgroups) ownProcs() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-id:controllers:path; cgroup2's controllers are empty.
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		ctrls := strings.Split(f[1], ",")
		for _, h := range cg.all {
			if h.v2 && f[1] == "" || !h.v2 && f[1] != "" && sameSet(ctrls, h.controllers) {
				return filepath.Join(h.dir, f[2], "cgroup.procs")
			}
		}
	}
	return ""
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// remove removes sandbox id's cgroup from every hierarchy, killing what
// still runs in it. The runtime binary removes them itself when it deletes
// a container; this covers the containers that never got that far.
func (cg *cgroups) remove(id string) error {
	// A frozen task dies of SIGKILL only once thawed (v1).
	errs := []error{cg.freezer(id).thaw()}
	for _, h := range cg.all {
		if err := removeCgroupDir(filepath.Join(h.dir, cg.parent, id)); err != nil {
			errs = append(errs, err)
		}
		// The runtime's parent goes with its last sandbox; while others
		// remain, rmdir fails and changes nothing. A concurrent create
		// recreates it (runc makes the whole path).
		_ = unix.Rmdir(filepath.Join(h.dir, cg.parent))
	}
	return errors.Join(errs...)
}

// removeCgroupDir removes a cgroup directory and its children, killing
// their processes first.
func removeCgroupDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeCgroupDir(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	// Dying processes leave the cgroup a moment after SIGKILL.
	for i := 0; ; i++ {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || i == 100 {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		killCgroup(dir)
		time.Sleep(10 * time.Millisecond)
	}
}

// killCgroup sends SIGKILL to every process in the cgroup at dir.
func killCgroup(dir string) {
	if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pid, err := strconv.Atoi(sc.Text()); err == nil && pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
