package kube

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

func TestCheckSpec(t *testing.T) {
	ok := func() *sandbox.Spec { return &sandbox.Spec{ID: "abc123", Image: "busybox"} }
	for _, tc := range []struct {
		name string
		edit func(*sandbox.Spec)
		want string // "" for accepted
	}{
		{"ok", func(*sandbox.Spec) {}, ""},
		{"uppercase id", func(s *sandbox.Spec) { s.ID = "ABC" }, "must match"},
		{"underscore id", func(s *sandbox.Spec) { s.ID = "a_b" }, "must match"},
		{"long id", func(s *sandbox.Spec) { s.ID = strings.Repeat("a", 54) }, "must match"},
		{"no image", func(s *sandbox.Spec) { s.Image = "" }, "no image"},
		// Create refuses it unless the runtime has the egress proxy.
		{"egress", func(s *sandbox.Spec) { s.Network.Egress = &sandbox.Egress{AllowInternet: true} }, ""},
		{"mounts", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: "/a", Destination: "/b"}} }, "host directories"},
		{"relative cwd", func(s *sandbox.Spec) { s.Cwd = "work" }, "not absolute"},
		{"bad env", func(s *sandbox.Spec) { s.Env = []string{"=x"} }, "KEY=VALUE"},
		{"negative memory", func(s *sandbox.Spec) { s.Resources.MemoryBytes = -1 }, "negative"},
		{"persistence", func(s *sandbox.Spec) {
			s.Persistence, s.RuntimeClass = &sandbox.Persistence{SizeBytes: 1 << 30, StorageClass: "fast-ssd", Retain: true}, "gvisor"
		}, ""},
		{"persistence of no size", func(s *sandbox.Spec) { s.Persistence = &sandbox.Persistence{} }, "persistence.size"},
		{"storage class not a name", func(s *sandbox.Spec) {
			s.Persistence = &sandbox.Persistence{SizeBytes: 1 << 30, StorageClass: "Fast SSD"}
		}, "persistence.storageClassName"},
		{"runtime class not a name", func(s *sandbox.Spec) { s.RuntimeClass = "../gvisor" }, "runtimeClassName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.edit(s)
			err := checkSpec(s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want an invalid argument saying %q", err, tc.want)
			}
		})
	}
}

func testPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pc := podConfig{owner: "me", agentImage: "agent2env/agent2env:1"}
	pod, err := pc.pod(&specJSON{ID: "s1", Image: "busybox", Labels: map[string]string{"k": "v"}}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestSandboxOf checks that what is read back from the cluster is
// trusted only when it is a well-formed sandbox of this owner.
func TestSandboxOf(t *testing.T) {
	for _, name := range []string{"a2e-s1", testPod(t).Name} {
		pod := testPod(t)
		pod.Name = name
		if id, spec, err := sandboxOf(pod, "me"); err != nil || id != "s1" || spec.Labels["k"] != "v" {
			t.Fatalf("sandboxOf(a pod %s made by the runtime) = %q, %+v, %v", name, id, spec, err)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
	}{
		{"other owner", func(p *corev1.Pod) { p.Labels[LabelOwner] = "you" }},
		{"id not the name's", func(p *corev1.Pod) { p.Labels[LabelSandbox] = "s2" }},
		{"invalid id", func(p *corev1.Pod) { p.Labels[LabelSandbox], p.Name = "../x", "a2e-../x-bcdfg" }},
		{"name with a short suffix", func(p *corev1.Pod) { p.Name = "a2e-s1-bcd" }},
		{"name of another id", func(p *corev1.Pod) { p.Name = "a2e-s1-x-bcdfg" }},
		{"no spec", func(p *corev1.Pod) { delete(p.Annotations, annotationSpec) }},
		{"spec not json", func(p *corev1.Pod) { p.Annotations[annotationSpec] = "{" }},
		{"spec of another", func(p *corev1.Pod) { p.Annotations[annotationSpec] = `{"id":"s2","image":"x"}` }},
		{"spec without image", func(p *corev1.Pod) { p.Annotations[annotationSpec] = `{"id":"s1"}` }},
		{"spec with a bad runtime class", func(p *corev1.Pod) {
			p.Annotations[annotationSpec] = `{"id":"s1","image":"x","runtime_class":"A/B"}`
		}},
		{"spec with a volume of no size", func(p *corev1.Pod) {
			p.Annotations[annotationSpec] = `{"id":"s1","image":"x","persistence":{"size_bytes":-1}}`
		}},
		{"spec too large", func(p *corev1.Pod) {
			p.Annotations[annotationSpec] = `{"id":"s1","image":"x","cwd":"/` + strings.Repeat("a", maxSpecAnnotation) + `"}`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(t)
			tc.edit(pod)
			if _, _, err := sandboxOf(pod, "me"); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestPodState(t *testing.T) {
	now := metav1.NewTime(time.Now())
	running := func(p *corev1.Pod) {
		p.Spec.SchedulingGates = nil
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	// evicted is a running Pod the kubelet evicted with message msg.
	evicted := func(msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			running(p)
			p.Status.Phase = corev1.PodFailed
			p.Status.Reason, p.Status.Message = "Evicted", msg
		}
	}
	for _, tc := range []struct {
		name   string
		edit   func(*corev1.Pod)
		state  sandbox.State
		reason string
	}{
		{"gated", func(*corev1.Pod) {}, sandbox.StateCreated, ""},
		{"gated stopped", func(p *corev1.Pod) { p.Annotations[annotationState] = "stopped" }, sandbox.StateStopped, "stopped"},
		{"pending", func(p *corev1.Pod) { p.Spec.SchedulingGates = nil; p.Status.Phase = corev1.PodPending }, sandbox.StateCreated, ""},
		{"image pull failing", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}
		}, sandbox.StateCreated, "container sandbox: ImagePullBackOff: no such image"},
		{"agent not installed", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = nil
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "agent-install", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}}}}
		}, sandbox.StateCreated, "container agent-install: CrashLoopBackOff: back-off 10s restarting failed container"},
		{"running", running, sandbox.StateRunning, ""},
		{"not ready", func(p *corev1.Pod) {
			running(p)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeLost"}}
		}, sandbox.StateUnknown, "pod not ready: NodeLost"},
		{"oom killed", func(p *corev1.Pod) {
			running(p)
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
		}, sandbox.StateStopped, "container sandbox: OOMKilled (exit code 137)"},
		{"evicted by the kubelet", func(p *corev1.Pod) {
			running(p)
			p.Status.Phase = corev1.PodFailed
			p.Status.Reason, p.Status.Message = "Evicted", "ephemeral storage over its limit"
		}, sandbox.StateStopped, "pod Evicted: ephemeral storage over its limit"},
		{"evicted over its disk limit", evicted("Pod ephemeral local storage usage exceeds the total limit of containers 128Mi. "), sandbox.StateStopped, "disk limit: pod Evicted: Pod ephemeral local storage usage exceeds the total limit of containers 128Mi."},
		{"evicted over an emptyDir's limit", evicted(`Usage of EmptyDir volume "workspace" exceeds the limit "64Mi". `), sandbox.StateStopped, `disk limit: pod Evicted: Usage of EmptyDir volume "workspace" exceeds the limit "64Mi".`},
		{"evicted as the node ran out of disk", evicted("The node was low on resource: ephemeral-storage. "), sandbox.StateStopped, "pod Evicted: The node was low on resource: ephemeral-storage."},
		{"agent exited", func(p *corev1.Pod) {
			running(p)
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
		}, sandbox.StateStopped, "agent exited: Completed (exit code 0)"},
		{"being deleted for node loss", func(p *corev1.Pod) {
			running(p)
			p.DeletionTimestamp = &now
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"})
		}, sandbox.StateStopped, "pod deleted: DeletionByTaintManager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(t)
			tc.edit(pod)
			state, reason := podState(pod)
			if diff := cmp.Diff([]string{string(tc.state), tc.reason}, []string{string(state), reason}); diff != "" {
				t.Errorf("state, reason (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImageMissing checks which waiting reasons of a Pod's containers are
// its image's failure, which Start reports as sandbox.ErrImageNotFound
// naming the image at once, and which are waited out: a pull that failed
// for another reason than a missing image is tried again, and the agent's
// init container's image is the daemon's, not the sandbox's.
func TestImageMissing(t *testing.T) {
	waiting := func(init bool, reason, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			cs := []corev1.ContainerStatus{{Name: containerName, Image: "docker.io/library/busybox:latest",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
			if init {
				cs[0].Name = "agent-install"
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
				p.Status.InitContainerStatuses = cs
				return
			}
			p.Status.ContainerStatuses = cs
		}
	}
	notFound := `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/busybox:latest": ` +
		`failed to resolve reference "docker.io/library/busybox:latest": docker.io/library/busybox:latest: not found`
	for _, tc := range []struct {
		name    string
		edit    func(*corev1.Pod)
		missing bool
		// reason is podState's, "" when the Pod is still waited for.
		reason string
	}{
		{"pull: not found", waiting(false, "ErrImagePull", notFound), true, "container sandbox: ErrImagePull: " + notFound},
		{"pull: no such repository", waiting(false, "ErrImagePull", "failed to resolve reference: pull access denied, repository does not exist or may require authorization"), true,
			"container sandbox: ErrImagePull: failed to resolve reference: pull access denied, repository does not exist or may require authorization"},
		{"pull: registry out of reach", waiting(false, "ErrImagePull", "dial tcp 10.0.0.1:443: i/o timeout"), false, ""},
		{"backing off", waiting(false, "ImagePullBackOff", `Back-off pulling image "busybox"`), true, `container sandbox: ImagePullBackOff: Back-off pulling image "busybox"`},
		{"invalid name", waiting(false, "InvalidImageName", `couldn't parse image name "Busybox"`), true, `container sandbox: InvalidImageName: couldn't parse image name "Busybox"`},
		{"never pulled", waiting(false, "ErrImageNeverPull", "image is not present with pull policy of Never"), true, "container sandbox: ErrImageNeverPull: image is not present with pull policy of Never"},
		{"creating", waiting(false, "ContainerCreating", ""), false, ""},
		{"agent's image", waiting(true, "ImagePullBackOff", "no such image"), false, "container agent-install: ImagePullBackOff: no such image"},
		{"agent's copy failing", waiting(true, "CrashLoopBackOff", "back-off"), false, "container agent-install: CrashLoopBackOff: back-off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(t)
			pod.Spec.SchedulingGates = nil
			pod.Status.Phase = corev1.PodPending
			tc.edit(pod)
			err := imageMissing(pod)
			if got := errors.Is(err, sandbox.ErrImageNotFound); got != tc.missing {
				t.Fatalf("imageMissing = %v; want an image not found: %v", err, tc.missing)
			}
			if tc.missing && (!errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "image not found: busybox (")) {
				t.Errorf("imageMissing = %v; want an ErrNotFound naming the image busybox", err)
			}
			if state, reason := podState(pod); state != sandbox.StateCreated || reason != tc.reason {
				t.Errorf("podState = %s, %q; want created, %q", state, reason, tc.reason)
			}
		})
	}
}

// TestAcceptEnv checks where a Pod's agent listens for the daemon to
// accept: the services when the daemon serves them, the egress proxy when
// the sandbox has egress.
func TestAcceptEnv(t *testing.T) {
	egress := &sandbox.Egress{AllowedDomains: []string{"example.com"}}
	for _, tc := range []struct {
		name     string
		services bool
		egress   *sandbox.Egress
		want     map[string]string
	}{
		{"neither", false, nil, map[string]string{}},
		{"services", true, nil, map[string]string{agent.EnvServicesAccept: agent.ServicesAddr}},
		{"both", true, egress, map[string]string{agent.EnvServicesAccept: agent.ServicesAddr, agent.EnvEgressAccept: agent.EgressAddr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := podConfig{owner: "me", agentImage: "agent2env/agent2env:1", services: tc.services}
			pod, err := pc.pod(&specJSON{ID: "s1", Image: "busybox", Egress: tc.egress}, "", true)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range pod.Spec.Containers[0].Env {
				if strings.HasSuffix(e.Name, "_ACCEPT") {
					got[e.Name] = e.Value
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("accept env (-want +got):\n%s", diff)
			}
			if _, spec, err := sandboxOf(pod, "me"); err != nil || !cmp.Equal(spec.Egress, tc.egress) {
				t.Errorf("egress read back: %+v, %v", spec, err)
			}
		})
	}
}

func TestResources(t *testing.T) {
	got := resources(sandbox.Resources{MilliCPU: 250, MemoryBytes: 128 << 20, DiskBytes: 2 << 30, Pids: 50})
	for name, want := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: "250m", corev1.ResourceMemory: "128Mi",
		// The disk and the agent's binary (agentDiskReserve).
		corev1.ResourceEphemeralStorage: "2112Mi",
	} {
		if q := got.Limits[name]; q.String() != want {
			t.Errorf("limit %s = %s, want %s", name, q.String(), want)
		}
		if q := got.Requests[name]; q.String() != want {
			t.Errorf("request %s = %s, want %s", name, q.String(), want)
		}
	}
	if len(got.Limits) != 3 {
		t.Errorf("limits %v: want cpu, memory and ephemeral-storage only", got.Limits)
	}
	if none := resources(sandbox.Resources{}); none.Limits != nil || none.Requests != nil {
		t.Errorf("no resources give %+v, want none", none)
	}
}

// TestPodResources: a sandbox with CPU and memory limits makes a
// Guaranteed Pod through the Pod's own resources, its and the agent
// installer's together, requests equal to limits; without either limit
// the Pod has none of its own.
func TestPodResources(t *testing.T) {
	for _, tc := range []struct {
		name     string
		res      sandbox.Resources
		cpu, mem string // "" for no Pod resources
	}{
		{"cpu and memory", sandbox.Resources{MilliCPU: 250, MemoryBytes: 128 << 20, DiskBytes: 2 << 30}, "260m", "160Mi"},
		{"no cpu", sandbox.Resources{MemoryBytes: 128 << 20}, "", ""},
		{"no memory", sandbox.Resources{MilliCPU: 1000}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podResources(tc.res)
			if tc.cpu == "" {
				if got != nil {
					t.Errorf("pod resources %+v, want none", got)
				}
				return
			}
			if got == nil {
				t.Fatal("no pod resources")
			}
			want := map[string]string{"cpu": tc.cpu, "memory": tc.mem}
			for _, l := range []corev1.ResourceList{got.Requests, got.Limits} {
				if len(l) != 2 || l.Cpu().String() != want["cpu"] || l.Memory().String() != want["memory"] {
					t.Errorf("pod resources %v, want %v as both requests and limits", l, want)
				}
			}
		})
	}
}

func TestConfigFromSettings(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := dir + "/config"
	if err := writeFile(kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`); err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromSettings(map[string]string{
		SettingKubeconfig: kubeconfig, SettingNamespace: "sandboxes", SettingConnect: ConnectPortForward,
		SettingPullSecrets: "a, b", SettingDaemonLabels: "app=x,tier=y", SettingStartTimeout: "90s",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.Rest.Host, cfg.Namespace, cfg.Connect, cfg.PullSecrets, map[string]string(cfg.DaemonLabels), cfg.StartTimeout}
	want := []any{"https://127.0.0.1:6443", "sandboxes", ConnectPortForward, []string{"a", "b"}, map[string]string{"app": "x", "tier": "y"}, 90 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	for _, bad := range []map[string]string{
		{SettingKubeconfig: dir + "/missing"},
		{SettingKubeconfig: kubeconfig, SettingDaemonLabels: "a=b=c"},
		{SettingKubeconfig: kubeconfig, SettingStartTimeout: "-1s"},
	} {
		if _, err := ConfigFromSettings(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("settings %v: %v, want an invalid argument", bad, err)
		}
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func TestRegistered(t *testing.T) {
	if names := runtime.Names(); !slices.Contains(names, Name) {
		t.Errorf("registered runtimes %v lack %s", names, Name)
	}
}

// TestVolumes checks the Pod and claim of a persistent sandbox against
// those of one without: the writable paths on the claim's subdirectories
// instead of emptyDirs, the claim sized, classed and labelled.
func TestVolumes(t *testing.T) {
	pc := podConfig{owner: "me", agentImage: "agent2env/agent2env:1", runtimeClass: "kata"}
	mounts := func(s *specJSON) (map[string]string, []string, string) {
		pod, err := pc.pod(s, "", true)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, vm := range pod.Spec.Containers[0].VolumeMounts {
			m[vm.MountPath] = vm.Name + "/" + vm.SubPath
		}
		var vols []string
		for _, v := range pod.Spec.Volumes {
			switch {
			case v.EmptyDir != nil:
				vols = append(vols, v.Name+": emptyDir")
			case v.PersistentVolumeClaim != nil:
				vols = append(vols, v.Name+": claim "+v.PersistentVolumeClaim.ClaimName)
			}
		}
		return m, vols, *pod.Spec.RuntimeClassName
	}
	m, vols, class := mounts(&specJSON{ID: "s1", Image: "busybox"})
	want := map[string]string{"/.agent2env": "agent/", "/workspace": "workspace/", "/tmp": "tmp/", "/home/sandbox": "home/"}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("mounts without persistence (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"agent: emptyDir", "workspace: emptyDir", "tmp: emptyDir", "home: emptyDir"}, vols); diff != "" {
		t.Errorf("volumes without persistence (-want +got):\n%s", diff)
	}
	if class != "kata" {
		t.Errorf("runtimeClassName %q, want the runtime's kata", class)
	}

	p := &sandbox.Persistence{SizeBytes: 3 << 30, StorageClass: "fast", Retain: true}
	m, vols, class = mounts(&specJSON{ID: "s1", Image: "busybox", Persistence: p, RuntimeClass: "gvisor"})
	want = map[string]string{"/.agent2env": "agent/", "/workspace": "data/workspace", "/tmp": "data/tmp", "/home/sandbox": "data/home"}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("mounts with persistence (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"agent: emptyDir", "data: claim a2e-s1"}, vols); diff != "" {
		t.Errorf("volumes with persistence (-want +got):\n%s", diff)
	}
	if class != "gvisor" {
		t.Errorf("runtimeClassName %q, want the sandbox's gvisor", class)
	}

	for _, retain := range []bool{true, false} {
		p.Retain = retain
		pvc := pc.claim("s1", p)
		got := map[string]any{
			"name": pvc.Name, "labels": pvc.Labels, "modes": pvc.Spec.AccessModes,
			"size": pvc.Spec.Resources.Requests.Storage().String(), "class": *pvc.Spec.StorageClassName,
		}
		policy := map[bool]string{true: "Retain", false: "Delete"}[retain]
		wantClaim := map[string]any{
			"name": "a2e-s1", "modes": []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, "size": "3Gi", "class": "fast",
			"labels": map[string]string{LabelSandbox: "s1", LabelOwner: "me", "app.kubernetes.io/managed-by": "agent2env", LabelReclaim: policy},
		}
		if diff := cmp.Diff(wantClaim, got); diff != "" {
			t.Errorf("claim with retain %v (-want +got):\n%s", retain, diff)
		}
	}
	if pvc := pc.claim("s1", &sandbox.Persistence{SizeBytes: 1 << 30}); pvc.Spec.StorageClassName != nil {
		t.Errorf("claim of no class names %q, want the cluster's default (nil)", *pvc.Spec.StorageClassName)
	}
}

// TestAgentInstaller checks the container that copies the agent in: a
// sidecar (the kubelet runs the sandbox's container once its start hook,
// the copy, has returned), with the restricted security context, and no
// CPU limit, whose quota would throttle the start.
func TestAgentInstaller(t *testing.T) {
	pod := testPod(t)
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1", len(pod.Spec.InitContainers))
	}
	c := pod.Spec.InitContainers[0]
	got := map[string]any{
		"image":        c.Image,
		"command":      c.Command,
		"restart":      string(*c.RestartPolicy),
		"hook":         c.Lifecycle.PostStart.Exec.Command,
		"runs":         pod.Spec.Containers[0].Command[0],
		"readOnlyRoot": *c.SecurityContext.ReadOnlyRootFilesystem,
		"escalation":   *c.SecurityContext.AllowPrivilegeEscalation,
		"capsDropped":  c.SecurityContext.Capabilities.Drop,
		"cpuRequest":   c.Resources.Requests.Cpu().String(),
		"memory":       c.Resources.Requests.Memory().String() + " " + c.Resources.Limits.Memory().String(),
		"limits":       len(c.Resources.Limits),
	}
	want := map[string]any{
		"image":        "agent2env/agent2env:1",
		"command":      []string{"/usr/local/bin/agent2env-agent", "hold"},
		"restart":      "Always",
		"hook":         []string{"/usr/local/bin/agent2env-agent", "install", "/.agent2env/agent2env-agent"},
		"runs":         "/.agent2env/agent2env-agent",
		"readOnlyRoot": true,
		"escalation":   false,
		"capsDropped":  []corev1.Capability{"ALL"},
		"cpuRequest":   "10m",
		"memory":       "32Mi 32Mi",
		"limits":       1, // memory only
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the agent container (-want +got):\n%s", diff)
	}
}
