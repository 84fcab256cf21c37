package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/bench/restcreate"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest/poolbench"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestNodeRuntime runs the whole runtimetest conformance suite (exec,
// files, limits, escapes) against the kubernetes runtime on a real node:
// real Pods, the agent copied in from the agent2env image, reached on the
// Pod IP. What Kubernetes enforces its own way the runtime declares in
// its Capabilities, and the suite checks it that way: a Pod's network
// interface under its NetworkPolicy, enforced by the node's firewall,
// reaches none of n.EgressTargets. The
// node's podPidsLimit is the suite's process limit: Kubernetes has no
// per-Pod one.
func TestNodeRuntime(t *testing.T) {
	n := StartNode(t, NodeOptions{PodPidsLimit: 64})
	agentImage, testImage := n.SelfImage(t), n.RuntimetestImage(t)
	owner := newOwner()
	newRuntime := func(t *testing.T) sandbox.Runtime {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rt, err := kube.New(ctx, kube.Config{
			Rest: n.Config, Namespace: ns, Owner: owner, AgentImage: agentImage,
			StartTimeout: 2 * time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rt.Close)
		return rt
	}
	newSpec := func(_ *testing.T, id string) *sandbox.Spec {
		return &sandbox.Spec{ID: id, Image: testImage, Cwd: sandbox.WorkDir}
	}
	runtimetest.Run(t, runtimetest.Factory{
		New:     newRuntime,
		NewSpec: newSpec,
		Kill: func(t *testing.T, rt sandbox.Runtime, id string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pods, err := n.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelSandbox + "=" + id})
			if err != nil || len(pods.Items) != 1 {
				t.Fatalf("the pod of %s: %v (%d pods)", id, err, len(pods.Items))
			}
			EvictSandbox(t, n.Client, ns, pods.Items[0].Name, rt, id)
		},
		EgressTargets: n.EgressTargets(t, testImage),
	})
	// The sandboxes above ran in a namespace enforcing the restricted Pod
	// Security Standard; this proves the API server enforces it there, so
	// their admission meant something.
	t.Run("RestrictedNamespace", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// A Pod that says nothing of its security: root may be its user,
		// it keeps the default capabilities, and no seccomp profile.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "unrestricted"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: n.Image(BusyboxImage), Command: []string{"true"},
			}}},
		}
		_, err := n.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
			t.Errorf("a Pod without a security context in %s: %v; want refused by the restricted Pod Security Standard", ns, err)
		}
	})
	t.Run("Logs", func(t *testing.T) {
		rt := newRuntime(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sp := newSpec(t, "logs"+newOwner()[len("kubetest-"):])
		if err := rt.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Delete(context.Background(), sp.ID) })
		if err := rt.Start(ctx, sp.ID); err != nil {
			t.Fatal(err)
		}
		lr := rt.(sandbox.LogReader)
		logs, err := lr.Logs(ctx, sp.ID, 1<<20)
		if err != nil || !strings.Contains(string(logs), "agent serving") {
			t.Errorf("Logs of a running sandbox = %q, %v; want the agent's start line", logs, err)
		}
		if tail, err := lr.Logs(ctx, sp.ID, 10); err != nil || len(tail) != 10 || !strings.HasSuffix(string(logs), string(tail)) {
			t.Errorf("Logs limited to 10 bytes = %q, %v; want the last 10 of %q", tail, err, logs)
		}
	})
	// A sandbox with CPU and memory limits is a Guaranteed Pod (the Pod's
	// own resources), so the kubelet does not give its agent a Burstable
	// container's score of about 1000 (997 here for 64 MiB), next to the
	// commands' 1000, where a memory bomb of small allocators could have the
	// agent killed. The node's containerd keeps scores at least at its own
	// (restrict_oom_score_adj), so the agent's -997 is seen as that.
	t.Run("GuaranteedPod", func(t *testing.T) {
		rt := newRuntime(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sp := newSpec(t, "qos"+newOwner()[len("kubetest-"):])
		sp.Resources = sandbox.Resources{MilliCPU: 500, MemoryBytes: 64 << 20}
		if err := rt.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Delete(context.Background(), sp.ID) })
		if err := rt.Start(ctx, sp.ID); err != nil {
			t.Fatal(err)
		}
		pods, err := n.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelSandbox + "=" + sp.ID})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("the pod of %s: %v (%d pods)", sp.ID, err, len(pods.Items))
		}
		if qos := pods.Items[0].Status.QOSClass; qos != corev1.PodQOSGuaranteed {
			t.Errorf("QoS class %s, want %s", qos, corev1.PodQOSGuaranteed)
		}
		c, err := rt.Agent(ctx, sp.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		res, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"cat", "/proc/1/oom_score_adj", "/proc/self/oom_score_adj"}}, nil, &out, io.Discard)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %+v, %v", res, err)
		}
		var agentScore, commandScore int
		if _, err := fmt.Sscan(out.String(), &agentScore, &commandScore); err != nil {
			t.Fatalf("scores %q: %v", out.String(), err)
		}
		if commandScore != 1000 || agentScore >= 997 {
			t.Errorf("oom_score_adj: agent %d, command %d; want the command at 1000 and the agent below a Burstable container's 997", agentScore, commandScore)
		}
	})
	// The daemon's check of the cluster's NetworkPolicies, with the
	// node's firewall and then without it: last, as it stops the firewall.
	t.Run("PolicyCheck", func(t *testing.T) {
		rt := newRuntime(t).(*kube.Runtime)
		for _, tc := range []struct {
			firewall bool
			want     kube.Enforcement
		}{{true, kube.PoliciesEnforced}, {false, kube.PoliciesNotEnforced}} {
			if !tc.firewall {
				n.StopFirewall(t)
			}
			start := time.Now()
			got, err := rt.CheckNetworkPolicies(context.Background())
			if err != nil || got != tc.want {
				t.Fatalf("with the firewall %v: CheckNetworkPolicies = %v, %v; want %v", tc.firewall, got, err, tc.want)
			}
			t.Logf("with the firewall %v: %v in %v", tc.firewall, got, time.Since(start).Round(time.Millisecond))
		}
	})
}

// The namespace of the sandboxes of the tests on a node.
const ns = SandboxNamespace

// newOwner returns an owner label of its own for a test's runtimes.
func newOwner() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "kubetest-" + hex.EncodeToString(b)
}

// BenchmarkNodeRuntime is runtimetest.Benchmark on a real node: "start"
// is Pod admission (Create, Start: the gate removed) to the agent
// answering on the Pod IP, its image pulled by the node already; compare
// with the oci package's BenchmarkRuntime in the same run (make bench):
//
//	go test -run '^$' -bench Runtime ./internal/runtime/oci/ ./internal/runtime/kube/kubetest/
//
// "phases" then says where a start's time goes, and "rest" is the same
// start through the daemon ($AGENT2ENV_BIN serve --runtime kubernetes on
// this host, against this node): make bench's create → ready through
// REST, comparable with the oci runtime's (internal/bench).
func BenchmarkNodeRuntime(b *testing.B) {
	n, rt, agentImage, testImage := benchNode(b)
	newSpec := func(id string) *sandbox.Spec {
		return &sandbox.Spec{ID: id, Image: testImage, Cwd: sandbox.WorkDir}
	}
	runtimetest.Benchmark(b, rt, newSpec)
	b.Run("phases", func(b *testing.B) { benchPhases(b, n, rt, newSpec) })
	b.Run("rest", func(b *testing.B) { benchREST(b, n, agentImage, testImage) })
}

// benchREST times what internal/bench times for the oci runtime as
// "sandbox create → ready (REST)" (restcreate.Ready: POST
// /api/v1/sandboxes with the image alone, until the sandbox is running,
// i.e. its Pod's agent answered), through a daemon serving the kubernetes
// runtime on node n, reaching the Pods directly on their IPs as the
// runtime's own benchmark does. One sandbox is made before the timer (the
// daemon's first; the image is pulled by the node already); each is
// deleted, untimed, before the next. It reports p50-ms and p90-ms.
func benchREST(b *testing.B, n *Node, agentImage, image string) {
	base := serveKube(b, n, agentImage)
	hc := &http.Client{}
	id, err := restcreate.Ready(hc, base, image)
	if err != nil {
		b.Fatal(err)
	}
	if err := restcreate.Delete(hc, base, id); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for b.Loop() {
		t0 := time.Now()
		id, err := restcreate.Ready(hc, base, image)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		b.StopTimer()
		if err := restcreate.Delete(hc, base, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	runtimetest.ReportPercentiles(b, took)
}

// serveKube starts $AGENT2ENV_BIN serve --runtime kubernetes on this host
// with n's kubeconfig, its sandboxes' Pods in namespace ns, the agent
// copied from agentImage (n.SelfImage), and the flags internal/bench
// gives its daemons; it returns the daemon's base URL once it is ready.
// The test's cleanup stops it (its sandboxes deleted by then).
func serveKube(b testing.TB, n *Node, agentImage string) string {
	b.Helper()
	dir := b.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Getenv(BinEnvVar), "serve", "--runtime", "kubernetes", "--kubeconfig", n.Kubeconfig,
		"--kube-namespace", ns, "--kube-connect", "direct", "--kube-agent-image", agentImage,
		"--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--cache-dir", filepath.Join(dir, "cache"),
		"--log-level", "warn", "--cpu-overcommit", "1000", "--memory-overcommit", "1000", "--prebuild-images=false")
	cmd.Stdout, cmd.Stderr = logf, logf
	exited, err := testenv.StartBound(cmd, syscall.SIGKILL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	log := func() string { out, _ := os.ReadFile(logf.Name()); return string(out) }
	base := "http://" + addr
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-exited:
			b.Fatalf("the daemon exited: %v\n%s", cmd.ProcessState, log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("the daemon was not ready within 2 minutes:\n%s", log())
		}
	}
}

// benchPhases starts sandboxes as runtimetest.Benchmark's "start" does and
// reports the median time from Create to each step of the Pod's start as
// the API server's watch delivers it (the kubelet posts its status after
// each step): scheduled, the Pod's sandbox ready (network namespace, CNI:
// PodReadyToStartContainers), the agent copied in (the agent container
// running, its start hook done), the sandbox's container running, and
// Start returned (the agent answered).
func benchPhases(b *testing.B, n *Node, rt *kube.Runtime, newSpec func(id string) *sandbox.Spec) {
	ctx := context.Background()
	w, err := n.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	condition := func(typ corev1.PodConditionType) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			for _, c := range p.Status.Conditions {
				if c.Type == typ {
					return c.Status == corev1.ConditionTrue
				}
			}
			return false
		}
	}
	running := func(list func(*corev1.Pod) []corev1.ContainerStatus) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			cs := list(p)
			return len(cs) > 0 && cs[0].State.Running != nil
		}
	}
	phases := []struct {
		metric string
		done   func(*corev1.Pod) bool
	}{
		{"scheduled-ms", condition(corev1.PodScheduled)},
		{"pod-sandbox-ms", condition(corev1.PodReadyToStartContainers)},
		{"agent-copied-ms", running(func(p *corev1.Pod) []corev1.ContainerStatus { return p.Status.InitContainerStatuses })},
		{"running-ms", running(func(p *corev1.Pod) []corev1.ContainerStatus { return p.Status.ContainerStatuses })},
	}
	var (
		mu   sync.Mutex
		id   string
		t0   time.Time
		seen = map[string]bool{}
		took = map[string][]time.Duration{}
	)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			for _, ph := range phases {
				if p.Labels[kube.LabelSandbox] == id && !seen[ph.metric] && ph.done(p) {
					seen[ph.metric] = true
					took[ph.metric] = append(took[ph.metric], time.Since(t0))
				}
			}
			mu.Unlock()
		}
	}()
	for i := 0; b.Loop(); i++ {
		sp := newSpec(fmt.Sprintf("phases%d-%s", i, newOwner()[len("kubetest-"):]))
		mu.Lock()
		id, t0, seen = sp.ID, time.Now(), map[string]bool{}
		mu.Unlock()
		if err := rt.Create(ctx, sp); err != nil {
			b.Fatal(err)
		}
		if err := rt.Start(ctx, sp.ID); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		took["ready-ms"] = append(took["ready-ms"], time.Since(t0))
		mu.Unlock()
		if err := rt.Delete(ctx, sp.ID); err != nil {
			b.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for metric, ds := range took {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, metric)
	}
}

// BenchmarkNodeWarmPool is poolbench.Benchmark on a real node:
// claims from a warm pool of started Pods, and exec round trips in them;
// compare with the oci package's BenchmarkWarmPool in the same run (make
// bench).
func BenchmarkNodeWarmPool(b *testing.B) {
	_, rt, _, testImage := benchNode(b)
	poolbench.Benchmark(b, rt, testImage)
}

// benchNode starts a node and a runtime on it, and returns them, the
// agent2env image the runtime copies the agent from and the image of the
// runtimetest suite, both in the node's registry.
func benchNode(b *testing.B) (*Node, *kube.Runtime, string, string) {
	n := StartNode(b, NodeOptions{PodPidsLimit: 64})
	agentImage, testImage := n.SelfImage(b), n.RuntimetestImage(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := kube.New(ctx, kube.Config{Rest: n.Config, Namespace: ns, Owner: newOwner(), AgentImage: agentImage})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rt.Close)
	return n, rt, agentImage, testImage
}
