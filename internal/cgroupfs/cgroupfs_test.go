package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
)

func TestFind(t *testing.T) {
	hybrid := []*mountinfo.Info{
		{FSType: "cgroup2", Root: "/", Mountpoint: "/sys/fs/cgroup/unified"},
		{FSType: "cgroup", Root: "/", Mountpoint: "/sys/fs/cgroup/cpu,cpuacct", VFSOptions: "rw,cpu,cpuacct"},
		{FSType: "cgroup", Root: "/", Mountpoint: "/sys/fs/cgroup/memory", VFSOptions: "rw,memory"},
	}
	const hybridSelf = "5:memory:/kubepods/pod1/c1\n4:cpu,cpuacct:/kubepods/pod1/c1\n0::/kubepods/pod1/c1\n"
	for _, tc := range []struct {
		name       string
		self       string
		mounts     []*mountinfo.Info
		controller string
		wantDir    string
		wantV2     bool
		wantErr    bool
	}{
		{name: "v1 on the host", self: hybridSelf, mounts: hybrid, controller: "cpuacct",
			wantDir: "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1"},
		{name: "v1 controller of its own", self: hybridSelf, mounts: hybrid, controller: "memory",
			wantDir: "/sys/fs/cgroup/memory/kubepods/pod1/c1"},
		{name: "v1 in a container: its cgroup bind-mounted at the mount point", self: hybridSelf,
			mounts: []*mountinfo.Info{
				{FSType: "cgroup", Root: "/kubepods/pod1/c1", Mountpoint: "/sys/fs/cgroup/memory", VFSOptions: "ro,memory"},
			},
			controller: "memory", wantDir: "/sys/fs/cgroup/memory"},
		{name: "v2 with a cgroup namespace", self: "0::/\n",
			mounts:     []*mountinfo.Info{{FSType: "cgroup2", Root: "/", Mountpoint: "/sys/fs/cgroup"}},
			controller: "pids", wantDir: "/sys/fs/cgroup", wantV2: true},
		{name: "v2 without one", self: "0::/system.slice/x.service\n",
			mounts:     []*mountinfo.Info{{FSType: "cgroup2", Root: "/", Mountpoint: "/sys/fs/cgroup"}},
			controller: "memory", wantDir: "/sys/fs/cgroup/system.slice/x.service", wantV2: true},
		{name: "v2 cgroup above the mounted root", self: "0::/a\n",
			mounts:     []*mountinfo.Info{{FSType: "cgroup2", Root: "/a/b", Mountpoint: "/sys/fs/cgroup"}},
			controller: "memory", wantDir: "/sys/fs/cgroup", wantV2: true},
		{name: "controller nowhere", self: "0::/\n", mounts: nil, controller: "memory", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, v2, err := find(tc.self, tc.mounts, tc.controller)
			if (err != nil) != tc.wantErr || dir != tc.wantDir || v2 != tc.wantV2 {
				t.Errorf("find = %q, %v, %v; want %q, %v, error %v", dir, v2, err, tc.wantDir, tc.wantV2, tc.wantErr)
			}
		})
	}
}

func TestCounters(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu.stat", "usage_usec 1500\nuser_usec 1000\n")
	write("cpuacct.usage", "2000\n")
	write("memory.current", "4096\n")
	write("memory.usage_in_bytes", "8192\n")
	write("pids.current", "3\n")
	for _, tc := range []struct {
		name string
		read func() (uint64, error)
		want uint64
	}{
		{"cpu v2", func() (uint64, error) { return CPU(dir, true) }, 1_500_000},
		{"cpu v1", func() (uint64, error) { return CPU(dir, false) }, 2000},
		{"memory v2", func() (uint64, error) { return Memory(dir, true) }, 4096},
		{"memory v1", func() (uint64, error) { return Memory(dir, false) }, 8192},
		{"pids", func() (uint64, error) { return Pids(dir) }, 3},
	} {
		if got, err := tc.read(); err != nil || got != tc.want {
			t.Errorf("%s = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := ReadKeyed(filepath.Join(dir, "cpu.stat"), "nr_throttled"); err == nil {
		t.Error("ReadKeyed of a missing key succeeded")
	}
}
