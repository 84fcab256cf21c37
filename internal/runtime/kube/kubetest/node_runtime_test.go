package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest/poolbench"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestNodeRuntime runs the whole runtimetest conformance suite (exec,
// files, limits, escapes) against the kubernetes runtime on a real node:
// real Pods, the agent copied in from the agent2env image, reached on the
// Pod IP. What Kubernetes enforces its own way the runtime declares in
// its Capabilities, and the suite says so where it checks less. The
// node's podPidsLimit is the suite's process limit: Kubernetes has no
// per-Pod one.
func TestNodeRuntime(t *testing.T) {
	n := StartNode(t, NodeOptions{PodPidsLimit: 64})
	agentImage, testImage := n.SelfImage(t), n.RuntimetestImage(t)
	owner := newOwner()
	runtimetest.Run(t, runtimetest.Factory{
		New: func(t *testing.T) sandbox.Runtime {
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
		},
		NewSpec: func(_ *testing.T, id string) *sandbox.Spec {
			return &sandbox.Spec{ID: id, Image: testImage, Cwd: sandbox.WorkDir}
		},
		Kill: func(t *testing.T, rt sandbox.Runtime, id string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pods, err := n.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelSandbox + "=" + id})
			if err != nil || len(pods.Items) != 1 {
				t.Fatalf("the pod of %s: %v (%d pods)", id, err, len(pods.Items))
			}
			EvictSandbox(t, n.Client, ns, pods.Items[0].Name, rt, id)
		},
	})
}

// The namespace of the sandboxes of the tests on a node.
const ns = metav1.NamespaceDefault

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
func BenchmarkNodeRuntime(b *testing.B) {
	rt, testImage := benchNode(b)
	runtimetest.Benchmark(b, rt, func(id string) *sandbox.Spec {
		return &sandbox.Spec{ID: id, Image: testImage, Cwd: sandbox.WorkDir}
	})
}

// BenchmarkNodeWarmPool is poolbench.Benchmark on a real node:
// claims from a warm pool of started Pods, and exec round trips in them;
// compare with the oci package's BenchmarkWarmPool in the same run (make
// bench).
func BenchmarkNodeWarmPool(b *testing.B) {
	rt, testImage := benchNode(b)
	poolbench.Benchmark(b, rt, testImage)
}

// benchNode starts a node and a runtime on it, and returns the runtime
// and the image of the runtimetest suite in the node's registry.
func benchNode(b *testing.B) (*kube.Runtime, string) {
	n := StartNode(b, NodeOptions{PodPidsLimit: 64})
	agentImage, testImage := n.SelfImage(b), n.RuntimetestImage(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := kube.New(ctx, kube.Config{Rest: n.Config, Namespace: ns, Owner: newOwner(), AgentImage: agentImage})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rt.Close)
	return rt, testImage
}
