package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/internal/runtime/kube"
)

// TestPrepull prepulls an image on three nodes through a DaemonSet,
// reports nodes done of nodes, and deletes the DaemonSet after.
func TestPrepull(t *testing.T) {
	k := startTierA(t, 3)
	rt := k.runtime(t, kube.ConnectDirect)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ref = "kubetest.invalid/python:3.12"
	var (
		steps   [][2]int
		checked bool
	)
	err := rt.Prepull(ctx, ref, func(ready, total int) {
		steps = append(steps, [2]int{ready, total})
		if checked {
			return
		}
		checked = true
		dss, err := k.c.Client.AppsV1().DaemonSets(k.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPrepull})
		if err != nil || len(dss.Items) != 1 {
			t.Errorf("prepull daemonsets: %v, %v", dss, err)
			return
		}
		spec := dss.Items[0].Spec.Template.Spec
		got := []any{spec.InitContainers[1].Image, spec.InitContainers[1].Command, *spec.SecurityContext.RunAsNonRoot, *spec.InitContainers[1].SecurityContext.ReadOnlyRootFilesystem}
		want := []any{ref, []string{"/.agent2env/agent2env-agent", "help"}, true, true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the pull container (-want +got):\n%s", diff)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 || steps[len(steps)-1] != [2]int{3, 3} {
		t.Errorf("progress %v, want it to end at 3 of 3 nodes", steps)
	}
	dss, err := k.c.Client.AppsV1().DaemonSets(k.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPrepull})
	if err != nil || len(dss.Items) != 0 {
		t.Errorf("prepull daemonsets left: %v, %v", dss, err)
	}
}
