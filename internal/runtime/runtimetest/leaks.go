package runtimetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

// cgroupParent is where the oci runtime with state in root makes its
// sandbox cgroups; it must match the oci package's cgroupParent.
func cgroupParent(root string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(root)))
	return "agent2env/" + hex.EncodeToString(sum[:4])
}

// AssertNoLeaks checks that nothing is left of the sandboxes of an oci
// runtime with state in root: no containers in the runtime binaries' state
// dirs (root/_runc, root/_crun, ...), no mounts under root, no sandbox
// cgroups (agent2env/<hash of root>/*) in any hierarchy, no process in such
// a cgroup or running in a root file system under root, and no sandbox dir.
// Runtimes on other roots, such as other tests', are not looked at.
func AssertNoLeaks(t testing.TB, root string) {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case name == "_tmpl", name == "_retained", name == "_exe", name == "_agents": // disk templates, disks kept on purpose (Retain), the runtime binary's link, the agent binaries
		case strings.HasPrefix(name, "_"):
			containers, _ := os.ReadDir(filepath.Join(root, name))
			for _, c := range containers {
				t.Errorf("leaked container %s in %s", c.Name(), name)
			}
		default:
			t.Errorf("leaked sandbox dir %s", name)
		}
	}

	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		t.Fatal(err)
	}
	parent := cgroupParent(root)
	var cgroupDirs []string
	for _, m := range mounts {
		if strings.HasPrefix(m.Mountpoint, root+"/") {
			t.Errorf("leaked mount %s", m.Mountpoint)
		}
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			cgroupDirs = append(cgroupDirs, filepath.Join(m.Mountpoint, parent))
		}
	}
	for _, d := range cgroupDirs {
		// The runtime's own parent cgroup must go with its last sandbox.
		if _, err := os.Stat(d); err == nil {
			t.Errorf("leaked cgroup %s", d)
		}
	}

	// Sandbox processes are in a mount namespace of their own, whose root
	// file system is an overlay with its upper dir under root.
	ownNS, _ := os.Readlink("/proc/self/ns/mnt")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		// A zombie holds nothing but its pid, and is its parent's to reap.
		if stat, _ := os.ReadFile(filepath.Join(p, "stat")); bytes.Contains(stat, []byte(") Z ")) {
			continue
		}
		if ns, _ := os.Readlink(filepath.Join(p, "ns", "mnt")); ns == ownNS {
			continue
		}
		cgroup, _ := os.ReadFile(filepath.Join(p, "cgroup"))
		mounts, _ := os.ReadFile(filepath.Join(p, "mountinfo"))
		if bytes.Contains(cgroup, []byte(":/"+parent+"/")) || bytes.Contains(mounts, []byte("upperdir="+root+"/")) {
			cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
			t.Errorf("leaked sandbox process %s: %q", filepath.Base(p), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}
