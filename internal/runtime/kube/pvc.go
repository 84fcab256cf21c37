package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agent2env/agent2env/internal/sandbox"
)

// A persistent sandbox (Spec.Persistence) has a PersistentVolumeClaim of
// its own, named as its other objects, labelled as them and with its
// reclaim policy. Its Pods mount the claim's subdirectories at the
// sandbox's writable paths, so the files there outlive any one Pod: a
// Stop, an eviction, a lost node (when the storage class's volumes can
// follow the Pod to another node). Delete deletes the claim unless the
// policy says Retain; a retained claim stays, labelled, for an operator to
// read or delete (README, "Persistence"). Recover deletes the claims of
// sandboxes that are gone unless retained.
const (
	// LabelReclaim is the reclaim policy of a sandbox's claim:
	// ReclaimRetain or ReclaimDelete.
	LabelReclaim  = "agent2env.io/reclaim-policy"
	ReclaimRetain = "Retain"
	ReclaimDelete = "Delete"

	// claimVolume is the claim's volume in the Pod.
	claimVolume = "data"
)

// writablePaths are where the sandbox's files go, by the volume (or the
// claim's subdirectory) each is on.
var writablePaths = []struct{ name, path string }{
	{"workspace", sandbox.WorkDir},
	{"tmp", "/tmp"},
	{"home", sandbox.HomeDir},
}

// validClass reports whether name may name a storage or runtime class: a
// DNS subdomain, as Kubernetes object names.
func validClass(name string) bool { return len(validation.IsDNS1123Subdomain(name)) == 0 }

// reclaimPolicy is the label value of p's policy.
func reclaimPolicy(p *sandbox.Persistence) string {
	if p.Retain {
		return ReclaimRetain
	}
	return ReclaimDelete
}

// claim is the PersistentVolumeClaim of sandbox id with persistence p.
func (c podConfig) claim(id string, p *sandbox.Persistence) *corev1.PersistentVolumeClaim {
	l := c.labels(id)
	l[LabelReclaim] = reclaimPolicy(p)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Labels: l},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(p.SizeBytes, resource.BinarySI),
			}},
		},
	}
	if p.StorageClass != "" {
		pvc.Spec.StorageClassName = new(p.StorageClass)
	}
	return pvc
}

// volumes are the Pod's volumes of the sandbox's writable paths and their
// mounts: emptyDirs, or the subdirectories of its claim.
func volumes(s *specJSON) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	if s.Persistence != nil {
		vols = append(vols, corev1.Volume{Name: claimVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: objectName(s.ID)},
		}})
	}
	for _, w := range writablePaths {
		if s.Persistence != nil {
			mounts = append(mounts, corev1.VolumeMount{Name: claimVolume, MountPath: w.path, SubPath: w.name})
			continue
		}
		vols = append(vols, emptyDir(w.name))
		mounts = append(mounts, corev1.VolumeMount{Name: w.name, MountPath: w.path})
	}
	return vols, mounts
}

// ensureClaim makes the claim of a persistent sandbox unless it exists,
// and reports whether it made it; an existing claim of that name must be
// the sandbox's own.
func (r *Runtime) ensureClaim(ctx context.Context, s *specJSON) (bool, error) {
	if s.Persistence == nil {
		return false, nil
	}
	claims := r.client.CoreV1().PersistentVolumeClaims(r.cfg.Namespace)
	_, err := claims.Create(ctx, r.pc.claim(s.ID, s.Persistence), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return false, fmt.Errorf("create volume claim: %w", classify(err))
		}
		return true, nil
	}
	pvc, err := claims.Get(ctx, objectName(s.ID), metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("read volume claim: %w", classify(err))
	}
	if pvc.Labels[LabelOwner] != r.cfg.Owner || pvc.Labels[LabelSandbox] != s.ID {
		return false, fmt.Errorf("volume claim %s exists and is not one this daemon made for sandbox %s", pvc.Name, s.ID)
	}
	return false, nil
}

// releaseClaim deletes the claim of a deleted sandbox of spec s unless its
// policy retains it. Without the spec (nil) the claim's own label says.
func (r *Runtime) releaseClaim(ctx context.Context, id string, s *specJSON) error {
	if s != nil && s.Persistence == nil {
		return nil
	}
	return r.deleteClaim(ctx, id, true)
}

// deleteClaim deletes the claim of sandbox id if it is the sandbox's own
// (its labels say so: a claim of that name may be another's), unless
// keepRetained and its label says Retain.
func (r *Runtime) deleteClaim(ctx context.Context, id string, keepRetained bool) error {
	claims := r.client.CoreV1().PersistentVolumeClaims(r.cfg.Namespace)
	pvc, err := claims.Get(ctx, objectName(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read volume claim: %w", classify(err))
	case pvc.Labels[LabelOwner] != r.cfg.Owner || pvc.Labels[LabelSandbox] != id,
		keepRetained && pvc.Labels[LabelReclaim] == ReclaimRetain:
		return nil
	}
	err = claims.Delete(ctx, pvc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pvc.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete volume claim: %w", classify(err))
	}
	return nil
}

// recoverClaims deletes the claims of sandboxes without a Pod, but those
// retained.
func (r *Runtime) recoverClaims(ctx context.Context) error {
	selector := labels.SelectorFromSet(labels.Set{LabelOwner: r.cfg.Owner}).String()
	list, err := r.client.CoreV1().PersistentVolumeClaims(r.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("list volume claims: %w", classify(err))
	}
	for _, pvc := range list.Items {
		id := pvc.Labels[LabelSandbox]
		if !validID.MatchString(id) || pvc.Name != objectName(id) || pvc.Labels[LabelReclaim] == ReclaimRetain {
			continue
		}
		if _, _, err := r.lookup(id); err == nil {
			continue
		}
		r.log.Info("recover: delete the volume claim of a sandbox that is gone", "sandbox", id, "claim", pvc.Name)
		if err := r.deleteClaim(ctx, id, true); err != nil {
			return err
		}
	}
	return nil
}
