package kubetest

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// freeSubnet picks a /24 in 10.200.0.0/13 at random that no interface of
// the host has an address in.
func freeSubnet() (netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, err
	}
	for range 100 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(200 + rand.IntN(8)), byte(rand.IntN(256)), 0}), 24)
		taken := false
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if other, err := netip.ParsePrefix(n.String()); err == nil && other.Overlaps(p) {
					taken = true
				}
			}
		}
		if !taken {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("every /24 tried is in use")
}

// addBridge makes the Pods' bridge with the host's address on it.
func addBridge(name string, addr netip.Prefix) error {
	for _, args := range [][]string{
		{"link", "add", name, "type", "bridge"},
		{"addr", "add", addr.String(), "dev", name},
		{"link", "set", name, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = exec.Command("ip", "link", "del", name).Run()
			return fmt.Errorf("make the pods' bridge: ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// cgroupMounts are the mount points of the host's cgroup hierarchies, v1
// and v2.
func cgroupMounts() ([]string, error) {
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.FSType != "cgroup" && m.FSType != "cgroup2", false
	})
	if err != nil {
		return nil, err
	}
	var points []string
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	return points, nil
}

// kubeletControllers are the cgroup v2 controllers the kubelet wants its
// --cgroup-root to have, those of them the host has.
var kubeletControllers = []string{"cpu", "cpuset", "memory", "pids", "hugetlb", "io"}

// makeCgroupRoot makes the kubelet's --cgroup-root in every hierarchy (it
// must exist before the kubelet starts): on cgroup v1 with the cpuset of
// its parent, as a new cpuset is empty; on a pure v2 host with the
// controllers the kubelet wants enabled for it in the hierarchy's root (on a pure v2 host
// inside a container whose processes sit in that root, the kernel refuses
// them: run such a container's processes in a child cgroup).
func makeCgroupRoot(root string) error {
	points, err := cgroupMounts()
	if err != nil {
		return err
	}
	pureV2 := len(points) == 1
	for _, mp := range points {
		// On a hybrid host the kubelet uses the v1 hierarchies only.
		if available, err := os.ReadFile(filepath.Join(mp, "cgroup.controllers")); err == nil && pureV2 {
			for _, c := range strings.Fields(string(available)) {
				if !slices.Contains(kubeletControllers, c) {
					continue
				}
				if err := os.WriteFile(filepath.Join(mp, "cgroup.subtree_control"), []byte("+"+c), 0o644); err != nil {
					return fmt.Errorf("enable the cgroup controller %s in %s: %w", c, mp, err)
				}
			}
		}
		dir := filepath.Join(mp, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("make the node's cgroup: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(mp, f))
			if err != nil {
				continue // not the v1 cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("make the node's cgroup: %w", err)
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the node's cgroups, deepest first, in every
// hierarchy; what it cannot remove (a process is still in it) is the
// error.
func removeCgroupRoot(root string) error {
	points, err := cgroupMounts()
	if err != nil {
		return err
	}
	var left []string
	for _, mp := range points {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(mp, root), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				left = append(left, d+" ("+err.Error()+")")
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups %s", strings.Join(left, ", "))
	}
	return nil
}

// unmountUnder unmounts every mount under dir, deepest first, and returns
// those it found; the error names those it could not unmount.
func unmountUnder(dir string) (found []string, err error) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, err
	}
	slices.SortFunc(mounts, func(a, b *mountinfo.Info) int { return len(b.Mountpoint) - len(a.Mountpoint) })
	var stuck []string
	for _, m := range mounts {
		found = append(found, m.Mountpoint+" ("+m.FSType+")")
		if err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			stuck = append(stuck, m.Mountpoint+" ("+err.Error()+")")
		}
	}
	if len(stuck) > 0 {
		return found, fmt.Errorf("mounts %s", strings.Join(stuck, ", "))
	}
	return found, nil
}

// removeEmptyTree removes the tree at dir if it holds nothing but
// directories and dead sockets; the error names the files it holds. A
// socket something still listens on is another node's (tests of several
// packages run at once): the tree stays.
func removeEmptyTree(dir string) error {
	var files []string
	live := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Type()&fs.ModeSocket != 0:
			live = live || listening(path)
		case !d.IsDir():
			files = append(files, path)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(files) > 0 {
		return fmt.Errorf("files %s", strings.Join(files, ", "))
	}
	if live {
		return nil
	}
	return os.RemoveAll(dir)
}

// listening reports whether something accepts connections on the unix
// socket at path.
func listening(path string) bool {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// listDir returns the names in dir, none when it does not exist.
func listDir(dir string) map[string]bool {
	entries, _ := os.ReadDir(dir)
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// pidsMentioning returns the processes whose command line contains s.
func pidsMentioning(s string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		if strings.Contains(string(b), s) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// processesMentioning describes the processes whose command line
// contains s.
func processesMentioning(s string) []string {
	var found []string
	for _, pid := range pidsMentioning(s) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil {
			found = append(found, strconv.Itoa(pid)+": "+strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
		}
	}
	return found
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
