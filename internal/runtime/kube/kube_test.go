package kube_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/runtime/kube/kubetest"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/sandbox"
)

const (
	namespace  = metav1.NamespaceDefault
	agentImage = "kubetest.invalid/agent2env:1"
	testImage  = "kubetest.invalid/sandbox:1"
)

// tierA is a kubetest cluster whose Pods run real agents.
type tierA struct {
	c      *kubetest.Cluster
	agents *agents
	owner  string
	// ns and rest are where and as whom runtimes work: default and the
	// cluster's admin unless a test changes them.
	ns   string
	rest *rest.Config
}

// startTierA starts the cluster, of one node or nodes[0]; its agents need
// root (namespaces, mounts, chroot).
func startTierA(t testing.TB, nodes ...int) *tierA {
	runtimetest.RequiresRoot(t)
	a := newAgents(t)
	var (
		mu     sync.Mutex
		client kubernetes.Interface
	)
	a.client = func() kubernetes.Interface {
		mu.Lock()
		defer mu.Unlock()
		return client
	}
	opts := kubetest.Options{OnPod: a.onPod, ForwardPorts: []int32{kube.AgentPort}}
	if len(nodes) > 0 {
		opts.Nodes = nodes[0]
	}
	c := kubetest.Start(t, opts)
	mu.Lock()
	client = c.Client
	mu.Unlock()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &tierA{c: c, agents: a, owner: "kubetest-" + hex.EncodeToString(b), ns: namespace, rest: c.Config}
}

func (k *tierA) runtime(t testing.TB, connect string) *kube.Runtime {
	t.Helper()
	return k.runtimeWith(t, kube.Config{Connect: connect})
}

// runtimeWith is runtime with more of cfg: its Connect, Services and
// Egress.
func (k *tierA) runtimeWith(t testing.TB, cfg kube.Config) *kube.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := kube.New(ctx, kube.Config{
		Rest: k.rest, Namespace: k.ns, Owner: k.owner, AgentImage: agentImage,
		Connect: cfg.Connect, StartTimeout: time.Minute, Services: cfg.Services, Egress: cfg.Egress,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

func (k *tierA) factory(connect string) runtimetest.Factory {
	return runtimetest.Factory{
		// With the daemon's services and an egress proxy: every sandbox
		// is served, and egress policies are accepted.
		New: func(t *testing.T) sandbox.Runtime {
			return k.runtimeWith(t, kube.Config{Connect: connect, Services: &fakeServices{}, Egress: &fakeEgress{}})
		},
		NewSpec: func(_ *testing.T, id string) *sandbox.Spec {
			return &sandbox.Spec{ID: id, Image: testImage, Cwd: sandbox.WorkDir}
		},
		Kill: func(t *testing.T, rt sandbox.Runtime, id string) { k.evict(t, rt, id) },
	}
}

// evict evicts the sandbox's Pod, behind the runtime's back, and waits
// for the runtime to notice.
func (k *tierA) evict(t *testing.T, rt sandbox.Runtime, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kubetest.EvictSandbox(t, k.c.Client, k.ns, k.pod(ctx, t, id).Name, rt, id)
}

// pod returns the Pod of sandbox id.
func (k *tierA) pod(ctx context.Context, t testing.TB, id string) *corev1.Pod {
	t.Helper()
	pods, err := k.c.Client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{
		LabelSelector: kube.LabelSandbox + "=" + id + "," + kube.LabelOwner + "=" + k.owner,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("sandbox %s has %d pods, want 1", id, len(pods.Items))
	}
	return &pods.Items[0]
}

// TestContract runs the runtime's conformance suite against a real API
// server, with kwok as the kubelet and real agents on the Pods' loopback
// IPs, reached directly.
func TestContract(t *testing.T) {
	k := startTierA(t)
	runtimetest.RunContract(t, k.factory(kube.ConnectDirect))
}

// TestContractLeastPrivilege runs the conformance suite as the daemon's
// service account of deploy/kubernetes, in its namespace: the RBAC there
// is enough for the runtime.
func TestContractLeastPrivilege(t *testing.T) {
	k := startTierA(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deploy := filepath.Join("..", "..", "..", "deploy", "kubernetes", "base")
	for _, f := range []string{"namespace.yaml", "rbac.yaml"} {
		if _, err := k.c.Kubectl(ctx, "apply", "-n", "agent2env", "-f", filepath.Join(deploy, f)); err != nil {
			t.Fatal(err)
		}
	}
	k.ns = "agent2env"
	k.rest = rest.CopyConfig(k.c.Config)
	k.rest.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:agent2env:agent2env",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:agent2env", "system:authenticated"},
	}
	runtimetest.RunContract(t, k.factory(kube.ConnectDirect))
}

// TestPortForward runs a sandbox reached through the API server's
// port-forward: commands, files, and the agent's dial upgrade.
func TestPortForward(t *testing.T) {
	k := startTierA(t)
	rt := k.runtime(t, kube.ConnectPortForward)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sp := &sandbox.Spec{ID: "pf1", Image: testImage}
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	defer rt.Delete(context.Background(), sp.ID)
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	c, err := rt.Agent(ctx, sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out strings.Builder
	if _, err := c.Upload(ctx, "/workspace/hello", 0o644, strings.NewReader("through the api server")); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, agentExec("cat /workspace/hello; id -u"), nil, &out, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec through port-forward: %+v, %v", res, err)
	}
	if want := "through the api server1000\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}

	// A port inside the sandbox, as the port gateway reaches it: here the
	// sandbox's loopback is the host's, where this echo server listens.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	conn, err := c.DialPort(ctx, l.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Whether a half-close crosses the port-forward is the kubelet's
	// business: read what was sent, within a deadline (which ends the
	// connection).
	const ping = "ping through port-forward"
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, ping); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(ping))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != ping {
		t.Errorf("echo through DialPort: %q, %v", got, err)
	}
	// A cancelled dial ends, as the gateway needs of an abandoned request.
	cancelled, cancelDial := context.WithCancel(ctx)
	cancelDial()
	if _, err := c.DialPort(cancelled, l.Addr().(*net.TCPAddr).Port); !errors.Is(err, context.Canceled) {
		t.Errorf("DialPort with a cancelled context: %v", err)
	}
}

// TestObjects checks the objects of a started sandbox, and that its agent
// refuses whoever does not hold its token.
func TestObjects(t *testing.T) {
	k := startTierA(t)
	rt := k.runtime(t, kube.ConnectDirect)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sp := &sandbox.Spec{
		ID: "obj1", Image: testImage, Env: []string{"A=1", "HOME=/home/other"},
		Resources: sandbox.Resources{MilliCPU: 1500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, Pids: 100},
		Labels:    map[string]string{"tenant": "t1", "not a label key": "kept as data"},
	}
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	pod := k.pod(ctx, t, "obj1")
	main := pod.Spec.Containers[0]
	init := pod.Spec.InitContainers[0]
	got := map[string]any{
		"labels":        pod.Labels,
		"gates":         len(pod.Spec.SchedulingGates),
		"image":         main.Image,
		"agentImage":    init.Image,
		"command":       main.Command,
		"nonRoot":       *pod.Spec.SecurityContext.RunAsNonRoot,
		"uid":           *pod.Spec.SecurityContext.RunAsUser,
		"seccomp":       string(pod.Spec.SecurityContext.SeccompProfile.Type),
		"escalation":    *main.SecurityContext.AllowPrivilegeEscalation,
		"readOnlyRoot":  *main.SecurityContext.ReadOnlyRootFilesystem,
		"capsDropped":   main.SecurityContext.Capabilities.Drop,
		"initReadOnly":  *init.SecurityContext.ReadOnlyRootFilesystem,
		"initCommand":   init.Command,
		"initRestart":   string(*init.RestartPolicy),
		"initHook":      init.Lifecycle.PostStart.Exec.Command,
		"pullPolicy":    string(main.ImagePullPolicy),
		"limits":        main.Resources.Limits.DeepCopy(),
		"requests":      main.Resources.Requests.DeepCopy(),
		"serviceToken":  *pod.Spec.AutomountServiceAccountToken,
		"serviceLinks":  *pod.Spec.EnableServiceLinks,
		"restartPolicy": string(pod.Spec.RestartPolicy),
	}
	mounts := map[string]bool{}
	for _, m := range main.VolumeMounts {
		mounts[m.MountPath] = m.ReadOnly
	}
	got["mounts"] = mounts
	env := map[string]string{}
	for _, e := range main.Env {
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			env[e.Name] = "from secret " + ref.Name + " " + ref.Key
			if ref.Optional != nil && *ref.Optional {
				env[e.Name] += " (optional)"
			}
			continue
		}
		env[e.Name] = e.Value
	}
	got["env"] = env
	limits := corev1.ResourceList{
		corev1.ResourceCPU:              mustQuantity("1500m"),
		corev1.ResourceMemory:           mustQuantity("256Mi"),
		corev1.ResourceEphemeralStorage: mustQuantity("1088Mi"), // the disk and the agent's binary
	}
	want := map[string]any{
		"labels":        map[string]string{kube.LabelSandbox: "obj1", kube.LabelOwner: k.owner, "app.kubernetes.io/managed-by": "agent2env"},
		"gates":         0,
		"image":         testImage,
		"agentImage":    agentImage,
		"command":       []string{"/.agent2env/agent2env-agent", "--uid=-1", "--gid=-1", "--cwd=/workspace"},
		"nonRoot":       true,
		"uid":           int64(1000),
		"seccomp":       "RuntimeDefault",
		"escalation":    false,
		"readOnlyRoot":  true,
		"capsDropped":   []corev1.Capability{"ALL"},
		"initReadOnly":  true,
		"initCommand":   []string{"/usr/local/bin/agent2env-agent", "hold"},
		"initRestart":   "Always",
		"initHook":      []string{"/usr/local/bin/agent2env-agent", "install", "/.agent2env/agent2env-agent"},
		"pullPolicy":    "IfNotPresent",
		"limits":        limits,
		"requests":      limits,
		"serviceToken":  false,
		"serviceLinks":  false,
		"restartPolicy": "Never",
		"mounts":        map[string]bool{"/.agent2env": true, "/workspace": false, "/tmp": false, "/home/sandbox": false},
		"env": map[string]string{
			"HOME": "/home/other", "A": "1", "AGENT2ENV_AGENT_LISTEN": ":7070",
			"AGENT2ENV_AGENT_KUBELET_ENV": "", // the sandbox sets none of the kubelet's variables
			"AGENT2ENV_AGENT_TOKEN":       "from secret a2e-obj1 token",
			"AGENT2ENV_AGENT_TLS_CERT":    "from secret a2e-obj1 tls.crt (optional)",
			"AGENT2ENV_AGENT_TLS_KEY":     "from secret a2e-obj1 tls.key (optional)",
		},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b corev1.ResourceList) bool {
		if len(a) != len(b) {
			return false
		}
		for k, q := range a {
			if q.Cmp(b[k]) != 0 {
				return false
			}
		}
		return true
	})); diff != "" {
		t.Errorf("the sandbox's pod (-want +got):\n%s", diff)
	}

	np, err := k.c.Client.NetworkingV1().NetworkPolicies(namespace).Get(ctx, "a2e-obj1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	daemon := &metav1.LabelSelector{MatchLabels: kube.DefaultDaemonLabels}
	gotNP := map[string]any{
		"selects":      np.Spec.PodSelector.MatchLabels,
		"types":        np.Spec.PolicyTypes,
		"ingressFrom":  np.Spec.Ingress[0].From[0].PodSelector,
		"ingressPorts": np.Spec.Ingress[0].Ports[0].Port.IntValue(),
		"ingressRules": len(np.Spec.Ingress),
		"egressRules":  len(np.Spec.Egress),
	}
	wantNP := map[string]any{
		"selects":      map[string]string{kube.LabelSandbox: "obj1", kube.LabelOwner: k.owner},
		"types":        []networkingPolicyType{"Ingress", "Egress"},
		"ingressFrom":  daemon,
		"ingressPorts": kube.AgentPort,
		"ingressRules": 1,
		"egressRules":  0, // none: the daemon dials in
	}
	if diff := cmp.Diff(wantNP, gotNP); diff != "" {
		t.Errorf("the sandbox's network policy (-want +got):\n%s", diff)
	}

	st, err := rt.Status(ctx, sp.ID)
	if err != nil || st.State != sandbox.StateRunning {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if diff := cmp.Diff(sp.Labels, st.Labels); diff != "" {
		t.Errorf("labels kept (-want +got):\n%s", diff)
	}
	ip := k.pod(ctx, t, "obj1").Status.PodIP
	sec, err := k.c.Client.CoreV1().Secrets(namespace).Get(ctx, "a2e-obj1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pinned := pinnedTLS(t, sec.Data["tls.crt"])
	other, err := kube.NewAgentSecretData()
	if err != nil {
		t.Fatal(err)
	}
	token := string(sec.Data["token"])
	for _, tc := range []struct {
		name    string
		token   string
		tls     *tls.Config
		wantErr func(error) bool
	}{
		{"no token", "", pinned, func(err error) bool { return errors.Is(err, errdefs.ErrUnauthenticated) }},
		{"wrong token", "not-the-token", pinned, func(err error) bool { return errors.Is(err, errdefs.ErrUnauthenticated) }},
		{"plain TCP, the token in the clear", token, nil, func(err error) bool { return err != nil }},
		{"another sandbox's certificate", token, pinnedTLS(t, other["tls.crt"]), func(err error) bool {
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &unknown)
		}},
		{"the secret's token over TLS", token, pinned, func(err error) bool { return err == nil }},
	} {
		if err := agentInfo(ctx, ip, tc.token, tc.tls); !tc.wantErr(err) {
			t.Errorf("agent asked with %s: %v", tc.name, err)
		}
	}

	if err := rt.Delete(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	for _, get := range []func() error{
		func() error {
			_, err := k.c.Client.CoreV1().Pods(namespace).Get(ctx, "a2e-obj1", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := k.c.Client.CoreV1().Secrets(namespace).Get(ctx, "a2e-obj1", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := k.c.Client.NetworkingV1().NetworkPolicies(namespace).Get(ctx, "a2e-obj1", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("an object of the deleted sandbox: %v, want not found", err)
		}
	}
}

// TestReasons checks that a sandbox whose Pod is evicted, or whose agent
// was OOM-killed, is stopped with the reason, and starts again.
func TestReasons(t *testing.T) {
	k := startTierA(t)
	rt := k.runtime(t, kube.ConnectDirect)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range []string{"evicted", "oom"} {
		if err := rt.Create(ctx, &sandbox.Spec{ID: id, Image: testImage}); err != nil {
			t.Fatal(err)
		}
		defer rt.Delete(context.Background(), id)
		if err := rt.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	k.evict(t, rt, "evicted")

	pod := k.pod(ctx, t, "oom")
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
	if _, err := k.c.Client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"evicted": "EvictionByEvictionAPI", "oom": "OOMKilled"} {
		var (
			st  sandbox.Status
			err error
		)
		for {
			if st, err = rt.Status(ctx, id); err != nil {
				t.Fatal(err)
			}
			if st.State == sandbox.StateStopped || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st.State != sandbox.StateStopped || !strings.Contains(st.Reason, want) {
			t.Errorf("%s: state %s, reason %q; want stopped, the reason naming %s", id, st.State, st.Reason, want)
		}
		if err := rt.Start(ctx, id); err != nil {
			t.Errorf("Start %s again: %v", id, err)
			continue
		}
		if st, err := rt.Status(ctx, id); err != nil || st.State != sandbox.StateRunning || st.Reason != "" {
			t.Errorf("%s started again: %+v, %v", id, st, err)
		}
	}
}

type networkingPolicyType = networkingv1.PolicyType

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func agentExec(script string) agent.ExecRequest {
	return agent.ExecRequest{Shell: script, Timeout: 30 * time.Second}
}

// TestAgentClient checks that Agent gives one client while the sandbox's
// Pod is the same, whose connection the next call reuses (a client per
// call dialled every time and left its connection open), and a new one
// for the Pod that replaces it.
func TestAgentClient(t *testing.T) {
	k := startTierA(t)
	rt := k.runtime(t, kube.ConnectDirect)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const id = "client1"
	if err := rt.Create(ctx, &sandbox.Spec{ID: id, Image: testImage}); err != nil {
		t.Fatal(err)
	}
	defer rt.Delete(context.Background(), id)
	execTrue := func() *agent.Client {
		t.Helper()
		c, err := rt.Agent(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"true"}}, nil, nil, nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec true: %+v, %v", res, err)
		}
		return c
	}
	if err := rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	first := execTrue()
	if again := execTrue(); again != first {
		t.Error("Agent gave another client for the same Pod")
	}
	if err := rt.Stop(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if replaced := execTrue(); replaced == first {
		t.Error("Agent gave the client of the replaced Pod")
	}
}
