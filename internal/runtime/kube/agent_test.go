package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

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

func TestMain(m *testing.M) {
	if root := os.Getenv(envAgentRoot); root != "" {
		if err := runAgent(root); err != nil {
			fmt.Fprintln(os.Stderr, "kube test agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
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
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	cwd := os.Getenv("KUBE_TEST_AGENT_CWD")
	if err := os.Chdir(cwd); err != nil {
		return err
	}
	os.Unsetenv(envAgentRoot)
	os.Unsetenv("KUBE_TEST_AGENT_CWD")
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
	cmd := exec.Command(self)
	cmd.Env = append(env, envAgentRoot+"="+root, "KUBE_TEST_AGENT_CWD="+c.WorkingDir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	a.mu.Lock()
	a.procs[pod.Name+string(pod.UID)] = cmd
	a.mu.Unlock()
	exited := make(chan struct{})
	a.wg.Go(func() {
		_ = cmd.Wait()
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

// agentInfo asks the agent on ip for its info with token.
func agentInfo(ctx context.Context, ip, token string) error {
	c := agent.NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(kube.AgentPort)))
	}, token)
	defer c.Close()
	_, err := c.Info(ctx)
	return err
}
