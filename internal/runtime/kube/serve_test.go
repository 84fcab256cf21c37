package kube_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// nonroot is the user the daemon runs as in deploy/kubernetes.
const nonroot = 65532

// daemonBinary puts the daemon into dir, which its user can enter (a
// checkout under a directory only root may enter, such as mktemp -d's,
// would not do): a copy of $AGENT2ENV_BIN, or a build.
func daemonBinary(t testing.TB, dir string) string {
	bin := filepath.Join(dir, "agent2env")
	if src := os.Getenv("AGENT2ENV_BIN"); src != "" {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	cmd := exec.Command("go", "build", "-o", bin, "../../../cmd/agent2env")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build agent2env: %v\n%s", err, out)
	}
	return bin
}

// TestServe runs the daemon as serve --runtime kubernetes, not as root,
// against the tier-A cluster from outside it (--kube-connect
// port-forward), and drives a sandbox through the REST API.
func TestServe(t *testing.T) {
	k := startTierA(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Not under t.TempDir(), which only root may enter.
	dir, err := os.MkdirTemp("", "a2e-kube-serve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := daemonBinary(t, dir)
	// The daemon's own kubeconfig, certificates inline, readable by it.
	kubeconfig, err := k.c.Kubectl(ctx, "config", "view", "--flatten", "--raw")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"data", "cache"} {
		if err := os.Mkdir(filepath.Join(dir, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"data", "cache", "kubeconfig"} {
		if err := os.Chown(filepath.Join(dir, p), nonroot, nonroot); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "serve", "--runtime", "kubernetes", "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--kube-namespace", k.ns, "--kube-connect", "port-forward", "--kube-agent-image", agentImage,
		"--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--cache-dir", filepath.Join(dir, "cache"))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot}, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the daemon exited: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("the daemon did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("the daemon's log:\n%s", log.String())
		}
	}()

	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	for c.Health(ctx) != nil {
		select {
		case err := <-exited:
			t.Fatalf("the daemon exited: %v\n%s", err, log.String())
		case <-ctx.Done():
			t.Fatalf("the daemon did not come up:\n%s", log.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	sb, err := c.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	if sb, err = c.Sandbox.WaitForReady(ctx, sb.ID, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res, err := c.Sandbox.Execute(ctx, sb.ID, api.ExecRequest{Command: []string{"sh", "-c", "echo hello from $(id -u)"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != "hello from 1000\n" {
		t.Errorf("exec: %+v", res)
	}
	if err := c.Sandbox.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	pods, err := k.c.Client.CoreV1().Pods(k.ns).List(ctx, listOwned("agent2env"))
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods of the daemon after delete: %v, %v", pods, err)
	}
}

func listOwned(owner string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: kube.LabelOwner + "=" + owner}
}

// TestOwnImage checks that a daemon in a Pod ($POD_NAME) gives sandbox
// Pods its own image as the agent image when none is set.
func TestOwnImage(t *testing.T) {
	k := startTierA(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The daemon's Pod, bound to a node nobody runs: it only has to exist.
	self := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent2env-daemon"},
		Spec: corev1.PodSpec{NodeName: "elsewhere", Containers: []corev1.Container{
			{Name: "agent2env", Image: "registry.test/team/agent2env:v9"},
			{Name: "sidecar", Image: "registry.test/other:1"},
		}},
	}
	if _, err := k.c.Client.CoreV1().Pods(k.ns).Create(ctx, self, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(kube.EnvPodName, self.Name)
	rt, err := runtime.New(ctx, kube.Name, runtime.Options{Settings: map[string]string{
		"kubernetes.kubeconfig": k.c.Kubeconfig, "kubernetes.namespace": k.ns, "kubernetes.owner": k.owner,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.(*kube.Runtime).Close)
	if err := rt.Create(ctx, &sandbox.Spec{ID: "own", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	defer rt.Delete(context.Background(), "own")
	if got := k.pod(ctx, t, "own").Spec.InitContainers[0].Image; got != "registry.test/team/agent2env:v9" {
		t.Errorf("agent image %q, want the daemon's own", got)
	}
}
