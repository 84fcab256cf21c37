package kubetest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
)

// TestNode runs real Pods on a real node from the loopback registry: one
// serving HTTP, reached on its Pod IP, through kubectl exec and through
// kubectl port-forward; one with the sandbox's security context and
// limits, checked from inside. Then it checks that the node's cleanup
// left nothing behind.
func TestNode(t *testing.T) {
	var dir, bridge, cgroupRoot string
	t.Run("pods", func(t *testing.T) {
		n := StartNode(t, NodeOptions{PodPidsLimit: 100})
		dir, bridge, cgroupRoot = n.dir, n.bridge, n.cgroupRoot
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		t.Run("serve", func(t *testing.T) {
			pod := n.runPod(ctx, t, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: n.Image(BusyboxImage),
					Command:        []string{"sh", "-c", "echo hello from $HOSTNAME > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"},
					Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
				}}},
			})
			ip, err := netip.ParseAddr(pod.Status.PodIP)
			if err != nil || !n.PodCIDR.Contains(ip) {
				t.Fatalf("pod IP %q, want one in %s", pod.Status.PodIP, n.PodCIDR)
			}
			const want = "hello from web"
			if got, err := httpGet(ctx, "http://"+netip.AddrPortFrom(ip, 8080).String()+"/"); err != nil || got != want {
				t.Errorf("GET on the pod IP: %q, %v; want %q", got, err, want)
			}
			if got, err := n.Kubectl(ctx, "exec", "web", "--", "cat", "/tmp/index.html"); err != nil || strings.TrimSpace(string(got)) != want {
				t.Errorf("kubectl exec: %q, %v; want %q", got, err, want)
			}
			if got, err := portForwardGet(ctx, n.Cluster, "web", 8080); err != nil || got != want {
				t.Errorf("GET through kubectl port-forward: %q, %v; want %q", got, err, want)
			}
		})

		t.Run("restricted", func(t *testing.T) {
			pod := n.runPod(ctx, t, restrictedPod(n.RuntimetestImage(t)))
			// The Pod's own cgroup (Guaranteed: right under kubepods) has
			// the node's podPidsLimit; its container cannot see it.
			var podPids string
			for _, hierarchy := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} { // v1, v2
				b, err := os.ReadFile(filepath.Join(hierarchy, n.cgroupRoot, "kubepods", "pod"+string(pod.UID), "pids.max"))
				if err == nil {
					podPids = strings.TrimSpace(string(b))
					break
				}
			}
			if podPids != "100" {
				t.Errorf("the pod's cgroup's pids.max: %q, want the node's podPidsLimit, 100", podPids)
			}
			sh := func(script string) (string, error) {
				out, err := n.Kubectl(ctx, "exec", "restricted", "--", "sh", "-c", script)
				return strings.TrimSpace(string(out)), err
			}
			got := map[string]string{}
			for key, script := range map[string]string{
				"uid":          "id -u",
				"gid":          "id -g",
				"capabilities": "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status | tr -s ' \t' ' '",
				"noNewPrivs":   "grep NoNewPrivs /proc/self/status | tr -s ' \t' ' '",
				"seccomp":      "grep '^Seccomp:' /proc/self/status | tr -s ' \t' ' '",
				"rootfs":       "touch /probe 2>&1; echo $?",
				// no_new_privs: the setuid bit gives nothing.
				"setuid": "stat -c '%a %u' " + runtimetest.SetuidProbePath + " && " + runtimetest.SetuidProbePath + " ids",
				"tmp":    "touch /tmp/probe && echo writable",
				// cgroup v2 or v1, whichever the node has.
				"memory": "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
				"cpu":    "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)",
			} {
				out, err := sh(script)
				if err != nil {
					t.Errorf("%s: %v", key, err)
				}
				got[key] = out
			}
			zero := "0000000000000000"
			want := map[string]string{
				"uid": "1000", "gid": "1000",
				"capabilities": fmt.Sprintf("CapPrm: %s\nCapEff: %s\nCapBnd: %s", zero, zero, zero),
				"noNewPrivs":   "NoNewPrivs: 1",
				"seccomp":      "Seccomp: 2",
				"rootfs":       "touch: /probe: Read-only file system\n1",
				"setuid":       "4755 0\n1000 1000 1000 1000",
				"tmp":          "writable",
				"memory":       "67108864",
				"cpu":          "50000 100000",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("inside the restricted pod (-want +got):\n%s", diff)
			}
		})
	})
	if dir == "" {
		return // skipped, or failed before the node started
	}
	if procs := processesMentioning(dir); len(procs) > 0 {
		t.Errorf("processes left after the node stopped:\n%s", strings.Join(procs, "\n"))
	}
	if out, err := exec.Command("ip", "link", "show", bridge).CombinedOutput(); err == nil {
		t.Errorf("the bridge is left: %s", out)
	}
	points, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range points {
		if _, err := os.Stat(filepath.Join(mp, cgroupRoot)); err == nil {
			t.Errorf("the cgroup %s is left", filepath.Join(mp, cgroupRoot))
		}
	}
}

// TestNodeSweep checks that the node's cleanup removes what a kubelet
// that died left running, and says what it had to remove: a Pod's
// containers and its network namespace.
func TestNodeSweep(t *testing.T) {
	n := StartNode(t, NodeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n.runPod(ctx, t, restrictedPod(n.Image(BusyboxImage)))
	sandboxes := n.sandboxes()
	if len(sandboxes) != 1 {
		t.Fatalf("the pod's sandboxes: %v, want one", sandboxes)
	}
	var id, netns string
	for id, netns = range sandboxes {
		break
	}
	for _, p := range n.procs {
		if p.name == "kubelet" {
			p.stop()
		}
	}
	rec := &recordTB{TB: t}
	n.stop(rec)
	// What the CNI plugins keep of the sandbox's network, and the socket
	// of its shim, the sweep killed.
	leak := regexp.MustCompile(regexp.QuoteMeta("kubetest: the node left pod sandbox "+id+" not torn down: network namespace "+netns+
		", CNI result /var/lib/cni/results/cni-loopback-"+id+"-lo, CNI result /var/lib/cni/results/kubetest-"+id+"-eth0, shim socket /run/containerd/s/") +
		`[0-9a-f]{64} behind$`)
	if len(rec.errors) != 1 || !leak.MatchString(rec.errors[0]) {
		t.Errorf("the node's cleanup said %q, want one error matching %s", rec.errors, leak)
	}
	if procs := processesMentioning(n.dir); len(procs) > 0 {
		t.Errorf("processes left after the node stopped:\n%s", strings.Join(procs, "\n"))
	}
	for _, path := range []string{netns, "/var/lib/cni/results/kubetest-" + id + "-eth0"} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s is left", path)
		}
	}
}

// recordTB records the errors reported to it instead of failing the test.
type recordTB struct {
	testing.TB
	errors []string
}

func (r *recordTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// restrictedPod is a Pod with the security context and limits the kube
// runtime gives a sandbox: non-root, read-only root but for an emptyDir
// /tmp, no capabilities, no privilege escalation, RuntimeDefault seccomp.
func restrictedPod(image string) *corev1.Pod {
	limits := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("500m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "restricted", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](1000),
				RunAsGroup:     ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "sandbox", Image: image,
				Command:   []string{"sleep", "inf"},
				Resources: corev1.ResourceRequirements{Requests: limits, Limits: limits},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// runPod creates pod and waits for it to be Ready.
func (n *Node) runPod(ctx context.Context, t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	start := time.Now()
	if _, err := n.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	if err := n.waitFor(ctx, "pod "+pod.Name+" to be Ready", func(ctx context.Context) error {
		var err error
		if got, err = n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if isReady(got) {
			return nil
		}
		return fmt.Errorf("phase %s, %v", got.Status.Phase, got.Status.ContainerStatuses)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s Ready in %v", pod.Name, time.Since(start).Round(time.Millisecond))
	return got
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(b)), err
}

// portForwardGet runs kubectl port-forward to the pod's port and GETs /
// through it.
func portForwardGet(ctx context.Context, c *Cluster, pod string, port int) (string, error) {
	addr, stop, err := portForward(ctx, c, pod, port)
	if err != nil {
		return "", err
	}
	defer stop()
	return httpGet(ctx, "http://"+addr+"/")
}

// portForward starts kubectl port-forward to the pod's port and returns
// the local address it listens on.
func portForward(ctx context.Context, c *Cluster, pod string, port int) (addr string, stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), "--kubeconfig", c.Kubeconfig,
		"port-forward", "pod/"+pod, "--address=127.0.0.1", fmt.Sprintf(":%d", port))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return "", nil, err
	}
	stop = func() {
		cancel()
		_ = cmd.Wait()
	}
	buf := make([]byte, 256)
	k, err := out.Read(buf)
	m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) ->`).FindSubmatch(buf[:k])
	if m == nil {
		stop()
		return "", nil, fmt.Errorf("kubectl port-forward said %q, %v: %s", buf[:k], err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return string(m[1]), stop, nil
}
