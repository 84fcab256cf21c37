package kubetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestNodePersistence checks on a real node that a persistent sandbox's
// files are on its claim: they outlive its Pod (evicted, then started
// again in a new Pod), and the sandbox user can write every writable
// path there. The node has no provisioner: the claim binds to a local
// PersistentVolume on a directory of the test, made here.
func TestNodePersistence(t *testing.T) {
	n := StartNode(t, NodeOptions{})
	agentImage, testImage := n.SelfImage(t), n.RuntimetestImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const class = "a2e-local"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "a2e-local-" + newOwner()},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				Local: &corev1.LocalVolumeSource{Path: t.TempDir()},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{NodeName},
				}},
			}}}},
		},
	}
	if _, err := n.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	rt, err := kube.New(ctx, kube.Config{
		Rest: n.Config, Namespace: ns, Owner: newOwner(), AgentImage: agentImage, StartTimeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	const id = "persist1"
	sp := &sandbox.Spec{ID: id, Image: testImage, Cwd: sandbox.WorkDir,
		Persistence: &sandbox.Persistence{SizeBytes: 64 << 20, StorageClass: class}}
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	run := func(script string) string {
		t.Helper()
		c, err := rt.Agent(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var out bytes.Buffer
		res, err := c.Exec(ctx, agent.ExecRequest{Shell: script, Timeout: 30 * time.Second}, nil, &out, &out)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q: %+v, %v: %s", script, res, err, out.String())
		}
		return out.String()
	}
	run("echo work > /workspace/f && echo home > $HOME/f && echo tmp > /tmp/f")

	pods, err := n.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelSandbox + "=" + id})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the pod of %s: %v (%d pods)", id, err, len(pods.Items))
	}
	EvictSandbox(t, n.Client, ns, pods.Items[0].Name, rt, id)
	if err := rt.Start(ctx, id); err != nil {
		t.Fatalf("start again in a new pod: %v", err)
	}
	if got := run("cat /workspace/f $HOME/f /tmp/f"); got != "work\nhome\ntmp\n" {
		t.Errorf("the files in the new pod: %q, want those written in the evicted one", got)
	}

	if err := rt.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := n.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "a2e-"+id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the claim of the deleted sandbox (reclaimPolicy Delete) is still there: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Start replaced the evicted Pod by deleting it at once (grace 0): the
	// kubelet tears its containers down in the background, after the
	// API server forgot it. Wait for that, or the node's cleanup finds
	// them.
	for len(n.sandboxes()) > 0 {
		if ctx.Err() != nil {
			t.Fatalf("the node still runs pod sandboxes %v", n.sandboxes())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
