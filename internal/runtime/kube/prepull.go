package kube

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/agent2env/agent2env/internal/sandbox"
)

var _ sandbox.NodePrepuller = (*Runtime)(nil)

// LabelPrepull marks a prepull DaemonSet's Pods (not the owner label: they
// are no sandboxes).
const LabelPrepull = "agent2env.io/prepull"

// prepullPoll is how often Prepull reads its DaemonSet's status.
var prepullPoll = time.Second

// Prepull has every node's kubelet pull ref: a DaemonSet whose Pods each
// run ref once as an init container (the agent's binary, copied in as for
// sandboxes, printing its help: the image needs no shell) and then idle.
// A node is done once its Pod is ready; progress reports nodes done of
// nodes to pull on. The DaemonSet is deleted when all are done or ctx
// ends. Concurrent calls for one ref share the DaemonSet; the first to
// make it deletes it.
func (r *Runtime) Prepull(ctx context.Context, ref string, progress func(ready, total int)) error {
	if ref == "" {
		return errors.New("prepull: no image")
	}
	sum := sha256.Sum256([]byte(ref))
	key := hex.EncodeToString(sum[:])[:16]
	ds := r.pc.daemonSet(namePrefix+"prepull-"+key, key, ref)
	dss := r.client.AppsV1().DaemonSets(r.cfg.Namespace)
	made, err := dss.Create(ctx, ds, metav1.CreateOptions{})
	owner := err == nil
	switch {
	case apierrors.IsAlreadyExists(err):
		made, err = dss.Get(ctx, ds.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("prepull %s: %w", ref, classify(err))
	}
	if owner {
		defer func() {
			bg := metav1.DeletePropagationBackground
			if err := dss.Delete(context.WithoutCancel(ctx), ds.Name, metav1.DeleteOptions{
				PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &made.UID},
			}); err != nil && !apierrors.IsNotFound(err) {
				r.log.Warn("delete prepull daemonset", "daemonset", ds.Name, "err", err)
			}
		}()
	}
	last := [2]int{-1, -1}
	tick := time.NewTicker(prepullPoll)
	defer tick.Stop()
	for {
		cur, err := dss.Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("prepull %s: %w", ref, classify(err))
		}
		s := cur.Status
		if cur.UID != made.UID {
			return fmt.Errorf("prepull %s: its daemonset was replaced", ref)
		}
		if s.ObservedGeneration >= cur.Generation {
			now := [2]int{int(s.NumberReady), int(s.DesiredNumberScheduled)}
			if now != last && progress != nil {
				progress(now[0], now[1])
			}
			last = now
			if s.NumberReady >= s.DesiredNumberScheduled && s.UpdatedNumberScheduled >= s.DesiredNumberScheduled {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prepull %s: %d of %d nodes done: %w", ref, max(last[0], 0), max(last[1], 0), ctx.Err())
		case <-tick.C:
		}
	}
}

// daemonSet is the prepull DaemonSet of ref.
func (c podConfig) daemonSet(name, key, ref string) *appsv1.DaemonSet {
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	podLabels := map[string]string{LabelPrepull: key, "app.kubernetes.io/managed-by": "agent2env"}
	agentBin := agentDir + "/agent2env-agent"
	install := corev1.Container{
		Name:            "agent-install",
		Image:           c.agentImage,
		Command:         []string{agentBinary, "install", agentBin},
		SecurityContext: restricted(),
		VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: agentDir}},
	}
	pull := corev1.Container{
		Name:            "pull",
		Image:           ref,
		Command:         []string{agentBin, "help"},
		SecurityContext: restricted(),
		VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: agentDir, ReadOnly: true}},
	}
	// Something must run once the image is pulled: the agent, on the Pod's
	// loopback, with a token nobody knows.
	idle := corev1.Container{
		Name:    "idle",
		Image:   c.agentImage,
		Command: []string{agentBinary, "--uid=-1", "--gid=-1", "--cwd=/"},
		Env: []corev1.EnvVar{
			{Name: "AGENT2ENV_AGENT_LISTEN", Value: "127.0.0.1:0"},
			{Name: "AGENT2ENV_AGENT_TOKEN", Value: hex.EncodeToString(token)},
		},
		SecurityContext: restricted(),
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: mustQuantity("50m"), corev1.ResourceMemory: mustQuantity("32Mi"),
		}},
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{LabelOwner: c.owner, LabelPrepull: key, "app.kubernetes.io/managed-by": "agent2env"},
			Annotations: map[string]string{"agent2env.io/image": ref},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelPrepull: key}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  new(false),
					EnableServiceLinks:            new(false),
					TerminationGracePeriodSeconds: new(int64(1)),
					SecurityContext:               sandboxSecurity(),
					InitContainers:                []corev1.Container{install, pull},
					Containers:                    []corev1.Container{idle},
					Volumes:                       []corev1.Volume{emptyDir("agent")},
				},
			},
		},
	}
	if c.runtimeClass != "" {
		ds.Spec.Template.Spec.RuntimeClassName = new(c.runtimeClass)
	}
	for _, n := range c.pullSecrets {
		ds.Spec.Template.Spec.ImagePullSecrets = append(ds.Spec.Template.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
	}
	return ds
}

// recoverPrepulls deletes the prepull DaemonSets a crash left.
func (r *Runtime) recoverPrepulls(ctx context.Context) error {
	selector := labels.SelectorFromSet(labels.Set{LabelOwner: r.cfg.Owner}).String() + "," + LabelPrepull
	dss := r.client.AppsV1().DaemonSets(r.cfg.Namespace)
	list, err := dss.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("list prepull daemonsets: %w", classify(err))
	}
	for _, ds := range list.Items {
		if err := dss.Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete prepull daemonset %s: %w", ds.Name, classify(err))
		}
	}
	return nil
}
