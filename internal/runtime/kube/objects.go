package kube

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Labels, annotations and names of the objects of a sandbox.
const (
	LabelSandbox = "agent2env.io/sandbox"
	LabelOwner   = "agent2env.io/owner"
	// annotationSpec holds the sandbox's spec (specJSON).
	annotationSpec = "agent2env.io/spec"
	// annotationState is "stopped" on the gated Pod Stop leaves.
	annotationState = "agent2env.io/state"
	// startGate keeps a created or stopped sandbox's Pod unscheduled.
	startGate = "agent2env.io/start"

	namePrefix = "a2e-"
	// containerName is the sandbox's container, running the agent.
	containerName = "sandbox"
	// AgentPort is the agent's TCP port in every Pod.
	AgentPort = 7070
	// agentDir is where the agent's binary is in the sandbox, on an
	// emptyDir the agent container fills (reserved for mounts too).
	agentDir = "/.agent2env"
	// agentBinary is the agent alone in the agent2env image
	// (image.SelfImageAgentPath), which the Pods copy to agentDir.
	agentBinary = "/usr/local/bin/agent2env-agent"
	// maxSpecAnnotation bounds the spec annotation read back from the
	// cluster; the API server allows 256 KiB for all annotations.
	maxSpecAnnotation = 256 << 10
)

// validID is what the runtime accepts as a sandbox id: a DNS label once
// prefixed, so that it can name the sandbox's objects and be a label value.
var validID = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,51}[a-z0-9])?$`)

// objectName names the Secret and NetworkPolicy of sandbox id.
func objectName(id string) string { return namePrefix + id }

// podName names a Pod of sandbox id: a2e-<id> for its first, which
// Create makes (a name taken is a sandbox that exists), and
// a2e-<id>-<suffix> for those that replace it, a new suffix each time, so
// that a late deletion of the one replaced (by name, as kwok's) cannot hit
// its successor.
func podName(id string, first bool) string {
	if first {
		return objectName(id)
	}
	const letters = "bcdfghjklmnpqrstvwxz2456789" // as Kubernetes' generateName
	b := make([]byte, podSuffix)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return objectName(id) + "-" + string(b)
}

const podSuffix = 5

// isPodName reports whether name is one podName(id, ...) gives.
func isPodName(name, id string) bool {
	if name == objectName(id) {
		return true
	}
	suffix, ok := strings.CutPrefix(name, objectName(id)+"-")
	return ok && len(suffix) == podSuffix && strings.Trim(suffix, "bcdfghjklmnpqrstvwxz2456789") == ""
}

// specJSON is what a Pod's spec annotation holds: what rebuilds the Pod.
type specJSON struct {
	ID        string            `json:"id"`
	Image     string            `json:"image"`
	Env       []string          `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Resources sandbox.Resources `json:"resources"`
	Labels    map[string]string `json:"labels,omitempty"`
	Egress    *sandbox.Egress   `json:"egress,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	// Persistence: the sandbox's writable paths are on its claim.
	Persistence *sandbox.Persistence `json:"persistence,omitempty"`
	// RuntimeClass, when set, is the Pods' runtimeClassName instead of
	// the runtime's.
	RuntimeClass string `json:"runtime_class,omitempty"`
}

// podConfig is what, besides the spec, makes a sandbox's Pod.
type podConfig struct {
	owner        string
	agentImage   string
	runtimeClass string
	pullSecrets  []string
	// services: the daemon serves its services to every sandbox.
	services bool
}

// checkSpec refuses a spec the runtime cannot honour, before anything is
// made.
func checkSpec(spec *sandbox.Spec) error {
	switch {
	case !validID.MatchString(spec.ID):
		return errdefs.Invalid("sandbox id %q must match %s", spec.ID, validID)
	case spec.Image == "":
		return errdefs.Invalid("sandbox %s: no image", spec.ID)
	case len(spec.Mounts) > 0:
		return errdefs.Invalid("sandbox %s: the kubernetes runtime cannot mount host directories (sandboxes run on the cluster's nodes)", spec.ID)
	case spec.Cwd != "" && !strings.HasPrefix(spec.Cwd, "/"):
		return errdefs.Invalid("sandbox %s: working directory %q is not absolute", spec.ID, spec.Cwd)
	case spec.RuntimeClass != "" && !validClass(spec.RuntimeClass):
		return errdefs.Invalid("sandbox %s: runtimeClassName %q is not a Kubernetes object name", spec.ID, spec.RuntimeClass)
	case spec.Persistence != nil && spec.Persistence.StorageClass != "" && !validClass(spec.Persistence.StorageClass):
		return errdefs.Invalid("sandbox %s: persistence.storageClassName %q is not a Kubernetes object name", spec.ID, spec.Persistence.StorageClass)
	}
	if err := capabilities.Refuse(spec, Name); err != nil {
		return fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	r := spec.Resources
	if r.MilliCPU < 0 || r.MemoryBytes < 0 || r.DiskBytes < 0 || r.Pids < 0 {
		return errdefs.Invalid("sandbox %s: negative resources %+v", spec.ID, r)
	}
	for _, kv := range spec.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return errdefs.Invalid("sandbox %s: environment entry %q is not KEY=VALUE", spec.ID, kv)
		}
	}
	return nil
}

// labels are the labels of every object of sandbox id.
func (c podConfig) labels(id string) map[string]string {
	return map[string]string{
		LabelSandbox:                   id,
		LabelOwner:                     c.owner,
		"app.kubernetes.io/managed-by": "agent2env",
	}
}

// pod returns a gated Pod of a sandbox, its first or a replacement; state
// is "" or "stopped".
func (c podConfig) pod(s *specJSON, state string, first bool) (*corev1.Pod, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if len(raw) > maxSpecAnnotation {
		return nil, errdefs.Invalid("sandbox %s: its spec is %d bytes, more than the %d a Pod's annotation holds", s.ID, len(raw), maxSpecAnnotation)
	}
	ann := map[string]string{annotationSpec: string(raw)}
	if state != "" {
		ann[annotationState] = state
	}
	cwd := s.Cwd
	if cwd == "" {
		cwd = sandbox.WorkDir
	}
	// HOME is the sandbox user's whatever the image says, the spec's
	// variables on top; the rest of the environment is the image's.
	env := []corev1.EnvVar{{Name: "HOME", Value: sandbox.HomeDir}}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "HOME" {
			env[0].Value = v
			continue
		}
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	env = append(env,
		corev1.EnvVar{Name: "AGENT2ENV_AGENT_LISTEN", Value: ":" + strconv.Itoa(AgentPort)},
		// The kubelet adds the API service's variables (agent.EnvKubelet).
		corev1.EnvVar{Name: agent.EnvKubelet, Value: agent.KubeletKeep(s.Env)},
	)
	env = append(env, secretEnv(objectName(s.ID))...)
	// The agent listens there for the daemon to accept (services.go).
	if c.services {
		env = append(env, corev1.EnvVar{Name: agent.EnvServicesAccept, Value: agent.ServicesAddr})
	}
	if s.Egress != nil {
		env = append(env, corev1.EnvVar{Name: agent.EnvEgressAccept, Value: agent.EgressAddr})
	}
	agentBin := agentDir + "/agent2env-agent"
	vols, mounts := volumes(s)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(s.ID, first), Labels: c.labels(s.ID), Annotations: ann},
		Spec: corev1.PodSpec{
			SchedulingGates:               []corev1.PodSchedulingGate{{Name: startGate}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  new(false),
			EnableServiceLinks:            new(false),
			TerminationGracePeriodSeconds: new(int64(10)),
			SecurityContext:               sandboxSecurity(),
			Resources:                     podResources(s.Resources),
			InitContainers:                []corev1.Container{agentInstaller(c.agentImage, agentBin)},
			Containers: []corev1.Container{{
				Name:  containerName,
				Image: s.Image,
				// As the oci runtime: the image is pulled once (prepull,
				// or the first sandbox), not asked for again at every
				// start.
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{agentBin, "--uid=-1", "--gid=-1", "--cwd=" + cwd},
				WorkingDir:      cwd,
				Env:             env,
				Ports:           []corev1.ContainerPort{{Name: "agent", ContainerPort: AgentPort, Protocol: corev1.ProtocolTCP}},
				Resources:       resources(s.Resources),
				SecurityContext: restricted(),
				VolumeMounts:    append([]corev1.VolumeMount{{Name: "agent", MountPath: agentDir, ReadOnly: true}}, mounts...),
			}},
			Volumes: append([]corev1.Volume{emptyDir("agent")}, vols...),
		},
	}
	if class := cmp.Or(s.RuntimeClass, c.runtimeClass); class != "" {
		pod.Spec.RuntimeClassName = new(class)
	}
	for _, name := range c.pullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	return pod, nil
}

// agentInstaller is the container that puts the agent (dst, on the agent
// volume) into a sandbox's Pod: a sidecar (an init container that runs as
// long as the Pod) whose start hook copies the agent out of the agent2env
// image, and which then idles. The kubelet starts the sandbox's container
// once the hook has returned. A plain init container that copies and
// exits would cost half a second more on average: the kubelet notices a
// container's exit only at its next relist of the node's containers
// (every second), but runs a start hook at once.
func agentInstaller(image, dst string) corev1.Container {
	return corev1.Container{
		Name:          "agent-install",
		Image:         image,
		Command:       []string{agentBinary, "hold"},
		RestartPolicy: new(corev1.ContainerRestartPolicyAlways),
		Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{agentBinary, "install", dst}},
		}},
		SecurityContext: restricted(),
		VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: agentDir}},
		// A sidecar's requests add to the Pod's: a little. No CPU limit of
		// its own: its start (runc's work in its cgroup, the hook's exec
		// and copy) takes some 40 ms of CPU, which a quota of 100m (10 ms
		// every 100 ms) spread over 200–300 ms of a sandbox's start. The
		// Pod's own resources (podResources) bound it with the sandbox.
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: installerCPU, corev1.ResourceMemory: installerMemory},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: installerMemory},
		},
	}
}

// sandboxSecurity is the Pods' security context: the sandbox user,
// RuntimeDefault seccomp.
func sandboxSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   new(true),
		RunAsUser:      new(int64(sandbox.UserID)),
		RunAsGroup:     new(int64(sandbox.GroupID)),
		FSGroup:        new(int64(sandbox.GroupID)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// What the agent installer asks for.
var (
	installerCPU    = mustQuantity("10m")
	installerMemory = mustQuantity("32Mi")
)

// restricted is the security context of both containers: the Pod Security
// Standards' "restricted" profile, with a read-only root file system.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               new(false),
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// agentDiskReserve is what a Pod's ephemeral-storage limit has beyond the
// sandbox's disk limit: the agent's copy of agent2env-agent (some 7 MB)
// is on an emptyDir of the Pod, which the kubelet counts.
const agentDiskReserve = 64 << 20

// resources are a sandbox's limits as its container's requests and limits
// (equal: the sandbox gets what it may use; the Pod is Burstable all the
// same, see agentInstaller). The disk limit is ephemeral-storage, which the
// kubelet enforces on the emptyDirs and the writable layer together by
// evicting the Pod, with agentDiskReserve on top for the agent's binary.
// Kubernetes has no per-Pod process limit: the node's podPidsLimit
// applies instead of Pids.
func resources(r sandbox.Resources) corev1.ResourceRequirements {
	list := corev1.ResourceList{}
	if r.MilliCPU > 0 {
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI)
	}
	if r.MemoryBytes > 0 {
		list[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryBytes, resource.BinarySI)
	}
	if r.DiskBytes > 0 {
		list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(r.DiskBytes+agentDiskReserve, resource.BinarySI)
	}
	if len(list) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: list.DeepCopy(), Limits: list}
}

// podResources are the Pod's own requests and limits (Kubernetes' pod-level
// resources, on by default from 1.34): the sandbox's CPU and memory and the
// agent installer's, requests equal to limits. They make the Pod
// Guaranteed, which its containers' resources alone cannot (the installer
// has no CPU limit, see agentInstaller), and a Guaranteed Pod's processes
// get the kubelet's lowest oom_score_adj (-997): the agent's, while every
// command raises its own to 1000 (agent.userOOMScore), so the OOM killer
// takes commands long before the agent. In a Burstable Pod the kubelet
// gives the sandbox's container 1000 less its share of the node's memory
// (997 for 64 MiB of 24 GiB), and a memory bomb of several small
// allocators, each below the agent's size, can have the agent killed.
// Nil when the sandbox has no CPU or no memory limit (a Pod is Guaranteed
// only with both); an API server that does not know the field drops it,
// and the Pod is Burstable, as before it.
func podResources(r sandbox.Resources) *corev1.ResourceRequirements {
	if r.MilliCPU <= 0 || r.MemoryBytes <= 0 {
		return nil
	}
	cpu := *resource.NewMilliQuantity(r.MilliCPU+installerCPU.MilliValue(), resource.DecimalSI)
	mem := *resource.NewQuantity(r.MemoryBytes+installerMemory.Value(), resource.BinarySI)
	list := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
	return &corev1.ResourceRequirements{Requests: list.DeepCopy(), Limits: list}
}

// secret holds the agent's token.
func (c podConfig) secret(id string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Labels: c.labels(id)},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// policy is the sandbox's default-deny NetworkPolicy: the daemon's Pods
// (daemon) may reach the agent's port, and the sandbox may reach nothing:
// the daemon dials in for its services and egress proxy.
func (c podConfig) policy(id string, daemon map[string]string) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(AgentPort)
	from := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: daemon}}}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Labels: c.labels(id)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelSandbox: id, LabelOwner: c.owner}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  from,
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// sandboxOf returns the id of the sandbox a Pod from the cluster is, and
// its spec, or an error when the Pod is not a well-formed sandbox Pod of
// owner: labels and annotations are untrusted.
func sandboxOf(pod *corev1.Pod, owner string) (string, *specJSON, error) {
	id := pod.Labels[LabelSandbox]
	if !validID.MatchString(id) || !isPodName(pod.Name, id) || pod.Labels[LabelOwner] != owner {
		return "", nil, fmt.Errorf("pod %s: not a sandbox of %s (label %q)", pod.Name, owner, id)
	}
	raw := pod.Annotations[annotationSpec]
	if len(raw) > maxSpecAnnotation {
		return id, nil, fmt.Errorf("pod %s: spec annotation of %d bytes", pod.Name, len(raw))
	}
	var s specJSON
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return id, nil, fmt.Errorf("pod %s: spec annotation: %w", pod.Name, err)
	}
	if s.ID != id {
		return id, nil, fmt.Errorf("pod %s: spec annotation of sandbox %q", pod.Name, s.ID)
	}
	if err := checkSpec(&sandbox.Spec{ID: s.ID, Image: s.Image, Env: s.Env, Cwd: s.Cwd, Resources: s.Resources,
		Persistence: s.Persistence, RuntimeClass: s.RuntimeClass}); err != nil {
		return id, nil, fmt.Errorf("pod %s: spec annotation: %w", pod.Name, err)
	}
	return id, &s, nil
}

// gated reports whether the Pod still waits for Start.
func gated(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == startGate {
			return true
		}
	}
	return false
}

// podState is the state of a sandbox whose Pod is pod, and why when it is
// not running.
func podState(pod *corev1.Pod) (sandbox.State, string) {
	if pod.DeletionTimestamp != nil {
		return sandbox.StateStopped, "pod deleted" + disruption(pod)
	}
	if gated(pod) {
		if pod.Annotations[annotationState] == "stopped" {
			return sandbox.StateStopped, "stopped"
		}
		return sandbox.StateCreated, ""
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return sandbox.StateStopped, failure(pod)
	case corev1.PodPending:
		return sandbox.StateCreated, waiting(pod)
	case corev1.PodRunning:
		if cs := sandboxContainer(pod); cs != nil && cs.State.Terminated != nil {
			return sandbox.StateStopped, failure(pod)
		}
		if !ready(pod) {
			return sandbox.StateUnknown, "pod not ready" + disruption(pod) + condition(pod, corev1.PodReady)
		}
		return sandbox.StateRunning, ""
	}
	return sandbox.StateUnknown, "pod phase " + string(pod.Status.Phase)
}

func sandboxContainer(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// failure says why a Pod ended: evicted (with the kubelet's message),
// OOM-killed, or its agent's exit.
func failure(pod *corev1.Pod) string {
	if pod.Status.Reason != "" {
		reason := strings.TrimSpace("pod " + pod.Status.Reason + ": " + pod.Status.Message)
		if pod.Status.Reason == "Evicted" && overDiskLimit(pod.Status.Message) {
			reason = "disk limit: " + reason
		}
		return reason
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || t.Reason == "OOMKilled") {
				return fmt.Sprintf("container %s: %s (exit code %d)", cs.Name, t.Reason, t.ExitCode)
			}
		}
	}
	if cs := sandboxContainer(pod); cs != nil && cs.State.Terminated != nil {
		return fmt.Sprintf("agent exited: %s (exit code %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
	}
	return "pod " + strings.ToLower(string(pod.Status.Phase)) + disruption(pod)
}

// diskLimitMessages are what the kubelet's eviction message says when a
// Pod wrote past its ephemeral-storage limit (the sandbox's disk limit),
// for the Pod as a whole, one container or one emptyDir; not when the
// node ran out of disk, which is no fault of the sandbox's.
var diskLimitMessages = []string{
	"ephemeral local storage usage exceeds the total limit",
	"exceeded its local ephemeral storage limit",
	"Usage of EmptyDir volume",
}

// overDiskLimit reports whether the kubelet's eviction message msg says
// the Pod went over its disk limit.
func overDiskLimit(msg string) bool {
	return slices.ContainsFunc(diskLimitMessages, func(m string) bool { return strings.Contains(msg, m) })
}

// waiting says why a started Pod's containers do not run yet, when that
// is a problem that needs no more waiting to be one (a bad image, a
// missing Secret); "" otherwise.
func waiting(pod *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil {
				switch {
				// CrashLoopBackOff: the agent container's start hook
				// (the agent's copy) failed twice.
				case pullFailed(w), w.Reason == "CreateContainerConfigError", w.Reason == "CreateContainerError",
					w.Reason == "RunContainerError", w.Reason == "CrashLoopBackOff":
					return fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, w.Message)
				}
			}
		}
	}
	return ""
}

// pullFailed reports whether a container waits because its image cannot
// be had: its name is not one's, it is not on the node and may not be
// pulled, the kubelet backs off after failed pulls, or a pull failed
// because the registry has no such image (not found, as containerd says
// for a registry's 404, or Docker Hub's "repository does not exist"). A
// pull that failed otherwise (a registry out of reach, say) is tried again
// before the kubelet backs off.
func pullFailed(w *corev1.ContainerStateWaiting) bool {
	switch w.Reason {
	case "InvalidImageName", "ErrImageNeverPull", "ImagePullBackOff":
		return true
	case "ErrImagePull":
		msg := strings.ToLower(w.Message)
		return strings.Contains(msg, "not found") || strings.Contains(msg, "notfound") ||
			strings.Contains(msg, "manifest unknown") || strings.Contains(msg, "does not exist")
	}
	return false
}

// imageMissing is the error of a Pod whose sandbox container's image
// cannot be had (pullFailed): a sandbox.ErrImageNotFound naming the
// image, as the oci runtime's image store answers for a missing one, so
// that the daemon fails the sandbox as its image's. Nil otherwise, and
// for the agent's init container, whose image is the daemon's own.
func imageMissing(pod *corev1.Pod) error {
	cs := sandboxContainer(pod)
	if cs == nil || cs.State.Waiting == nil || !pullFailed(cs.State.Waiting) {
		return nil
	}
	img := cs.Image
	for _, c := range pod.Spec.Containers {
		if c.Name == containerName {
			img = c.Image
		}
	}
	w := cs.State.Waiting
	return fmt.Errorf("%w: %s (%s: %s)", sandbox.ErrImageNotFound, img, w.Reason, w.Message)
}

// disruption is the Pod's DisruptionTarget condition (eviction,
// preemption, node loss), as ": reason", or "".
func disruption(pod *corev1.Pod) string {
	return condition(pod, corev1.DisruptionTarget)
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ && c.Reason != "" {
			return ": " + c.Reason
		}
	}
	return ""
}
