package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestPersistence runs persistent sandboxes against a real API server
// and kube-controller-manager, whose binder binds their claims to a
// hostPath volume made here (kwok's nodes mount nothing): the claim made
// with the Pod, the Pod's paths on it through a Stop and Start, Delete
// by the reclaim policy, and Recover's handling of claims left behind.
func TestPersistence(t *testing.T) {
	k := startTierA(t)
	rt := k.runtime(t, kube.ConnectDirect)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const class = "a2e-manual"
	claims := k.c.Client.CoreV1().PersistentVolumeClaims(k.ns)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "a2e-" + k.owner},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: t.TempDir()},
			},
		},
	}
	if _, err := k.c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	claim := func(id string) (*corev1.PersistentVolumeClaim, error) {
		return claims.Get(ctx, "a2e-"+id, metav1.GetOptions{})
	}
	// gone: the claim was deleted; the pvc-protection finalizer may hold
	// it a moment after its last Pod.
	gone := func(id string) bool {
		pvc, err := claim(id)
		return apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil)
	}

	// A sandbox whose claim binds: it runs, its Pods mount the claim.
	sp := &sandbox.Spec{ID: "pv1", Image: testImage,
		Persistence: &sandbox.Persistence{SizeBytes: 512 << 20, StorageClass: class}}
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	pvc, err := claim("pv1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{"labels": pvc.Labels, "size": pvc.Spec.Resources.Requests.Storage().String(),
		"class": *pvc.Spec.StorageClassName, "modes": pvc.Spec.AccessModes}
	want := map[string]any{
		"labels": map[string]string{kube.LabelSandbox: "pv1", kube.LabelOwner: k.owner, "app.kubernetes.io/managed-by": "agent2env", kube.LabelReclaim: "Delete"},
		"size":   "512Mi", "class": class, "modes": []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the sandbox's claim (-want +got):\n%s", diff)
	}
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	checkMounts := func() {
		t.Helper()
		pod := k.pod(ctx, t, "pv1")
		mounts := map[string]string{}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			mounts[m.MountPath] = m.Name + "/" + m.SubPath
		}
		want := map[string]string{"/.agent2env": "agent/", "/workspace": "data/workspace", "/tmp": "data/tmp", "/home/sandbox": "data/home"}
		if diff := cmp.Diff(want, mounts); diff != "" {
			t.Errorf("pod %s mounts (-want +got):\n%s", pod.Name, diff)
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == "data" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "a2e-pv1") {
				t.Errorf("pod %s volume data is %+v, want the claim a2e-pv1", pod.Name, v.VolumeSource)
			}
		}
	}
	checkMounts()
	if pvc, err := claim("pv1"); err != nil || pvc.Spec.VolumeName != pv.Name {
		t.Errorf("claim bound to %q (%v), want %s", pvc.Spec.VolumeName, err, pv.Name)
	}
	// A Stop and Start make a new Pod on the same claim.
	if err := rt.Stop(ctx, sp.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	checkMounts()
	if err := rt.Delete(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	if !gone("pv1") {
		t.Errorf("the claim of a deleted sandbox with reclaimPolicy Delete is still there")
	}

	// Retain keeps the claim, labelled, after Delete.
	retained := &sandbox.Spec{ID: "pv2", Image: testImage, Persistence: &sandbox.Persistence{SizeBytes: 1 << 30, Retain: true}}
	if err := rt.Create(ctx, retained); err != nil {
		t.Fatal(err)
	}
	if err := rt.Delete(ctx, retained.ID); err != nil {
		t.Fatal(err)
	}
	if pvc, err := claim("pv2"); err != nil || pvc.DeletionTimestamp != nil || pvc.Labels[kube.LabelReclaim] != "Retain" || pvc.Spec.StorageClassName != nil {
		t.Errorf("the retained claim after Delete: %+v, %v; want kept, labelled Retain, of the default class", pvc, err)
	}

	// Recover: the claims of sandboxes that are gone go unless retained;
	// a live sandbox's and another owner's stay.
	live := &sandbox.Spec{ID: "pv3", Image: testImage, Persistence: &sandbox.Persistence{SizeBytes: 1 << 30}}
	if err := rt.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	orphan := func(id, owner, policy string) {
		t.Helper()
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "a2e-" + id, Labels: map[string]string{
				kube.LabelSandbox: id, kube.LabelOwner: owner, kube.LabelReclaim: policy}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")}},
			},
		}
		if _, err := claims.Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	orphan("orphan1", k.owner, "Delete")
	orphan("orphan2", k.owner, "Retain")
	orphan("other", k.owner+"-other", "Delete")
	rt2 := k.runtime(t, kube.ConnectDirect)
	if _, err := rt2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	for id, wantGone := range map[string]bool{"orphan1": true, "orphan2": false, "pv2": false, "pv3": false, "other": false} {
		if gone(id) != wantGone {
			t.Errorf("claim of %s after Recover: gone %v, want %v", id, !wantGone, wantGone)
		}
	}
	if err := rt2.Delete(ctx, live.ID); err != nil {
		t.Fatal(err)
	}
	if !gone("pv3") {
		t.Errorf("the claim of a sandbox deleted after a restart is still there")
	}

	// What the runtime cannot honour makes nothing.
	for _, bad := range []*sandbox.Spec{
		{ID: "bad1", Image: testImage, Persistence: &sandbox.Persistence{SizeBytes: 0}},
		{ID: "bad2", Image: testImage, Persistence: &sandbox.Persistence{SizeBytes: 1 << 30, StorageClass: "Not A Class"}},
		{ID: "bad3", Image: testImage, RuntimeClass: "not/a/class"},
	} {
		if err := rt.Create(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Create %s: %v, want an invalid argument", bad.ID, err)
		}
		if _, err := claim(bad.ID); !apierrors.IsNotFound(err) {
			t.Errorf("a refused Create %s left a claim: %v", bad.ID, err)
		}
		if _, err := rt.Status(ctx, bad.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("a refused Create %s left a sandbox: %v", bad.ID, err)
		}
	}
}

// TestRuntimeClass checks that a sandbox's runtime class is its Pods'
// runtimeClassName, and that one the cluster does not have fails Create,
// leaving nothing.
func TestRuntimeClass(t *testing.T) {
	k := startTierA(t)
	rt := k.runtime(t, kube.ConnectDirect)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor-" + k.owner}, Handler: "runsc"}
	if _, err := k.c.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.c.Client.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
	})
	if err := rt.Create(ctx, &sandbox.Spec{ID: "rc1", Image: testImage, RuntimeClass: rc.Name}); err != nil {
		t.Fatal(err)
	}
	defer rt.Delete(context.Background(), "rc1")
	if err := rt.Start(ctx, "rc1"); err != nil {
		t.Fatal(err)
	}
	if pod := k.pod(ctx, t, "rc1"); pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != rc.Name {
		t.Errorf("pod runtimeClassName %v, want %s", pod.Spec.RuntimeClassName, rc.Name)
	}

	err := rt.Create(ctx, &sandbox.Spec{ID: "rc2", Image: testImage, RuntimeClass: "no-such-class"})
	if err == nil {
		t.Fatal("Create with a runtime class the cluster lacks succeeded")
	}
	if _, err := rt.Status(ctx, "rc2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a failed Create left a sandbox: %v", err)
	}
	t.Logf("Create with an unknown runtime class: %v", err)
}
