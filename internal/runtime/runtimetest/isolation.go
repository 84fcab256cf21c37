package runtimetest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// testIsolation runs each abuse in a sandbox of its own: the abuse must
// fail or stay contained, and the sandbox must stay usable.
func (s *suite) testIsolation(t *testing.T) {
	t.Run("fork bomb", s.testForkBomb)
	t.Run("memory bomb", s.testMemoryBomb)
	t.Run("disk fill", s.testDiskFill)
	t.Run("output flood", s.testOutputFlood)
	t.Run("host files", s.testHostFiles)
	t.Run("other sandbox", s.testOtherSandbox)
	t.Run("host loopback", s.testHostLoopback)
	t.Run("no network", s.testNoNetwork)
	t.Run("mount", s.testMount)
	t.Run("ptrace", s.testPtrace)
	t.Run("seccomp", s.testSeccomp)
	t.Run("setuid", s.testSetuid)
	t.Run("kill agent", s.testKillAgent)
	t.Run("unprivileged", s.testUnprivileged)
	t.Run("no credentials", s.testNoCredentials)
	t.Run("read-only root", s.testReadOnlyRoot)
}

func (s *suite) testForkBomb(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	r := sh(t, c, "b() { b | b & }; b; sleep 60", 3*time.Second)
	if !r.TimedOut {
		t.Logf("fork bomb ended before its timeout: %+v", r.ExecResult)
	}
	assertUsable(t, c)
	// The timeout killed the bomb's process group: the sandbox is idle.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.Processes <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left after the fork bomb's timeout", info.Processes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *suite) testMemoryBomb(t *testing.T) {
	rt, sp, c := s.sandboxWith(t, nil)
	before, err := rt.Status(ctxFor(t), sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Commands start all the while: a sandbox at its limit is where a
	// start must not leave the agent the killer's choice.
	done := make(chan struct{})
	var starts int
	var startErr error
	var wg sync.WaitGroup
	ctx := ctxFor(t)
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			starts++
			if _, startErr = c.Exec(ctx, agent.ExecRequest{Command: []string{"true"}}, nil, io.Discard, io.Discard); startErr != nil {
				return
			}
		}
	})
	// Several allocators at once, each under the limit, together over it.
	r := sh(t, c, "for i in 1 2 3 4; do dd if=/dev/zero of=/dev/null bs=40M count=20 & done; wait; tail /dev/zero", 20*time.Second)
	close(done)
	wg.Wait()
	if r.ExitCode == 0 {
		t.Errorf("memory bomb exited 0: %+v", r.ExecResult)
	}
	if startErr != nil {
		t.Errorf("command %d started during the memory bomb: %v", starts, startErr)
	}
	assertUsable(t, c)
	after, err := rt.Status(ctxFor(t), sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Pid != before.Pid {
		t.Errorf("agent pid changed from %d to %d: the OOM killer took the agent", before.Pid, after.Pid)
	}
}

// hostFree is the free space of the host's root file system.
func hostFree(t *testing.T) uint64 {
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

func (s *suite) testDiskFill(t *testing.T) {
	rt := s.f.New(t)
	if !rt.Capabilities().DiskQuota {
		s.testDiskEviction(t, rt)
		return
	}
	other := s.spec(t)
	oc := started(t, rt, other)
	sp := s.spec(t)
	c := started(t, rt, sp)
	hostFree := func() uint64 { return hostFree(t) }
	before := hostFree()

	r := sh(t, c, "dd if=/dev/zero of=/workspace/fill bs=1M", time.Minute)
	if r.ExitCode == 0 || !strings.Contains(r.stderr, "No space left") {
		t.Errorf("filling the disk: exit %d stderr %q, want ENOSPC", r.ExitCode, r.stderr)
	}
	for _, dir := range []string{"/tmp", sandbox.HomeDir} {
		if r := sh(t, c, "dd if=/dev/zero of="+dir+"/more bs=64k count=16", 10*time.Second); r.ExitCode == 0 {
			t.Errorf("%s is writable while the disk is full: the limit is not shared", dir)
		}
	}
	if used := int64(before) - int64(hostFree()); used > 2*testResources.DiskBytes {
		t.Errorf("host lost %d bytes for a %d-byte disk", used, testResources.DiskBytes)
	}
	mustSh(t, oc, "dd if=/dev/zero of=/workspace/ok bs=1M count=8")
	mustSh(t, c, "rm /workspace/fill /tmp/more $HOME/more 2>/dev/null; echo again > /workspace/f")
	assertUsable(t, c)
}

// diskEvictionTimeout bounds how long a runtime without DiskQuota may
// take to stop a sandbox over its disk limit (the kubelet looks every 10
// seconds, and measures the emptyDirs with du).
const diskEvictionTimeout = 3 * time.Minute

// testDiskEviction is the disk limit of a runtime that enforces it by
// stopping the sandbox that went over it rather than by ENOSPC
// (Kubernetes evicts a Pod over its ephemeral-storage limit): writing
// three times the limit, not until the disk is full (the runtime notices
// after the fact: until then a sandbox writes at the disk's speed, on the
// node's disk, which is why the amount is the test's), either fails with
// ENOSPC or stops that sandbox, not the node: its Status.Reason says
// "disk limit", and another sandbox of the runtime goes on. (The host's
// free space is no measure here: the write is bounded by the test, and
// a minute of a shared host's other work moves it by more.)
func (s *suite) testDiskEviction(t *testing.T, rt sandbox.Runtime) {
	oc := started(t, rt, s.spec(t))
	sp := s.spec(t)
	c := started(t, rt, sp)
	written := 3 * testResources.DiskBytes
	script := fmt.Sprintf("dd if=/dev/zero of=/workspace/fill bs=1M count=%d && sync && sleep %d",
		written>>20, int(diskEvictionTimeout.Seconds()))
	done := make(chan result, 1)
	go func() {
		// The sandbox stopping ends the exec with an error: not the test's.
		var out, errb strings.Builder
		res, err := c.Exec(context.Background(), agent.ExecRequest{Shell: script, Timeout: diskEvictionTimeout}, nil, &out, &errb)
		if err != nil {
			res.ExitCode = -1
		}
		done <- result{ExecResult: res, stdout: out.String(), stderr: errb.String()}
	}()
	deadline := time.Now().Add(diskEvictionTimeout)
	for {
		select {
		case r := <-done:
			if r.ExitCode > 0 && strings.Contains(r.stderr, "No space left") {
				t.Logf("the write past the disk limit failed with ENOSPC")
				assertUsable(t, c)
				return
			}
			done = nil // the sandbox stopped under it: see its status
		case <-time.After(time.Second):
		}
		st, err := rt.Status(ctxFor(t), sp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != sandbox.StateRunning {
			if !strings.Contains(st.Reason, "disk limit") {
				t.Errorf("the sandbox over its disk limit: %s, reason %q; want a reason saying disk limit", st.State, st.Reason)
			}
			t.Logf("the sandbox over its disk limit: %s (%s) %v after the write began", st.State, st.Reason,
				diskEvictionTimeout-time.Until(deadline))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox wrote %d bytes on a %d-byte disk and runs on after %v", written, testResources.DiskBytes, diskEvictionTimeout)
		}
	}
	mustSh(t, oc, "dd if=/dev/zero of=/workspace/ok bs=1M count=8")
	assertUsable(t, oc)
}

func (s *suite) testOutputFlood(t *testing.T) {
	rt, sp, c := s.sandboxWith(t, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var n countWriter
	res, err := c.Exec(ctxFor(t), agent.ExecRequest{Command: []string{"yes"}, Timeout: 2 * time.Second}, nil, &n, &n)
	if err != nil {
		t.Fatalf("exec after %d bytes: %v; %s", n.n.Load(), err, sandboxState(t, rt, sp.ID))
	}
	runtime.ReadMemStats(&after)
	if !res.TimedOut || n.n.Load() < 1<<20 {
		t.Errorf("yes: %+v after %d bytes, want a timeout after plenty of output", res, n.n.Load())
	}
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 64<<20 {
		t.Errorf("daemon heap grew by %d bytes during the flood", grown)
	}
	start := time.Now()
	assertUsable(t, c)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("agent took %v to answer after the flood", d)
	}
}

type countWriter struct{ n atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

func (s *suite) testHostFiles(t *testing.T) {
	marker, err := os.CreateTemp("/tmp", "a2e-marker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(marker.Name()) })
	fmt.Fprint(marker, "host secret")
	marker.Close()
	rt, sp, c := s.sandboxWith(t, nil)
	for _, p := range []string{marker.Name(), "/proc/1/root" + marker.Name(), "/proc/self/root" + marker.Name()} {
		if r := sh(t, c, "cat "+p, 5*time.Second); r.ExitCode == 0 || strings.Contains(r.stdout, "host secret") {
			t.Errorf("read host file through %s: %q", p, r.stdout)
		}
	}
	name := marker.Name()[strings.LastIndex(marker.Name(), "/")+1:]
	// Not through /proc and /sys: a host file shows there only under a
	// process's root, which the paths above try, and a host's sysfs is
	// large (2,000 loop devices' entries took find 5 s on a test host).
	// A file of the sandbox's own by the same name is what find must see.
	var out strings.Builder
	own := "/tmp/" + name + ".sandbox"
	find := "touch " + own + " && find / \\( -path /proc -o -path /sys \\) -prune -o -name '" + name + "*' -print 2>/dev/null"
	if _, err := c.Exec(ctxFor(t), agent.ExecRequest{Shell: find, Timeout: 30 * time.Second}, nil, &out, io.Discard); err != nil {
		t.Fatalf("find: %v; %s", err, sandboxState(t, rt, sp.ID))
	}
	if got := out.String(); got != own+"\n" {
		t.Errorf("find of %s* in the sandbox: %q, want its own %s only", name, got, own)
	}
}

func (s *suite) testOtherSandbox(t *testing.T) {
	rt := s.f.New(t)
	a, b := s.spec(t), s.spec(t)
	ac := started(t, rt, a)
	bc := started(t, rt, b)
	mustSh(t, ac, "setsid sleep 313 </dev/null >/dev/null 2>&1 &")
	// The other sandbox tries once the process runs sleep: until then it
	// is a shell, or busybox executing itself again (/proc/self/exe),
	// which ps shows as [exe] between the exec's start and its argv (a
	// sandbox throttled on a loaded host was seen there after 0.1 s).
	victim := waitSleeper(t, ac, "313")
	if out := mustSh(t, bc, "ps -o args"); strings.Contains(out, "sleep 313") {
		t.Errorf("sandbox sees another sandbox's process:\n%s", out)
	}
	// Signal everything it can, then everything up to a high pid.
	sh(t, bc, "kill -9 -1; i=1; while [ $i -lt 400 ]; do kill -9 $i 2>/dev/null; i=$((i+1)); done", 30*time.Second)
	if pids := sleepers(t, ac, "313"); !slices.Contains(pids, victim) {
		t.Errorf("another sandbox killed this one's process %s (sleep 313 now: %q):\n%s", victim, pids, mustSh(t, ac, "ps -o pid,stat,args"))
	}
	assertUsable(t, bc)
	if _, err := bc.Upload(ctxFor(t), "/tmp/mine", 0o644, strings.NewReader("b")); err != nil {
		t.Fatal(err)
	}
	if r := sh(t, ac, "cat /tmp/mine", 5*time.Second); r.ExitCode == 0 {
		t.Errorf("sandbox reads another sandbox's /tmp: %q", r.stdout)
	}
}

// sleepers returns the pids of the sandbox's live processes that run
// "sleep arg" (a zombie's command line is empty).
func sleepers(t *testing.T, c *agent.Client, arg string) []string {
	t.Helper()
	out := mustSh(t, c, `for p in /proc/[0-9]*; do [ "$(tr '\0' ' ' <$p/cmdline 2>/dev/null)" = "sleep `+arg+` " ] && echo ${p#/proc/}; done; true`)
	return strings.Fields(out)
}

// waitSleeper waits for one process of the sandbox to run "sleep arg" and
// returns its pid.
func waitSleeper(t *testing.T, c *agent.Client, arg string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pids := sleepers(t, c, arg); len(pids) == 1 {
			return pids[0]
		} else if len(pids) > 1 || time.Now().After(deadline) {
			t.Fatalf("processes running sleep %s: %q, want one:\n%s", arg, pids, mustSh(t, c, "ps -o pid,stat,args"))
		}
	}
}

func (s *suite) testHostLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			fmt.Fprint(conn, "host listener\n")
			conn.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	_, _, c := s.sandboxWith(t, nil)
	port := l.Addr().(*net.TCPAddr).Port
	r := sh(t, c, fmt.Sprintf("nc -w 2 127.0.0.1 %d </dev/null", port), 10*time.Second)
	if r.ExitCode == 0 || strings.Contains(r.stdout, "host listener") || accepted.Load() > 0 {
		t.Errorf("reached the host's loopback listener: exit %d stdout %q accepted %d", r.ExitCode, r.stdout, accepted.Load())
	}
	// The sandbox's own loopback works.
	mustSh(t, c, "nc -l -p 8080 >/tmp/got & sleep 0.2; echo hi | nc -w 1 127.0.0.1 8080; sleep 0.2; cat /tmp/got")
}

// testNoNetwork checks that a sandbox has no way out: no interface but
// loopback or, on a runtime whose sandboxes have one under a policy
// (Capabilities.LoopbackOnly false), none of the factory's EgressTargets
// reachable.
func (s *suite) testNoNetwork(t *testing.T) {
	rt, sp, c := s.sandboxWith(t, nil)
	if !rt.Capabilities().LoopbackOnly {
		if s.f.EgressTargets == nil {
			t.Fatalf("%s gives sandboxes a network interface (Capabilities.LoopbackOnly false): "+
				"the factory must prove its policy denies egress (Factory.EgressTargets)", rt.Name())
		}
		targets := s.f.EgressTargets(t, sp.ID)
		if len(targets) == 0 {
			t.Fatal("Factory.EgressTargets gave no target")
		}
		for _, tg := range targets {
			if got := probeConnect(t, c, tg.Addr); got == "ok" {
				t.Errorf("the sandbox reached %s at %s", tg.Name, tg.Addr)
			} else {
				t.Logf("%s at %s: %s", tg.Name, tg.Addr, got)
			}
		}
		assertUsable(t, c)
		return
	}
	out := mustSh(t, c, "cat /proc/net/dev")
	for _, l := range lines(out)[2:] {
		if name, _, _ := strings.Cut(l, ":"); name != "lo" {
			t.Errorf("sandbox has network interface %q", name)
		}
	}
}

func (s *suite) testMount(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	if r := sh(t, c, "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", 5*time.Second); r.ExitCode == 0 {
		t.Error("mount succeeded")
	}
	if got := probeCall(t, c, "mount"); got != "EPERM" {
		t.Errorf("mount(2) = %s, want EPERM", got)
	}
	assertUsable(t, c)
}

func (s *suite) testPtrace(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	if got := probeCall(t, c, "ptrace"); got != "EPERM" {
		t.Errorf("ptrace(PTRACE_TRACEME) = %s, want EPERM", got)
	}
	assertUsable(t, c)
}

// probeConnect runs the probe's attempt at a TCP connection to addr and
// returns its outcome: "ok", "timeout" or an errno name.
func probeConnect(t *testing.T, c *agent.Client, addr string) string {
	t.Helper()
	return probe(t, c, "connect", addr)
}

// probeCall runs the probe's attempt at a system call and returns its
// outcome: "ok" or an errno name.
func probeCall(t *testing.T, c *agent.Client, name string) string {
	t.Helper()
	return probe(t, c, "syscall", name)
}

// probe runs the probe's command what on arg and returns what it printed.
func probe(t *testing.T, c *agent.Client, what, arg string) string {
	t.Helper()
	r := sh(t, c, ProbePath+" "+what+" "+arg, 10*time.Second)
	if r.ExitCode != 0 {
		t.Fatalf("probe %s %s: exit %d stderr %q", what, arg, r.ExitCode, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// testSeccomp tries the calls the default profile must block. Each call is
// made so that it would succeed, or fail with another errno, if allowed.
func (s *suite) testSeccomp(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	for _, tc := range []struct {
		call string
		want string
	}{
		{call: "ptrace", want: "EPERM"},
		{call: "mount", want: "EPERM"},
		{call: "umount2", want: "EPERM"},
		{call: "pivot_root", want: "EPERM"},
		{call: "unshare-user", want: "EPERM"},
		{call: "unshare-net", want: "EPERM"},
		{call: "setns", want: "EPERM"},
		{call: "clone-newuser", want: "EPERM"},
		{call: "clone3", want: "ENOSYS"},
		{call: "bpf", want: "EPERM"},
		{call: "perf_event_open", want: "EPERM"},
		{call: "keyctl", want: "EPERM"},
		{call: "add_key", want: "EPERM"},
		{call: "userfaultfd", want: "EPERM"},
		{call: "name_to_handle_at", want: "EPERM"},
		{call: "open_by_handle_at", want: "EPERM"},
		{call: "process_vm_readv", want: "EPERM"},
		{call: "kexec_load", want: "EPERM"},
		{call: "init_module", want: "EPERM"},
		{call: "delete_module", want: "EPERM"},
		{call: "swapon", want: "EPERM"},
		{call: "reboot", want: "EPERM"},
		{call: "acct", want: "EPERM"},
		{call: "syslog", want: "EPERM"},
		{call: "settimeofday", want: "EPERM"},
		{call: "clock_settime", want: "EPERM"},
		{call: "io_uring_setup", want: "EPERM"},
		// Not the filter's: no capability allows them.
		{call: "socket-raw", want: "EPERM"},
		{call: "socket-packet", want: "EPERM"},
	} {
		t.Run(tc.call, func(t *testing.T) {
			if got := probeCall(t, c, tc.call); got != tc.want {
				t.Errorf("%s = %s, want %s", tc.call, got, tc.want)
			}
		})
	}
	assertUsable(t, c)
}

func (s *suite) testSetuid(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	mode := mustSh(t, c, "stat -c %a:%u "+SetuidProbePath)
	if mode != "4755:0\n" {
		t.Fatalf("the image's setuid probe is %q, want 4755:0 (see InstallProbes)", mode)
	}
	if got := mustSh(t, c, SetuidProbePath+" ids"); got != "1000 1000 1000 1000\n" {
		t.Errorf("setuid-root binary runs with uid euid gid egid %q, want all 1000", got)
	}
}

func (s *suite) testKillAgent(t *testing.T) {
	rt, sp, c := s.sandboxWith(t, nil)
	before, err := rt.Status(ctxFor(t), sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"kill -9 1", "kill -TERM 1", "kill -9 -1", "kill -STOP 1"} {
		sh(t, c, script, 5*time.Second)
		assertUsable(t, c)
	}
	after, err := rt.Status(context.Background(), sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != sandbox.StateRunning || after.Pid != before.Pid {
		t.Errorf("agent after kill attempts: %+v, before: %+v", after, before)
	}
}

func (s *suite) testUnprivileged(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	if got := mustSh(t, c, "id -u; id -g"); got != "1000\n1000\n" {
		t.Errorf("id = %q, want 1000 1000", got)
	}
	status := map[string]string{}
	for _, l := range lines(mustSh(t, c, "cat /proc/self/status")) {
		k, v, _ := strings.Cut(l, ":")
		status[k] = strings.TrimSpace(v)
	}
	for k, want := range map[string]string{
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2",
	} {
		if status[k] != want {
			t.Errorf("%s = %q, want %q", k, status[k], want)
		}
	}
}

// testNoCredentials: nothing in a sandbox holds a credential of the
// platform that runs it (a Kubernetes service account's token, or any
// file of the daemon's), and commands reach none of the agent's (a Pod's
// agent has a token and a TLS key): not in their environment, nor through
// the agent's /proc files, which the kernel refuses them even where the
// agent runs as their user (a Pod's) only while the agent is not dumpable.
func (s *suite) testNoCredentials(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	for _, p := range []string{"/var/run/secrets/kubernetes.io", "/run/secrets/kubernetes.io"} {
		if r := sh(t, c, "ls -A "+p, 5*time.Second); r.ExitCode == 0 {
			t.Errorf("%s is in the sandbox: %s", p, r.stdout)
		}
	}
	if cmdline := mustSh(t, c, `tr '\0' ' ' </proc/1/cmdline`); !strings.Contains(cmdline, "agent") {
		t.Fatalf("PID 1 is %q, not the agent", cmdline)
	}
	for _, script := range []string{
		"cat /proc/1/environ",
		"exec 3<>/proc/1/mem",
		"exec 3</proc/1/mem",
		"cat /proc/1/maps",
		"ls /proc/1/fd",
		"ls /proc/1/root/",
	} {
		if r := sh(t, c, script, 5*time.Second); r.ExitCode == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want permission denied", script, r.ExitCode, r.stdout, r.stderr)
		}
	}
	// Nor the cluster's: the kubelet gives every container the API
	// service's address (KUBERNETES_SERVICE_HOST, KUBERNETES_PORT_443_TCP…).
	if env := mustSh(t, c, "env"); strings.Contains(env, "AGENT2ENV_AGENT_") || strings.Contains(env, "KUBERNETES_") {
		t.Errorf("a command's environment has the agent's or the cluster's variables:\n%s", env)
	}
}

func (s *suite) testReadOnlyRoot(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	if opts := mustSh(t, c, `awk '$5 == "/" { print $6 }' /proc/self/mountinfo`); !strings.HasPrefix(opts, "ro") {
		t.Errorf("root is mounted %q, want ro", opts)
	}
	for _, p := range []string{"/etc/x", "/x", "/usr/x", "/bin/x"} {
		if r := sh(t, c, "touch "+p, 5*time.Second); r.ExitCode == 0 {
			t.Errorf("touch %s succeeded on the read-only root", p)
		}
	}
	mustSh(t, c, "touch /workspace/x /tmp/x $HOME/x /dev/shm/x")
}

// sandboxState says what the runtime knows of sandbox id, for a test whose
// agent stopped answering: its state and reason, and its last output where
// the runtime keeps it.
func sandboxState(t *testing.T, rt sandbox.Runtime, id string) string {
	st, err := rt.Status(ctxFor(t), id)
	state := fmt.Sprintf("sandbox %s: %s (%s)", id, st.State, st.Reason)
	if err != nil {
		state = fmt.Sprintf("sandbox %s: status: %v", id, err)
	}
	if lr, ok := rt.(sandbox.LogReader); ok {
		b, err := lr.Logs(ctxFor(t), id, 4096)
		if err != nil {
			return fmt.Sprintf("%s; logs: %v", state, err)
		}
		return fmt.Sprintf("%s; its logs:\n%s", state, b)
	}
	return state
}
