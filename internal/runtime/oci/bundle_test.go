package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

func TestBundleSpec(t *testing.T) {
	res := sandbox.Resources{MilliCPU: 1500, MemoryBytes: 256 << 20, Pids: 100, DiskBytes: 1 << 30}
	for _, tc := range []struct {
		name      string
		rt        *Runtime
		cwd       string
		wantCwd   string
		wantSwap  bool
		wantOOM   bool
		wantFiles uint64
		spare     string
	}{
		{"defaults", &Runtime{nofile: 65536}, "", sandbox.WorkDir, false, false, 65536, ""},
		{"swap accounted", &Runtime{swapLimit: true, nofile: 65536}, "", sandbox.WorkDir, true, false, 65536, ""},
		{"oom adjustable", &Runtime{oomAdjust: true, nofile: 65536}, "/tmp", "/tmp", false, true, 65536, ""},
		{"low file limit", &Runtime{nofile: 512}, "", sandbox.WorkDir, false, false, 512, ""},
		{"spare kernel", &Runtime{nofile: 65536}, "", sandbox.WorkDir, false, false, 65536, "python"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rt.cfg.Root = "/r"
			tc.rt.cgroups = &cgroups{parent: "agent2env/0123abcd"}
			sp := &sandbox.Spec{ID: "sb1", Cwd: tc.cwd, SpareKernel: tc.spare, Mounts: []sandbox.Mount{{Source: "/srv/a", Destination: "/data"},
				{Source: "/srv/b", Destination: "/ro", ReadOnly: true}}}
			s := tc.rt.bundleSpec(sp, processEnv(nil, nil), res, "/r/sb1/d", "/r/sb1/r")

			wantArgs := []string{agentPath, "agent", "--uid", "1000", "--gid", "1000", "--cwd", tc.wantCwd}
			if tc.spare != "" {
				wantArgs = append(wantArgs, "--spare-kernel", tc.spare)
			}
			if diff := cmp.Diff(wantArgs, s.Process.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if s.Process.User.UID != 0 || !s.Process.NoNewPrivileges || !s.Root.Readonly || s.Hostname != "sb1" {
				t.Errorf("process %+v root %+v hostname %q", s.Process.User, s.Root, s.Hostname)
			}
			caps := []string{"CAP_CHOWN", "CAP_FOWNER", "CAP_KILL", "CAP_SETUID", "CAP_SETGID", "CAP_NET_ADMIN"}
			c := s.Process.Capabilities
			for name, set := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted} {
				if diff := cmp.Diff(caps, set); diff != "" {
					t.Errorf("%s capabilities (-want +got):\n%s", name, diff)
				}
			}
			if len(c.Inheritable) != 0 || len(c.Ambient) != 0 {
				t.Errorf("inheritable %v ambient %v, want none", c.Inheritable, c.Ambient)
			}
			if got := s.Process.OOMScoreAdj != nil && *s.Process.OOMScoreAdj == -1000; got != tc.wantOOM {
				t.Errorf("oomScoreAdj -1000 = %v, want %v", got, tc.wantOOM)
			}
			if rl := s.Process.Rlimits[0]; rl.Hard != tc.wantFiles || rl.Soft > rl.Hard {
				t.Errorf("RLIMIT_NOFILE = %+v, want hard %d", rl, tc.wantFiles)
			}
			if !slices.Contains(s.Process.Env, "AGENT2ENV_AGENT_FD=3") {
				t.Errorf("env %v lacks the agent fd", s.Process.Env)
			}

			r := s.Linux.Resources
			if *r.CPU.Quota != 150000 || *r.CPU.Period != 100000 || *r.Memory.Limit != 256<<20 || *r.Pids.Limit != 100 {
				t.Errorf("resources cpu %d/%d memory %d pids %d", *r.CPU.Quota, *r.CPU.Period, *r.Memory.Limit, *r.Pids.Limit)
			}
			if got := r.Memory.Swap != nil && *r.Memory.Swap == *r.Memory.Limit; got != tc.wantSwap {
				t.Errorf("swap = limit: %v, want %v", got, tc.wantSwap)
			}
			if s.Linux.CgroupsPath != "/agent2env/0123abcd/sb1" {
				t.Errorf("cgroupsPath = %q", s.Linux.CgroupsPath)
			}
			var ns []specs.LinuxNamespaceType
			for _, n := range s.Linux.Namespaces {
				ns = append(ns, n.Type)
			}
			for _, want := range []specs.LinuxNamespaceType{"pid", "mount", "network", "ipc", "uts", "cgroup"} {
				if !slices.Contains(ns, want) {
					t.Errorf("namespaces %v lack %s", ns, want)
				}
			}
			if slices.Contains(ns, specs.UserNamespace) {
				t.Error("bundle asks for a user namespace")
			}
			mounts := map[string]specs.Mount{}
			for _, m := range s.Mounts {
				mounts[m.Destination] = m
			}
			for dst, src := range map[string]string{
				sandbox.WorkDir: "/r/sb1/d/workspace", "/tmp": "/r/sb1/d/tmp",
				sandbox.HomeDir: "/r/sb1/d/home", agentPath: "/r/sb1/agent",
			} {
				if mounts[dst].Source != src {
					t.Errorf("mount at %s from %q, want %q", dst, mounts[dst].Source, src)
				}
			}
			for dst, want := range map[string]specs.Mount{
				"/data": {Destination: "/data", Type: "bind", Source: "/srv/a", Options: []string{"rbind", "rw", "nosuid", "nodev"}},
				"/ro":   {Destination: "/ro", Type: "bind", Source: "/srv/b", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			} {
				if diff := cmp.Diff(want, mounts[dst]); diff != "" {
					t.Errorf("shared volume mount (-want +got):\n%s", diff)
				}
			}
			if !slices.Contains(mounts[agentPath].Options, "ro") {
				t.Errorf("agent binary mounted %v, want ro", mounts[agentPath].Options)
			}
			for _, p := range []string{"/proc/kcore", "/proc/keys", "/sys/firmware"} {
				if !slices.Contains(s.Linux.MaskedPaths, p) {
					t.Errorf("%s is not masked", p)
				}
			}
			if !slices.Contains(s.Linux.ReadonlyPaths, "/proc/sys") {
				t.Error("/proc/sys is not read-only")
			}
			if s.Linux.Seccomp != nil {
				t.Error("the bundle has a seccomp profile: the agent installs the sandbox's filter (package seccomp)")
			}
		})
	}
}

func TestProcessEnv(t *testing.T) {
	defaults := []string{"HOME=" + sandbox.HomeDir, "LANG=C.UTF-8",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "USER=sandbox"}
	for _, tc := range []struct {
		name     string
		imageEnv []string
		env      []string
		want     []string
	}{
		{"defaults", nil, nil, defaults},
		{"image path wins", []string{"PATH=/opt/bin", "A=1"}, nil,
			[]string{"A=1", "HOME=" + sandbox.HomeDir, "LANG=C.UTF-8", "PATH=/opt/bin", "USER=sandbox"}},
		{"image home loses", []string{"HOME=/root"}, nil, defaults},
		{"spec wins", []string{"A=1", "A=2"}, []string{"A=3", "LANG=de_DE.UTF-8"},
			[]string{"A=3", "HOME=" + sandbox.HomeDir, "LANG=de_DE.UTF-8", defaults[2], defaults[3]}},
		{"agent config dropped", []string{"AGENT2ENV_AGENT_TOKEN=x"}, []string{"AGENT2ENV_AGENT_FD=9"}, defaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, processEnv(tc.imageEnv, tc.env)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	layer := t.TempDir()
	if err := os.Mkdir(layer+"/a:b", 0o755); err != nil {
		t.Fatal(err)
	}
	link, file := filepath.Join(t.TempDir(), "link"), filepath.Join(t.TempDir(), "file")
	if err := os.Symlink(layer, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{cfg: Config{Root: "/tmp/a2e-x", DefaultResources: sandbox.Resources{
		MilliCPU: 1000, MemoryBytes: 1 << 30, Pids: 512, DiskBytes: 1 << 30,
	}}}
	for _, tc := range []struct {
		name   string
		edit   func(*sandbox.Spec)
		layers []string
		ok     bool
	}{
		{"valid", func(*sandbox.Spec) {}, []string{layer}, true},
		{"uppercase id", func(s *sandbox.Spec) { s.ID = "Abc" }, []string{layer}, false},
		{"id with slash", func(s *sandbox.Spec) { s.ID = "a/b" }, []string{layer}, false},
		{"id starting with underscore", func(s *sandbox.Spec) { s.ID = "_tmpl" }, []string{layer}, false},
		{"id too long for the socket", func(s *sandbox.Spec) { s.ID = strings.Repeat("a", 64) + strings.Repeat("b", 30) }, []string{layer}, false},
		{"no layers", func(s *sandbox.Spec) {}, nil, false},
		{"relative layer", func(s *sandbox.Spec) {}, []string{"layer"}, false},
		{"missing layer", func(s *sandbox.Spec) {}, []string{"/nonexistent/layer"}, false},
		{"layer with colon", func(s *sandbox.Spec) {}, []string{layer + "/a:b"}, false},
		{"tiny disk", func(s *sandbox.Spec) { s.Resources.DiskBytes = 1 << 20 }, []string{layer}, false},
		{"negative memory", func(s *sandbox.Spec) { s.Resources.MemoryBytes = -1 }, []string{layer}, false},
		{"mount", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: layer, Destination: "/data"}} }, []string{layer}, true},
		{"mount of a symlink", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: link, Destination: "/data"}} }, []string{layer}, false},
		{"mount of a file", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: file, Destination: "/data"}} }, []string{layer}, false},
		{"mount source with ..", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: layer + "/../x", Destination: "/data"}} }, []string{layer}, false},
		{"mount destination with ..", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: layer, Destination: "/data/../etc"}} }, []string{layer}, false},
		{"mount relative", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: layer, Destination: "data"}} }, []string{layer}, false},
		{"mount over /proc", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: layer, Destination: "/proc/sys"}} }, []string{layer}, false},
		{"mount over the root", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: layer, Destination: "/"}} }, []string{layer}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &sandbox.Spec{ID: "sb1"}
			tc.edit(sp)
			res, err := rt.validate(sp, tc.layers)
			if tc.ok != (err == nil) {
				t.Fatalf("validate = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %v is not ErrInvalidArgument", err)
			}
			if tc.ok && res != rt.cfg.DefaultResources {
				t.Errorf("resources %+v, want the defaults", res)
			}
		})
	}
}

func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src, dst := dir+"/src", dir+"/dst"
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	chunks := map[int64]string{0: "head", 20 << 20: "middle", size - 4: "tail"}
	for off, s := range chunks {
		if _, err := f.WriteAt([]byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if err := copySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != size {
		t.Fatalf("copy has %d bytes, want %d", len(b), size)
	}
	for off, s := range chunks {
		if got := string(b[off : off+int64(len(s))]); got != s {
			t.Errorf("at %d: %q, want %q", off, got, s)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<20 {
		t.Errorf("copy uses %d bytes on disk: not sparse", st.Blocks*512)
	}
}

func TestCgroupParent(t *testing.T) {
	a, b := cgroupParent("/var/lib/agent2env/oci"), cgroupParent("/tmp/a2e-1/oci")
	if !strings.HasPrefix(a, "agent2env/") || len(a) != len("agent2env/")+8 || a == b {
		t.Errorf("cgroupParent = %q and %q, want agent2env/<8 hex> and distinct", a, b)
	}
	if cgroupParent("/var/lib/agent2env/oci/") != a {
		t.Error("cgroupParent depends on a trailing slash")
	}
}

func TestCgroupsOf(t *testing.T) {
	const (
		root        = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		v2          = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
		cpu         = "25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:8 - cgroup cgroup rw,cpu,cpuacct\n"
		memory      = "26 24 0:23 / /sys/fs/cgroup/memory rw,nosuid shared:9 - cgroup cgroup rw,memory\n"
		systemd     = "27 24 0:24 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
		unified     = "28 24 0:25 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
		yardMemory  = "40 22 0:23 / /tmp/w/.criu.cgyard.x/memory rw - cgroup cgroup rw,memory\n"
		yardUnified = "41 22 0:25 / /tmp/w/.criu.cgyard.x/unified rw - cgroup2 cgroup2 rw\n"
		escaped     = "31 23 0:27 / /mnt/my\\040cgroups\\011v1 rw - cgroup cgroup\\040fs rw,memory\n"
	)
	tests := []struct {
		name       string
		mountinfo  string
		want       []hierarchy
		memory     string // root("memory")
		memoryIsV2 bool
	}{
		{"pure v2", root + v2, []hierarchy{{dir: "/sys/fs/cgroup", v2: true}}, "/sys/fs/cgroup", true},
		{
			"hybrid", root + cpu + memory + systemd + unified,
			[]hierarchy{
				{dir: "/sys/fs/cgroup/cpu,cpuacct", controllers: []string{"cpu", "cpuacct"}},
				{dir: "/sys/fs/cgroup/memory", controllers: []string{"memory"}},
				{dir: "/sys/fs/cgroup/systemd", controllers: []string{"xattr", "name=systemd"}},
				{dir: "/sys/fs/cgroup/unified", v2: true},
			},
			"/sys/fs/cgroup/memory", false,
		},
		{
			"hierarchies mounted again elsewhere (CRIU's cgyard): the first mounts", root + memory + unified + yardMemory + yardUnified,
			[]hierarchy{
				{dir: "/sys/fs/cgroup/memory", controllers: []string{"memory"}},
				{dir: "/sys/fs/cgroup/unified", v2: true},
			},
			"/sys/fs/cgroup/memory", false,
		},
		{
			"octal escapes in the mount point and source", root + escaped,
			[]hierarchy{{dir: "/mnt/my cgroups\tv1", controllers: []string{"memory"}}},
			"/mnt/my cgroups\tv1", false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mounts, err := mountinfo.GetMountsFromReader(strings.NewReader(tt.mountinfo), cgroupMounts)
			if err != nil {
				t.Fatal(err)
			}
			cg, err := cgroupsOf("agent2env/x", mounts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cg.all, cmp.AllowUnexported(hierarchy{})); diff != "" {
				t.Errorf("hierarchies (-want +got):\n%s", diff)
			}
			if dir, v2 := cg.root("memory"); dir != tt.memory || v2 != tt.memoryIsV2 {
				t.Errorf("root(memory) = %s, %v; want %s, %v", dir, v2, tt.memory, tt.memoryIsV2)
			}
		})
	}
	mounts, err := mountinfo.GetMountsFromReader(strings.NewReader(root), cgroupMounts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cgroupsOf("agent2env/x", mounts); err == nil {
		t.Error("cgroupsOf without cgroup mounts = nil error")
	}
}

// TestSwapLimitable checks on which hosts sandboxes get a memory+swap
// limit: on v1 where the memsw files exist, on v2 always, even when no
// cgroup below the root enables the memory controller yet (no
// memory.swap.max anywhere: a swap limit the runtime binary cannot write
// is skipped; one not given would let swap get round the memory limit).
func TestSwapLimitable(t *testing.T) {
	v1 := func(files ...string) hierarchy {
		dir := t.TempDir()
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return hierarchy{dir: dir, controllers: []string{"memory"}}
	}
	v2 := func(children ...string) hierarchy {
		dir := t.TempDir()
		for _, c := range children {
			if err := os.MkdirAll(filepath.Join(dir, c), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, c, "memory.swap.max"), []byte("max\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return hierarchy{dir: dir, v2: true}
	}
	for _, tc := range []struct {
		name string
		all  []hierarchy
		want bool
	}{
		{"v1 with swap accounting", []hierarchy{v1("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")}, true},
		{"v1 without", []hierarchy{v1("memory.limit_in_bytes")}, false},
		{"hybrid: the v1 memory hierarchy decides", []hierarchy{v1("memory.limit_in_bytes"), v2("system.slice")}, false},
		{"v2 with a child that has memory.swap.max", []hierarchy{v2("system.slice")}, true},
		{"v2 whose root has no child with the memory controller", []hierarchy{v2()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&cgroups{all: tc.all}).swapLimitable(); got != tc.want {
				t.Errorf("swapLimitable = %v, want %v", got, tc.want)
			}
		})
	}
}

// criuBuiltIn tells a crun built with CRIU from one without, by its
// --version's feature list.
func TestCriuBuiltIn(t *testing.T) {
	tests := []struct {
		name, version string
		ok            bool
	}{
		{"debian 12's crun 1.8.1", "crun version 1.8.1\nspec: 1.0.0\n+SYSTEMD +SELINUX +APPARMOR +CAP +SECCOMP +EBPF +YAJL\n", false},
		{"with CRIU", "crun version 1.14\nspec: 1.0.0\n+SYSTEMD +SELINUX +APPARMOR +CAP +SECCOMP +EBPF +CRIU +YAJL\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "crun")
			script := "#!/bin/sh\nprintf '" + strings.ReplaceAll(tt.version, "\n", `\n`) + "'\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := criuBuiltIn(bin); (err == nil) != tt.ok {
				t.Errorf("criuBuiltIn = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// A command runs from the sealed copy of its binary whatever its files:
// many (a restore of a snapshot with many external pipes passes one for
// each), or the highest just below the copy's descriptor with one free
// below it, where os/exec's child moved its own pipe over the copy's
// descriptor before it executed /proc/self/fd/N (EACCES).
func TestExecSealedFiles(t *testing.T) {
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("no true(1): %v", err)
	}
	c := newOCICLI(bin, t.TempDir())
	if err := c.runFromMemory(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	defer c.sealed.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	fd := int(c.sealed.Fd())
	run := func(what string, cmd *exec.Cmd) {
		t.Helper()
		if err := c.exec(cmd); err != nil {
			t.Errorf("a command with %s: %v", what, err)
		}
	}
	for _, extra := range []int{0, 1, fd / 2, fd} {
		cmd := c.command(context.Background(), "--version")
		for range extra {
			cmd.ExtraFiles = append(cmd.ExtraFiles, null)
		}
		run(fmt.Sprintf("%d extra files", extra), cmd)
	}

	// Descriptors held up to the copy's, but for three: the command's
	// stdin (/dev/null) and its child's pipe take them.
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for len(held) == 0 || int(held[len(held)-1].Fd()) < fd-1 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	below := held[len(held)-1]
	if int(below.Fd()) != fd-1 {
		t.Fatalf("descriptors up to %d held, want %d", below.Fd(), fd-1)
	}
	for _, f := range held[len(held)-4 : len(held)-1] {
		f.Close()
	}
	held = append(held[:len(held)-4], below)
	cmd := c.command(context.Background(), "--version")
	cmd.Stdout, cmd.Stderr = below, below
	run(fmt.Sprintf("its output on descriptor %d, below the copy's", fd-1), cmd)
}
