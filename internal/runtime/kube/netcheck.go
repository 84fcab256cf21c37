package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A sandbox's only isolation from the network on Kubernetes is its
// NetworkPolicy, and the API server accepts NetworkPolicies whether or
// not anything enforces them: that is the cluster's network plugin's
// business (Calico, Cilium, kube-router… enforce them; flannel and
// kindnet alone do not). The daemon finds out at start with a Pod pair
// of the agent2env image in its namespace (the agent's netcheck
// subcommands): a client reaches a server while no policy selects them
// (the control), then, under a policy denying everything, must not.

// Enforcement is what a check found of the cluster's NetworkPolicies.
type Enforcement int

const (
	// PoliciesUnknown: the check could not tell (Pods do not reach each
	// other even without a policy, or the check failed).
	PoliciesUnknown Enforcement = iota
	// PoliciesEnforced: a policy denying egress stopped a connection that
	// went through without it.
	PoliciesEnforced
	// PoliciesNotEnforced: the connection went through under the policy.
	PoliciesNotEnforced
)

func (e Enforcement) String() string {
	switch e {
	case PoliciesEnforced:
		return "enforced"
	case PoliciesNotEnforced:
		return "not enforced"
	}
	return "unknown"
}

// verdict is what the check's two connections say: the control's,
// without a policy, and the one under a policy denying everything.
func verdict(controlReached, policedReached bool) Enforcement {
	switch {
	case !controlReached:
		return PoliciesUnknown
	case policedReached:
		return PoliciesNotEnforced
	}
	return PoliciesEnforced
}

// LabelNetcheck marks the Pods and the NetworkPolicy of a check.
const LabelNetcheck = "agent2env.io/netcheck"

// netcheckPort is where the check's server listens.
const netcheckPort = 8080

// netcheckTimeout bounds a whole check: three Pods' starts, the agent
// image pulled once.
const netcheckTimeout = 3 * time.Minute

// policedAttempts is how many seconds the client under the policy tries
// for, the verdict being its last attempt's: enforcers install a new
// Pod's rules a moment after its network is up.
const policedAttempts = 5

// CheckNetworkPolicies runs the check in the runtime's namespace and says
// what it found; it removes its Pods and policy before returning.
func (r *Runtime) CheckNetworkPolicies(ctx context.Context) (Enforcement, error) {
	ctx, cancel := context.WithTimeout(ctx, netcheckTimeout)
	defer cancel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	run := "netcheck-" + hex.EncodeToString(b)
	defer r.removeNetcheck(run)
	server, err := r.netcheckPod(ctx, run, "server", "listen", strconv.Itoa(netcheckPort))
	if err != nil {
		return PoliciesUnknown, err
	}
	addr := net.JoinHostPort(server.Status.PodIP, strconv.Itoa(netcheckPort))
	// A few attempts: the server may take a moment to listen.
	control, err := r.netcheckClient(ctx, run, "control", addr, 3)
	if err != nil {
		return PoliciesUnknown, err
	}
	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: run, Labels: map[string]string{LabelNetcheck: run}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelNetcheck: run}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if _, err := r.client.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		return PoliciesUnknown, fmt.Errorf("create the check's network policy: %w", classify(err))
	}
	policed, err := r.netcheckClient(ctx, run, "policed", addr, policedAttempts)
	if err != nil {
		return PoliciesUnknown, err
	}
	return verdict(control, policed), nil
}

// warnUnenforcedPolicies runs the check and logs what it found: a
// warning naming the risk unless the policies are enforced.
func (r *Runtime) warnUnenforcedPolicies(ctx context.Context) {
	e, err := r.CheckNetworkPolicies(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return // the runtime closed
	case e == PoliciesEnforced:
		r.log.Info("kubernetes: the cluster enforces NetworkPolicies: sandboxes have no network but the daemon's proxy", "namespace", r.cfg.Namespace)
	case e == PoliciesNotEnforced:
		r.log.Warn("kubernetes: the cluster does NOT enforce NetworkPolicies (its network plugin ignores them): "+
			"sandboxes can reach other Pods, the nodes, the API server and whatever the cluster's network reaches, "+
			"and their egress allow-lists do not hold; use a network plugin that enforces NetworkPolicies (Calico, Cilium, kube-router...)",
			"namespace", r.cfg.Namespace)
	default:
		r.log.Warn("kubernetes: could not tell whether the cluster enforces NetworkPolicies: "+
			"if it does not, sandboxes can reach the cluster's network and their egress allow-lists do not hold",
			"namespace", r.cfg.Namespace, "error", err)
	}
}

// netcheckPod runs a Pod of the agent image whose agent runs netcheck
// with args, and waits until it runs with an IP (role "server") or has
// ended (a client).
func (r *Runtime) netcheckPod(ctx context.Context, run, role string, args ...string) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: run + "-" + role, Labels: map[string]string{LabelNetcheck: run}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(false),
			EnableServiceLinks:           new(false),
			SecurityContext:              sandboxSecurity(),
			Containers: []corev1.Container{{
				Name: "netcheck", Image: r.cfg.AgentImage,
				Command:         append([]string{agentBinary, "netcheck"}, args...),
				SecurityContext: restricted(),
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("10m"), corev1.ResourceMemory: mustQuantity("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: mustQuantity("16Mi")},
				},
			}},
		},
	}
	// Under the sandboxes' container runtime, as they are.
	if r.cfg.RuntimeClass != "" {
		pod.Spec.RuntimeClassName = new(r.cfg.RuntimeClass)
	}
	for _, name := range r.cfg.PullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	if _, err := r.pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create the check's %s pod: %w", role, classify(err))
	}
	for {
		p, err := r.pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the check's %s pod: %w", role, classify(err))
		}
		switch {
		case role == "server" && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "":
			return p, nil
		case role != "server" && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed):
			return p, nil
		case role == "server" && p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning:
			return nil, fmt.Errorf("the check's server pod ended: %s %s", p.Status.Phase, p.Status.Message)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the check's %s pod did not get there: %s: %w", role, p.Status.Phase, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// netcheckClient runs a client Pod trying addr for seconds and reports
// whether its last attempt connected.
func (r *Runtime) netcheckClient(ctx context.Context, run, role, addr string, seconds int) (bool, error) {
	p, err := r.netcheckPod(ctx, run, role, "connect", addr, strconv.Itoa(seconds))
	if err != nil {
		return false, err
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			// 1 is the agent's "did not connect"; anything else is not an
			// answer (an image without netcheck: 2).
			switch t.ExitCode {
			case 0:
				return true, nil
			case 1:
				return false, nil
			}
			return false, fmt.Errorf("the check's %s pod exited %d: %s", role, t.ExitCode, t.Message)
		}
	}
	return false, errors.New("the check's " + role + " pod ended without its container's exit")
}

// removeNetcheck deletes the check's Pods and policy.
func (r *Runtime) removeNetcheck(run string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A second's grace, not none: a forced deletion would leave the
	// kubelet to find out later that the Pod went.
	grace := int64(1)
	for _, role := range []string{"server", "control", "policed"} {
		err := r.pods.Delete(ctx, run+"-"+role, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			r.log.Warn("kubernetes: remove the network policy check's pod", "pod", run+"-"+role, "error", err)
		}
	}
	err := r.client.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Delete(ctx, run, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("kubernetes: remove the network policy check's policy", "run", run, "error", err)
	}
}
