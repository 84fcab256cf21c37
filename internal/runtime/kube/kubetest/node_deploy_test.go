package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestNodeDeploy applies deploy/kubernetes to a real node, as an operator
// would (kubectl apply -k of an overlay naming the image in the node's
// registry), with a PersistentVolume for the daemon's claim, and checks
// that the daemon's Pod runs the agent2env image and answers /health,
// then creates a sandbox through its API, which the daemon runs as a Pod,
// runs a command and a stateful bash context in it, and a session whose
// sandbox, another Pod, is made on first use.
//
// Pods reach the API server at the node's HostIP, not through the
// kubernetes Service (no kube-proxy here): the overlay tells the daemon
// so, as its environment.
func TestNodeDeploy(t *testing.T) {
	n := StartNode(t, NodeOptions{})
	image, bash := n.SelfImage(t), n.BashImage(t)
	kubeRuntime := daemonHasKubeRuntime(t, os.Getenv(BinEnvVar))
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// The daemon's data claim binds to a hostPath volume: the node has
	// no provisioner.
	data := t.TempDir()
	if err := os.Chown(data, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "agent2env-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: data}},
		},
	}
	if _, err := n.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Kubectl(ctx, "apply", "-f", filepath.Join(root, "deploy", "kubernetes", "base", "namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	key := auth.NewKey()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "agent2env-api-keys", Namespace: "agent2env"},
		StringData: map[string]string{"keys": key + "\n"},
	}
	if _, err := n.Client.CoreV1().Secrets("agent2env").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	overlay := t.TempDir()
	env := ""
	for _, e := range n.APIServerEnv() {
		env += fmt.Sprintf("    - op: add\n      path: /spec/template/spec/containers/0/env/-\n      value: {name: %s, value: %q}\n", e.Name, e.Value)
	}
	if kubeRuntime {
		// The image the sandboxes' Pods copy the agent from: the same;
		// sessions' bash from a template of the node's bash image.
		for _, arg := range []string{"--kube-agent-image=" + image, "--context-templates=bash=" + bashTemplate} {
			env += fmt.Sprintf("    - op: add\n      path: /spec/template/spec/containers/0/args/-\n      value: %q\n", arg)
		}
	}
	name, tag, _ := strings.Cut(image, ":kubetest")
	// kustomize takes a base by a relative path only.
	base, err := filepath.Rel(overlay, filepath.Join(root, "deploy", "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: agent2env/agent2env
  newName: %s
  newTag: kubetest%s
patches:
- target: {kind: Deployment, name: agent2env}
  patch: |
%s`, base, name, tag, env)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := n.Kubectl(ctx, "apply", "-k", overlay); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	// The daemon's Pod: its image pulled from the node's registry, its
	// claim bound, its container started.
	var pod *corev1.Pod
	if err := n.waitFor(ctx, "the daemon's pod to start", func(ctx context.Context) error {
		pods, err := n.Client.CoreV1().Pods("agent2env").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=daemon"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d daemon pods", len(pods.Items))
		}
		pod = &pods.Items[0]
		for _, s := range pod.Status.ContainerStatuses {
			if s.Image != image && !strings.HasSuffix(s.Image, image) {
				return fmt.Errorf("container image %s, want %s", s.Image, image)
			}
			if s.State.Running != nil || s.LastTerminationState.Terminated != nil || s.State.Terminated != nil {
				return nil
			}
		}
		return fmt.Errorf("phase %s, %v", pod.Status.Phase, pod.Status.ContainerStatuses)
	}); err != nil {
		t.Fatal(err)
	}
	if !kubeRuntime {
		logs, _ := n.Kubectl(ctx, "logs", "-n", "agent2env", pod.Name, "--tail=5")
		msg := "the daemon's pod ran the agent2env image, but " + os.Getenv(BinEnvVar) +
			" has no kubernetes runtime (serve --runtime-kind): it cannot serve in a pod; it said:\n" + string(logs)
		testenv.Missing(t, "%s", msg)
	}

	if err := n.waitFor(ctx, "the daemon's pod to be Ready (/readyz)", func(ctx context.Context) error {
		p, err := n.Client.CoreV1().Pods("agent2env").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod = p; !isReady(p) {
			return fmt.Errorf("phase %s, %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	// What a client reaching the Service by its name would send.
	hc := &http.Client{Transport: hostTransport{host: "agent2env", next: http.DefaultTransport}}
	daemon := "http://" + netip.AddrPortFrom(ip, 8080).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, daemon+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /health: %s", resp.Status)
	}

	c, err := client.New(daemon, client.WithHTTPClient(hc), client.WithToken(key))
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	sb, err := c.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: bash, CPU: "500m", Memory: "128Mi"})
	if err != nil {
		t.Fatal(err)
	}
	if sb, err = c.Sandbox.WaitForReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox %s running in %v (its image pulled by the node)", sb.ID, time.Since(created).Round(time.Millisecond))
	res, err := c.Sandbox.Execute(ctx, sb.ID, api.ExecRequest{Command: []string{"echo", "hello from a pod"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "hello from a pod" {
		t.Errorf("exec in the sandbox: %+v", res)
	}

	// A context in that sandbox keeps its state between executions.
	cx, err := c.Contexts().CreateIn(ctx, sb.ID, api.CreateContextRequest{Language: api.LanguageBash})
	if err != nil {
		t.Fatalf("create a bash context in the pod: %v", err)
	}
	for _, step := range []struct{ code, want string }{{"x=41", ""}, {"echo $((x+1))", "42"}} {
		out, err := cx.Run(ctx, step.code)
		if err != nil || !out.Success || strings.TrimSpace(out.Output.Stdout) != step.want {
			t.Fatalf("context execute %q = %+v, %v; want %q", step.code, out, err, step.want)
		}
	}
	if err := c.Sandbox.Delete(ctx, sb.ID); err != nil {
		t.Error(err)
	}

	// A session is made on first use (its sandbox a Pod from the bash
	// template), keeps its state, and goes when deleted.
	if _, err := c.Template.Create(ctx, api.CreateTemplateRequest{Name: bashTemplate, Spec: api.TemplateSpec{Image: bash}}); err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct{ code, want string }{{"y=6", ""}, {"echo $((y*7))", "42"}} {
		out, err := c.Sessions().ExecuteCode(ctx, api.SessionExecuteRequest{SessionID: "kubetest", Language: api.LanguageBash, Code: step.code})
		if err != nil || !out.Success || strings.TrimSpace(out.Output.Stdout) != step.want || out.Created != (i == 0) {
			t.Fatalf("session execute %q = %+v, %v; want %q", step.code, out, err, step.want)
		}
	}
	if err := c.Sessions().Delete(ctx, "kubetest"); err != nil {
		t.Error(err)
	}
}

// bashTemplate is the template of sessions' bash sandboxes in
// TestNodeDeploy.
const bashTemplate = "kubetest-bash"

// hostTransport sends every request with the Host header host.
type hostTransport struct {
	host string
	next http.RoundTripper
}

func (h hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Host = h.host
	return h.next.RoundTrip(req)
}

// daemonHasKubeRuntime says whether the agent2env binary at bin has the
// kubernetes runtime among its runtime kinds.
func daemonHasKubeRuntime(t *testing.T, bin string) bool {
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s serve --help: %v", bin, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "--runtime-kind") {
			return strings.Contains(line, "kubernetes")
		}
	}
	return false
}
