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
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	owner := "kubetest-" + hex.EncodeToString(b)
	const ns = metav1.NamespaceDefault
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
