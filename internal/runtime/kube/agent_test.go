package kube_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// envAgentRoot, set in the environment of this test binary, makes it a
// sandbox's agent instead (see TestMain) with its root at the value.
const envAgentRoot = "KUBE_TEST_AGENT_ROOT"

// envAgentCgroups lists, separated by ':', the cgroup directories the
// agent of a sandbox joins (see podCgroups).
const envAgentCgroups = "KUBE_TEST_AGENT_CGROUPS"

func TestMain(m *testing.M) {
	if root := os.Getenv(envAgentRoot); root != "" {
		if err := runAgent(root); err != nil {
			fmt.Fprintln(os.Stderr, "kube test agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(postgresServer.Run(m))
}

// runAgent plays a container runtime and then the agent, in the new mount
// and pid namespaces agents.start made: a private root on a tmpfs with the
// host's /usr, /etc and the like read-only, a /proc of its own, the Pod's
// emptyDirs as empty directories owned by the sandbox user; then, as that
// user in the root, the agent as the Pod's command runs it. The network
// namespace is the host's: the agent listens on the Pod's loopback IP.
func runAgent(root string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=256m"); err != nil {
		return fmt.Errorf("mount root: %w", err)
	}
	for _, d := range []string{"usr", "etc", "bin", "sbin", "lib", "lib64", "dev"} {
		src, dst := "/"+d, filepath.Join(root, d)
		fi, err := os.Lstat(src)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 { // merged /usr
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			continue
		}
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", src, err)
		}
		if d != "dev" {
			if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", src, err)
			}
		}
	}
	if err := os.Mkdir(filepath.Join(root, "proc"), 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{sandbox.WorkDir, 0o755}, {"/tmp", 0o1777}, {sandbox.HomeDir, 0o755}} {
		p := filepath.Join(root, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
		if err := os.Chown(p, sandbox.UserID, sandbox.GroupID); err != nil {
			return err
		}
	}
	if err := joinCgroups(root, os.Getenv(envAgentCgroups)); err != nil {
		return err
	}
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	cwd := os.Getenv("KUBE_TEST_AGENT_CWD")
	if err := os.Chdir(cwd); err != nil {
		return err
	}
	os.Unsetenv(envAgentRoot)
	os.Unsetenv("KUBE_TEST_AGENT_CWD")
	os.Unsetenv(envAgentCgroups)
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setgid(sandbox.GroupID); err != nil {
		return err
	}
	if err := syscall.Setuid(sandbox.UserID); err != nil {
		return err
	}
	return agent.Run(context.Background(), agent.Options{UID: -1, GID: -1, Cwd: cwd})
}

// agents is the tier-A kubelet's container runtime: for each sandbox Pod
// it starts a real agent process, with the Pod's environment (its token
// read from the Secret the Pod names), listening on the Pod's IP.
type agents struct {
	t      testing.TB
	client func() kubernetes.Interface
	dir    string

	mu    sync.Mutex
	procs map[string]*exec.Cmd // by Pod name
	wg    sync.WaitGroup
}

func newAgents(t testing.TB) *agents {
	a := &agents{t: t, dir: t.TempDir(), procs: map[string]*exec.Cmd{}}
	t.Cleanup(a.stopAll)
	return a
}

// onPod is the cluster's kubetest.PodFunc.
func (a *agents) onPod(ctx context.Context, pod *corev1.Pod, ip netip.Addr) error {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "sandbox" {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		if pod.Labels[kube.LabelPrepull] != "" {
			return nil // ready: its images are "pulled"
		}
		return fmt.Errorf("pod %s has no sandbox container", pod.Name)
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, e := range c.Env {
		v := e.Value
		if ref := e.ValueFrom; ref != nil {
			if ref.SecretKeyRef == nil {
				return fmt.Errorf("env %s: only secret references are resolved", e.Name)
			}
			sec, err := a.client().CoreV1().Secrets(pod.Namespace).Get(ctx, ref.SecretKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("env %s: %w", e.Name, err)
			}
			v = string(sec.Data[ref.SecretKeyRef.Key])
		}
		// The Pod's network namespace is the host's here: its addresses
		// are on the Pod's IP, its loopback's ports included.
		switch e.Name {
		case agent.EnvListen:
			v = netip.AddrPortFrom(ip, kube.AgentPort).String()
		case agent.EnvServicesAccept, agent.EnvEgressAccept:
			port, err := netip.ParseAddrPort(v)
			if err != nil {
				return fmt.Errorf("env %s: %w", e.Name, err)
			}
			v = netip.AddrPortFrom(ip, port.Port()).String()
		}
		env = append(env, e.Name+"="+v)
	}
	root := filepath.Join(a.dir, pod.Name+"-"+string(pod.UID))
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	log, err := os.Create(root + ".log")
	if err != nil {
		return err
	}
	defer log.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cgroups, err := podCgroups(pod.Name + "-" + string(pod.UID))
	if err != nil {
		return err
	}
	cmd := exec.Command(self)
	cmd.Env = append(env, envAgentRoot+"="+root, "KUBE_TEST_AGENT_CWD="+c.WorkingDir,
		envAgentCgroups+"="+strings.Join(cgroups, ":"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		removeCgroups(a.t, cgroups)
		return err
	}
	a.mu.Lock()
	a.procs[pod.Name+string(pod.UID)] = cmd
	a.mu.Unlock()
	exited := make(chan struct{})
	a.wg.Go(func() {
		err := cmd.Wait()
		removeCgroups(a.t, cgroups)
		if ctx.Err() == nil {
			// Nothing stops an agent but its Pod's deletion: say why this
			// one ended, or the test sees only a refused connection.
			out, _ := os.ReadFile(root + ".log")
			a.t.Logf("agent of pod %s exited (%v) while its pod lives; its output:\n%s", pod.Name, err, out)
		}
		close(exited)
	})
	a.wg.Go(func() {
		select {
		case <-exited:
		case <-ctx.Done():
			// The Pod was deleted. A kubelet removes its object only once
			// its containers are dead (SIGTERM, which the agent as PID 1
			// ignores, grace, SIGKILL); kwok removes it at once, so the
			// agent dies at once.
			_ = cmd.Process.Kill()
			<-exited
		}
		a.mu.Lock()
		delete(a.procs, pod.Name+string(pod.UID))
		a.mu.Unlock()
	})
	return nil
}

func (a *agents) stopAll() {
	a.mu.Lock()
	for _, cmd := range a.procs {
		_ = cmd.Process.Kill()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// agentInfo asks the agent on ip for its info with token, over TLS with
// conf (nil: plain TCP).
func agentInfo(ctx context.Context, ip, token string, conf *tls.Config) error {
	c := agent.NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(kube.AgentPort)))
		if err != nil || conf == nil {
			return conn, err
		}
		tc := tls.Client(conn, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}, token)
	defer c.Close()
	_, err := c.Info(ctx)
	return err
}

// pinnedTLS is a client configuration that trusts the agent certificate
// certPEM alone, as the runtime's does.
func pinnedTLS(t testing.TB, certPEM []byte) *tls.Config {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		t.Fatalf("the secret's certificate %q does not parse", certPEM)
	}
	return &tls.Config{RootCAs: pool, ServerName: "agent2env-agent", MinVersion: tls.VersionTLS13}
}

// podCgroups makes the cgroups of a sandbox's agent, as a container
// runtime would: a directory named name under agent2env-kubetest in the
// hierarchies of the controllers whose counters the agent reports.
func podCgroups(name string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, ctrl := range []string{"cpuacct", "memory", "pids"} {
		var at string
		for _, m := range mounts {
			v1 := m.FSType == "cgroup" && slices.Contains(strings.Split(m.VFSOptions, ","), ctrl)
			if v1 || at == "" && m.FSType == "cgroup2" {
				at = m.Mountpoint
			}
			if v1 {
				break
			}
		}
		if at == "" {
			return nil, fmt.Errorf("no cgroup hierarchy has the %s controller", ctrl)
		}
		dir := filepath.Join(at, "agent2env-kubetest", name)
		if slices.Contains(dirs, dir) {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// removeCgroups removes the cgroups of an agent that has exited; the
// kernel may take a moment to let go of its processes.
func removeCgroups(t testing.TB, dirs []string) {
	for _, dir := range dirs {
		var err error
		for range 50 {
			if err = os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("remove agent cgroup: %v", err)
		}
		_ = os.Remove(filepath.Dir(dir)) // the last one out; busy while others run
	}
}

// joinCgroups moves this process into the cgroup directories dirs (':'
// separated) and makes the cgroup filesystems visible below root,
// read-only, as a container sees them.
func joinCgroups(root, dirs string) error {
	for _, dir := range strings.Split(dirs, ":") {
		if dir == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	dst := filepath.Join(root, "sys/fs/cgroup")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/sys/fs/cgroup", dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind cgroups: %w", err)
	}
	return nil
}
