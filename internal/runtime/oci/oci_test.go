package oci

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/memexec"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest/poolbench"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/testenv"
)

// The agent binary: $AGENT2ENV_BIN, or one built once for all tests (it
// needs no root). A prebuilt one spares a slow machine the build (a
// guest of scripts/cgroupv2-vm.sh takes about ten minutes over it).
var agentBin string

func TestMain(m *testing.M) {
	var dir string // of the agent built here
	if agentBin = os.Getenv("AGENT2ENV_BIN"); agentBin == "" {
		var err error
		if dir, err = os.MkdirTemp("/tmp", "a2e-bin-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		agentBin = filepath.Join(dir, "agent2env")
		cmd := exec.Command("go", "build", "-o", agentBin, "../../../cmd/agent2env")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build agent: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	if layers.dir != "" {
		os.RemoveAll(layers.dir)
	}
	os.Exit(code)
}

// layers are the test image: a busybox layer with the runtimetest probes
// and a top layer that overrides one file of it. Made once, as root.
var layers struct {
	once sync.Once
	dir  string
	list []string // lowest first
	err  error
}

func testLayers(t testing.TB) []string {
	t.Helper()
	runtimetest.RequiresRoot(t)
	layers.once.Do(func() { layers.dir, layers.list, layers.err = makeLayers(t) })
	if layers.err != nil {
		t.Fatal(layers.err)
	}
	return layers.list
}

func makeLayers(t testing.TB) (string, []string, error) {
	const busybox = "/bin/busybox"
	if err := requireStatic(busybox); err != nil {
		return "", nil, fmt.Errorf("%w (apt-get install busybox-static)", err)
	}
	dir, err := os.MkdirTemp("/tmp", "a2e-img-")
	if err != nil {
		return "", nil, err
	}
	base, top := filepath.Join(dir, "base"), filepath.Join(dir, "top")
	for _, d := range []string{base + "/bin", base + "/etc", top + "/etc"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return dir, nil, err
		}
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		return dir, nil, err
	}
	if err := os.WriteFile(base+"/bin/busybox", b, 0o755); err != nil {
		return dir, nil, err
	}
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return dir, nil, err
	}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			if err := os.Symlink("busybox", filepath.Join(base, "bin", a)); err != nil {
				return dir, nil, err
			}
		}
	}
	files := map[string]string{
		base + "/etc/passwd": "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/home/sandbox:/bin/sh\n",
		base + "/etc/group":  "root:x:0:\nsandbox:x:1000:\n",
		base + "/etc/layer":  "base\n",
		top + "/etc/layer":   "top\n",
	}
	for p, content := range files {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return dir, nil, err
		}
	}
	runtimetest.InstallProbes(t, base)
	return dir, []string{base, top}, nil
}

// requireStatic fails for a dynamically linked executable, which would not
// run in a rootfs without its libc.
func requireStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", path)
		}
	}
	return nil
}

// newRoot returns a short, fresh state directory: agent socket paths must
// stay under 108 bytes, which t.TempDir's paths may not.
func newRoot(t testing.TB) string {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "a2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Leave a root with leaked mounts for inspection.
		if b, _ := os.ReadFile("/proc/self/mountinfo"); !strings.Contains(string(b), root+"/") {
			os.RemoveAll(root)
		}
	})
	return root
}

// testImage is the one image of testImages: the layers of testLayers.
const testImage = "busybox-test"

// testImages holds testImage, made on first use; it fetches nothing.
type testImages struct{}

func (testImages) Get(ctx context.Context, ref string) (*image.Image, error) {
	if ref != testImage {
		return nil, errdefs.NotFound("image %s not found", ref)
	}
	// Once testLayers made them (as newSpec does) this only synchronizes.
	layers.once.Do(func() { layers.err = errors.New("the test image is used before testLayers made it") })
	if layers.err != nil {
		return nil, layers.err
	}
	return &image.Image{Ref: ref, Layers: layers.list, Config: image.Config{Env: []string{"FROM_IMAGE=yes"}}}, nil
}

func (i testImages) Ensure(ctx context.Context, ref string, _ image.ProgressFunc) (*image.Image, error) {
	return i.Get(ctx, ref)
}

func newRuntime(t testing.TB, root, binary string) *Runtime {
	t.Helper()
	rt, err := New(Config{
		Root:          root,
		RuntimeBinary: testBinary(t, binary),
		AgentBinary:   agentBin,
		Images:        testImages{},
		Logger:        slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeftOnCleanup(t, rt)
	return rt
}

// deleteLeftOnCleanup deletes, when the test ends, every sandbox rt still
// has: a test that fails half-way leaves none running on the host.
func deleteLeftOnCleanup(t testing.TB, rt *Runtime) {
	t.Cleanup(func() {
		ctx := context.Background()
		left, err := rt.List(ctx)
		if err != nil {
			t.Logf("list the sandboxes left: %v", err)
			return
		}
		for _, st := range left {
			if err := rt.Delete(ctx, st.ID); err != nil {
				t.Logf("delete sandbox %s, left by the test: %v", st.ID, err)
			}
		}
	})
}

// newSpec returns the spec of a sandbox of testImage, which it makes.
func newSpec(t testing.TB, id string) *sandbox.Spec {
	testLayers(t)
	return &sandbox.Spec{ID: id, Image: testImage, Env: []string{"LANG=C.UTF-8"}}
}

// testBinaries are the OCI runtime binaries the suites run with, by the
// names testBinary takes.
var testBinaries = []string{"runc", "crun"}

// testBinary returns the path of the OCI runtime binary name: crun is the
// project's (scripts/crun.sh, the daemon's default), runc Debian's.
func testBinary(t testing.TB, name string) string {
	t.Helper()
	if name == "crun" {
		out, err := exec.Command("../../../scripts/crun.sh", "--path").Output()
		if err != nil {
			testenv.Missing(t, "the project's crun is not built: run make crun (scripts/crun.sh)")
		}
		return strings.TrimSpace(string(out))
	}
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Missing(t, "%s is not installed: scripts/deps.sh installs it", name)
	}
	return p
}

// forBinaries runs test once with each of testBinaries.
func forBinaries(t *testing.T, test func(t *testing.T, bin string)) {
	for _, bin := range testBinaries {
		t.Run(bin, func(t *testing.T) { test(t, bin) })
	}
}

// TestConformance runs the runtime conformance suite with each runtime
// binary: runc, and the project's crun.
func TestConformance(t *testing.T) {
	runtimetest.RequiresRoot(t)
	for _, bin := range testBinaries {
		t.Run(bin, func(t *testing.T) {
			root := newRoot(t)
			runtimetest.Run(t, runtimetest.Factory{
				New:     func(t *testing.T) sandbox.Runtime { return newRuntime(t, root, bin) },
				NewSpec: func(t *testing.T, id string) *sandbox.Spec { return newSpec(t, id) },
				Kill:    killAgent,
			})
			runtimetest.AssertNoLeaks(t, root)
		})
	}
}

// killAgent SIGKILLs the agent of sandbox id and waits for it to die.
func killAgent(t *testing.T, rt sandbox.Runtime, id string) {
	t.Helper()
	st, err := rt.Status(context.Background(), id)
	if err != nil || st.Pid <= 0 {
		t.Fatalf("Status of %s = %+v, %v; want a running agent", id, st, err)
	}
	pidfd, err := unix.PidfdOpen(st.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	if exited, err := waitPidfd(context.Background(), pidfd, killWait); err != nil || !exited {
		t.Fatalf("agent of %s did not die: %v", id, err)
	}
}

// startSandbox creates and starts a sandbox with small resources.
func startSandbox(t *testing.T, rt *Runtime, id string) {
	t.Helper()
	sp := newSpec(t, id)
	sp.Resources.DiskBytes = 32 << 20
	if err := rt.Create(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

func TestLayerOrder(t *testing.T) {
	runtimetest.RequiresRoot(t)
	rt := newRuntime(t, newRoot(t), "runc")
	startSandbox(t, rt, "layers")
	defer rt.Delete(context.Background(), "layers")
	c, _ := rt.Agent(context.Background(), "layers")
	var out strings.Builder
	if _, err := c.Exec(context.Background(), agent.ExecRequest{Shell: "cat /etc/layer /etc/hostname"}, nil, &out, nil); err != nil {
		t.Fatal(err)
	}
	if out.String() != "top\nlayers\n" {
		t.Errorf("/etc/layer and /etc/hostname = %q, want the top layer's and the sandbox id", out.String())
	}
}

// TestStartFailure checks that a sandbox whose agent cannot start reports
// why, in the error and in Logs, and can be deleted.
func TestStartFailure(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	root := newRoot(t)
	rt := newRuntime(t, root, "runc")
	if err := rt.Create(ctx, newSpec(t, "broken")); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "broken", fileConfig)
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"args":["/.agent2env/agent2env"`, `"args":["/no/such/agent"`, 1))
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	err = rt.Start(ctx, "broken")
	if err == nil || !strings.Contains(err.Error(), "/no/such/agent") {
		t.Errorf("Start = %v, want an error naming the missing binary", err)
	}
	logs, err := rt.Logs(ctx, "broken", 4096)
	if err != nil || !strings.Contains(string(logs), "/no/such/agent") {
		t.Errorf("Logs = %q, %v; want the runtime's error", logs, err)
	}
	if st, err := rt.Status(ctx, "broken"); err != nil || st.State == sandbox.StateRunning {
		t.Errorf("Status = %+v, %v; want not running", st, err)
	}
	if err := rt.Delete(ctx, "broken"); err != nil {
		t.Fatal(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// TestRecoverCleansUp leaves what a crashed daemon could leave and checks
// that Recover removes it and keeps the running sandbox.
func TestRecoverCleansUp(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	root := newRoot(t)
	rt := newRuntime(t, root, "runc")
	startSandbox(t, rt, "keep")
	// A sandbox whose Create did not finish: mounted, but no meta.json.
	if err := rt.Create(ctx, newSpec(t, "half")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "half", fileMeta)); err != nil {
		t.Fatal(err)
	}
	// A container without a sandbox dir, running in the kept rootfs.
	bundle := filepath.Join(root, "_orphan-bundle")
	if err := os.Mkdir(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "keep", fileConfig))
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(string(b), `"args":["/.agent2env/agent2env"`, `"args":["/bin/sleep","600"`, 1)
	conf = strings.Replace(conf, `"cgroupsPath":"`+rt.cgroups.path("keep"), `"cgroupsPath":"`+rt.cgroups.path("orphan"), 1)
	if !strings.Contains(conf, rt.cgroups.path("orphan")) {
		t.Fatal("orphan bundle has no cgroup of its own")
	}
	if err := os.WriteFile(filepath.Join(bundle, fileConfig), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := rt.oci.command(ctx, "run", "--detach", "--bundle", bundle, "orphan").CombinedOutput(); err != nil {
		t.Fatalf("run orphan: %v: %s", err, out)
	}
	os.RemoveAll(bundle)
	// A stray cgroup and a stray mount.
	stray, _ := rt.cgroups.dir("pids", "straycg")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(root, "gone", "m")
	if err := os.MkdirAll(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "none", gone).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}

	rt2 := newRuntime(t, root, "runc")
	sts, err := rt2.Recover(ctx)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if len(sts) != 1 || sts[0].ID != "keep" || sts[0].State != sandbox.StateRunning {
		t.Errorf("Recover = %+v, want keep running only", sts)
	}
	if containers, err := rt2.oci.list(ctx); err != nil || !slices.Equal(containers, []string{"keep"}) {
		t.Errorf("containers after Recover = %v, %v; want [keep]", containers, err)
	}
	for _, p := range []string{filepath.Join(root, "half"), stray} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived Recover", p)
		}
	}
	if ok, _ := isMountpoint(gone); ok {
		t.Errorf("stray mount %s survived Recover", gone)
	}
	os.RemoveAll(filepath.Join(root, "gone"))
	if err := rt2.Delete(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// BenchmarkCreateStart measures create → ready (Create, Start, first Info
// answered) and reports its percentiles.
func BenchmarkCreateStart(b *testing.B) {
	runtimetest.RequiresRoot(b)
	for _, bin := range testBinaries {
		b.Run(bin, func(b *testing.B) {
			ctx := context.Background()
			rt := newRuntime(b, newRoot(b), bin)
			var durs []time.Duration
			for i := 0; b.Loop(); i++ {
				sp := newSpec(b, fmt.Sprintf("bench%d", i))
				start := time.Now()
				if err := rt.Create(ctx, sp); err != nil {
					b.Fatal(err)
				}
				err := rt.Start(ctx, sp.ID)
				durs = append(durs, time.Since(start))
				b.StopTimer()
				if derr := rt.Delete(ctx, sp.ID); derr != nil {
					b.Fatal(derr)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportPercentiles(b, durs)
		})
	}
}

// BenchmarkCrunVsRunc measures create → ready with runc and with crun and
// `unshare … true`, the three in turn in each iteration (who of runc and
// crun goes first alternates; each start 100 ms after the last, so that one
// start's moves into its cgroups do not spare the next the kernel's wait),
// and reports each one's p50 and the median of crun/runc per iteration.
func BenchmarkCrunVsRunc(b *testing.B) {
	runtimetest.RequiresRoot(b)
	ctx := context.Background()
	rts := []*Runtime{newRuntime(b, newRoot(b), "runc"), newRuntime(b, newRoot(b), "crun")}
	durs := make([][]time.Duration, 2)
	var base, ratios []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if out, err := exec.Command("unshare", "--mount", "--pid", "--fork", "--net", "--uts", "--ipc", "true").CombinedOutput(); err != nil {
			b.Fatalf("unshare: %v: %s", err, out)
		}
		base = append(base, time.Since(start))
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, j := range order {
			b.StopTimer()
			time.Sleep(100 * time.Millisecond)
			sp := newSpec(b, fmt.Sprintf("bench%d", i))
			b.StartTimer()
			start := time.Now()
			if err := rts[j].Create(ctx, sp); err != nil {
				b.Fatal(err)
			}
			err := rts[j].Start(ctx, sp.ID)
			durs[j] = append(durs[j], time.Since(start))
			b.StopTimer()
			if derr := rts[j].Delete(ctx, sp.ID); derr != nil {
				b.Fatal(derr)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		ratios = append(ratios, time.Duration(float64(time.Millisecond)*float64(durs[1][i])/float64(durs[0][i])))
	}
	p50 := func(ds []time.Duration) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(durs[0]), "runc-p50-ms")
	b.ReportMetric(p50(durs[1]), "crun-p50-ms")
	b.ReportMetric(p50(base), "unshare-p50-ms")
	b.ReportMetric(p50(ratios), "crun/runc-median")
}

// BenchmarkUnshare is the floor: new namespaces for one process, no
// container, no cgroups, no file system.
func BenchmarkUnshare(b *testing.B) {
	runtimetest.RequiresRoot(b)
	var durs []time.Duration
	for b.Loop() {
		start := time.Now()
		if out, err := exec.Command("unshare", "--mount", "--pid", "--fork", "--net", "--uts", "--ipc", "true").CombinedOutput(); err != nil {
			b.Fatalf("unshare: %v: %s", err, out)
		}
		durs = append(durs, time.Since(start))
	}
	reportPercentiles(b, durs)
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(durs[len(durs)/2]), "p50-ms")
	b.ReportMetric(ms(durs[len(durs)*95/100]), "p95-ms")
}

// TestRunsFromMemory checks that the runtime executes its binary from a
// sealed copy in memory, identical to the file, through a link named as
// the binary: runc and crun then skip making a copy of their own on every
// command, and a sandbox still starts.
func TestRunsFromMemory(t *testing.T) {
	runtimetest.RequiresRoot(t)
	forBinaries(t, func(t *testing.T, bin string) {
		root := newRoot(t)
		rt := newRuntime(t, root, bin)
		if want := filepath.Join(root, dirExe, bin); rt.oci.exe != want {
			t.Fatalf("exe = %q, want %q", rt.oci.exe, want)
		}
		f, err := os.Open(rt.oci.exe)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || seals != memexec.Seals {
			t.Errorf("seals of %s: %#x, %v; want %#x", rt.oci.exe, seals, err, memexec.Seals)
		}
		copied, _ := io.ReadAll(f)
		file, err := os.ReadFile(testBinary(t, bin))
		if err != nil || !bytes.Equal(copied, file) {
			t.Errorf("the copy has %d bytes, the binary %d (%v)", len(copied), len(file), err)
		}
		id := "mem-" + bin
		startSandbox(t, rt, id)
		if err := rt.Delete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOwnCgroups checks that both binaries put a sandbox in a cgroup of
// its own in every hierarchy the host mounts, cgroup2 included: on a hybrid
// host whose cgroup2 holds a controller, the project's crun runs the
// sandbox there as runc does (scripts/crun/0002-…) rather than refusing it.
func TestOwnCgroups(t *testing.T) {
	runtimetest.RequiresRoot(t)
	forBinaries(t, func(t *testing.T, bin string) {
		root := newRoot(t)
		rt := newRuntime(t, root, bin)
		cg, err := readCgroups(cgroupParent(root))
		if err != nil {
			t.Fatal(err)
		}
		id := "cg-" + bin
		startSandbox(t, rt, id) // deleted as the test ends (deleteLeftOnCleanup)
		st, err := rt.Status(context.Background(), id)
		if err != nil || st.Pid <= 0 {
			t.Fatalf("Status = %+v, %v", st, err)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", st.Pid))
		if err != nil {
			t.Fatal(err)
		}
		joined := 0
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			// hierarchy-id:controllers:path; cgroup2's controllers are empty.
			f := strings.SplitN(line, ":", 3)
			mounted := slices.ContainsFunc(cg.all, func(h hierarchy) bool {
				return h.v2 && f[1] == "" || !h.v2 && f[1] != "" && sameSet(strings.Split(f[1], ","), h.controllers)
			})
			if !mounted {
				continue
			}
			joined++
			if f[2] != cg.path(id) {
				t.Errorf("the agent is in %s of hierarchy %q; want %s", f[2], f[1], cg.path(id))
			}
		}
		if joined != len(cg.all) {
			t.Errorf("the agent is in %d of the host's %d hierarchies:\n%s", joined, len(cg.all), b)
		}
	})
}

// warmAttach must leave the daemon where it is, in every hierarchy.
func TestWarmAttach(t *testing.T) {
	runtimetest.RequiresRoot(t)
	cg, err := readCgroups(cgroupParent(newRoot(t)))
	if err != nil {
		t.Fatal(err)
	}
	procs := cg.ownProcs()
	if _, err := os.Stat(procs); err != nil {
		t.Fatalf("ownProcs = %q: %v", procs, err)
	}
	before, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	cg.warmAttach()
	after, _ := os.ReadFile("/proc/self/cgroup")
	if string(after) != string(before) {
		t.Errorf("warmAttach moved the process:\n%s\nbecame\n%s", before, after)
	}
	b, _ := os.ReadFile(procs)
	if !slices.Contains(strings.Fields(string(b)), strconv.Itoa(os.Getpid())) {
		t.Errorf("%s does not hold this process", procs)
	}
}

// BenchmarkRuntime is runtimetest.Benchmark on runc, the figures the
// kubernetes runtime's (kubetest BenchmarkNodeRuntime) compare with.
func BenchmarkRuntime(b *testing.B) {
	runtimetest.RequiresRoot(b)
	rt := newRuntime(b, newRoot(b), "runc")
	runtimetest.Benchmark(b, rt, func(id string) *sandbox.Spec { return newSpec(b, id) })
}

// BenchmarkWarmPool is poolbench.Benchmark on runc; compare with
// the kubernetes runtime's BenchmarkNodeWarmPool in the same run (make
// bench).
func BenchmarkWarmPool(b *testing.B) {
	runtimetest.RequiresRoot(b)
	rt := newRuntime(b, newRoot(b), "runc")
	testLayers(b)
	poolbench.Benchmark(b, rt, testImage)
}

// TestNoZombies checks that the daemon (here the test process, a
// subreaper since New) is left no zombie: crun run --detach leaves it one
// per container, which the reap each crun command schedules collects;
// runc waits for its helpers itself, and its commands schedule no reap.
func TestNoZombies(t *testing.T) {
	runtimetest.RequiresRoot(t)
	for _, bin := range testBinaries {
		t.Run(bin, func(t *testing.T) {
			root := newRoot(t)
			rt := newRuntime(t, root, bin)
			ctx := context.Background()
			for _, id := range []string{"z1", "z2", "z3"} {
				startSandbox(t, rt, id)
			}
			// The reap a command schedules collects what the runs left
			// once their helpers have exited; each list schedules one.
			var left []int
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if _, err := rt.oci.list(ctx); err != nil {
					t.Fatal(err)
				}
				left = zombieChildren(filepath.Base(bin))
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
			}
			if len(left) > 0 {
				t.Errorf("zombie children of the daemon named %s*: %v", bin, left)
			}
			for _, id := range []string{"z1", "z2", "z3"} {
				if err := rt.Delete(ctx, id); err != nil {
					t.Error(err)
				}
			}
			runtimetest.AssertNoLeaks(t, root)
		})
	}
}

// zombieChildren returns the zombie children of this process whose name
// begins with name: the runtime binary's, and its helpers' (runc's are
// "runc:[1:CHILD]" and the like). Other tests of the package leave zombies
// of their own: a container whose init Recover kills is a child of this
// process, which plays the daemon before and after the restart.
func zombieChildren(name string) []int {
	var pids []int
	for _, pid := range childPids() {
		if comm, state, ok := procState(pid); ok && strings.HasPrefix(comm, name) && state == "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestSwitchBinary runs sandboxes a runtime of one binary made with a
// runtime of the other on the same root, as a daemon does after its
// --runtime changed (or auto found a crun built since): a running one
// answers, is snapshotted and deleted; a stopped one starts again (on the
// new binary); a snapshot taken before restores, and its copy snapshots
// again, each through the binary that took the snapshot (CRIU's images of
// one are not the other's); and no binary's state keeps anything of them.
func TestSwitchBinary(t *testing.T) {
	runtimetest.RequiresRoot(t)
	for _, tc := range []struct{ from, to string }{{"runc", "crun"}, {"crun", "runc"}} {
		t.Run(tc.from+"→"+tc.to, func(t *testing.T) {
			ctx := context.Background()
			root := newRoot(t)
			before := newCRIURuntime(t, root, tc.from)
			startSandbox(t, before, "running")
			startSandbox(t, before, "stopped")
			if code, _ := run(t, before.client("running"), "echo 5 > /workspace/n"); code != 0 {
				t.Fatal("write /workspace/n")
			}
			if err := before.Checkpoint(ctx, "running", filepath.Join(root, "_snap1"), true); err != nil {
				t.Fatal(err)
			}
			if tc.from == "runc" { // as a snapshot taken before snapshots recorded their binary
				var snap snapshot
				f := filepath.Join(root, "_snap1", fileSnapshot)
				if err := readJSONFile(f, &snap); err != nil {
					t.Fatal(err)
				}
				snap.Meta.Binary = ""
				if err := writeJSONFile(f, snap); err != nil {
					t.Fatal(err)
				}
			}
			if err := before.Stop(ctx, "stopped", 0); err != nil {
				t.Fatal(err)
			}
			after := newCRIURuntime(t, root, tc.to)
			if _, err := after.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			if err := after.Start(ctx, "stopped"); err != nil {
				t.Fatal(err)
			}
			if err := after.Checkpoint(ctx, "running", filepath.Join(root, "_snap2"), true); err != nil {
				t.Fatal(err)
			}
			for i, snap := range []string{"_snap1", "_snap2"} {
				id := fmt.Sprintf("copy%d", i)
				if err := after.Restore(ctx, id, filepath.Join(root, snap), nil); err != nil {
					t.Fatal(err)
				}
				if err := after.Checkpoint(ctx, id, filepath.Join(root, snap+"again"), true); err != nil {
					t.Fatal(err)
				}
				if err := after.Restore(ctx, id+"again", filepath.Join(root, snap+"again"), nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"running", "stopped", "copy0", "copy1", "copy0again", "copy1again"} {
				if code, out := run(t, after.client(id), "cat /workspace/n 2>/dev/null || echo none"); code != 0 || (id != "stopped" && out != "5\n") {
					t.Errorf("%s: cat /workspace/n = %d %q", id, code, out)
				}
				if err := after.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			for _, snap := range []string{"_snap1", "_snap2", "_snap1again", "_snap2again"} {
				if err := os.RemoveAll(filepath.Join(root, snap)); err != nil {
					t.Fatal(err)
				}
			}
			runtimetest.AssertNoLeaks(t, root)
		})
	}
}
