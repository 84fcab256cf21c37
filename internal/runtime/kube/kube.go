package kube

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Name is the runtime's registry name.
const Name = "kubernetes"

// How the daemon reaches agents (Config.Connect).
const (
	ConnectDirect      = "direct"
	ConnectPortForward = "port-forward"
)

var _ sandbox.Runtime = (*Runtime)(nil)

// Config configures a Runtime.
type Config struct {
	// Rest reaches the API server (in-cluster config or a kubeconfig).
	Rest *rest.Config
	// Namespace holds the sandboxes' objects.
	Namespace string
	// Owner is the value of every object's agent2env.io/owner label: the
	// Runtime sees and recovers only its own. Empty means "agent2env".
	Owner string
	// AgentImage is the agent2env image (make image) whose agent-only
	// binary each Pod's sidecar copies in.
	AgentImage string
	// RuntimeClass, when set, is every Pod's runtimeClassName (gVisor,
	// Kata).
	RuntimeClass string
	// PullSecrets are the Pods' imagePullSecrets.
	PullSecrets []string
	// DaemonLabels select the daemon's Pods in the NetworkPolicies; nil
	// means the labels of deploy/kubernetes.
	DaemonLabels map[string]string
	// Connect is ConnectDirect (the default: the Pod's IP) or
	// ConnectPortForward (through the API server).
	Connect string
	// StartTimeout bounds Start: scheduling, image pulls and the agent's
	// first answer. Zero means 5 minutes.
	StartTimeout time.Duration
	// Services, when set, serves the daemon's services (LLM proxy, MCP)
	// to every running sandbox at its agent.ServicesAddr.
	Services runtime.Services
	// Egress, when set, serves the daemon's egress proxy to each running
	// sandbox whose spec sets Network.Egress, at its agent.EgressAddr;
	// without it Create refuses such specs.
	Egress runtime.EgressProxy
	// CheckNetworkPolicies, when set, has New start a check of whether
	// the cluster enforces NetworkPolicies (CheckNetworkPolicies), in the
	// background, logging a warning unless it does: the daemon's runtime
	// does.
	CheckNetworkPolicies bool
	Logger               *slog.Logger
}

// DefaultDaemonLabels are the labels of the daemon's Pods in
// deploy/kubernetes.
var DefaultDaemonLabels = map[string]string{
	"app.kubernetes.io/name":      "agent2env",
	"app.kubernetes.io/component": "daemon",
}

// Runtime runs sandboxes as Pods. Create it with New.
type Runtime struct {
	cfg    Config
	pc     podConfig
	client kubernetes.Interface
	pods   typedcorev1.PodInterface
	dial   func(ctx context.Context, pod *corev1.Pod) (net.Conn, error)
	log    *slog.Logger
	stop   context.CancelFunc
	// stopped is closed by Close (stop), done once the informer has
	// stopped.
	stopped <-chan struct{}
	done    chan struct{}

	mu sync.Mutex
	// seen are the owner's sandbox Pods by id, as the informer's handlers
	// last saw them: waiting on them is waiting for the handlers.
	seen map[string]*corev1.Pod
	// lost are the sandboxes whose Pod went without the runtime deleting
	// it (eviction, node loss, a person), until Delete.
	lost map[string]lostPod
	// deleting are the ids whose Pod the runtime deletes itself.
	deleting map[string]bool
	accesses map[string]access
	// clients are the agents' clients by sandbox id, each for the Pod it
	// was made for: one pool of connections per agent, as on oci.
	clients map[string]podClient
	// changed is closed and replaced whenever seen changes.
	changed chan struct{}
	// serving stops serving the daemon's services to a running sandbox,
	// by id (serve).
	serving map[string]func()
}

// podClient is the client of the agent of the Pod whose UID is uid.
type podClient struct {
	uid types.UID
	c   *agent.Client
}

type lostPod struct {
	reason string
	spec   *specJSON
}

// New returns a Runtime whose Pod informer has synced. Close stops it.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	switch {
	case cfg.Rest == nil:
		return nil, errdefs.Invalid("kubernetes runtime: no API server configuration")
	case cfg.Namespace == "":
		return nil, errdefs.Invalid("kubernetes runtime: no namespace")
	case cfg.AgentImage == "":
		return nil, errdefs.Invalid("kubernetes runtime: no agent image (the agent2env image, make image)")
	}
	if cfg.Owner == "" {
		cfg.Owner = "agent2env"
	}
	if cfg.DaemonLabels == nil {
		cfg.DaemonLabels = DefaultDaemonLabels
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	client, err := kubernetes.NewForConfig(cfg.Rest)
	if err != nil {
		return nil, errdefs.Invalid("kubernetes runtime: %v", err)
	}
	r := &Runtime{
		cfg: cfg, client: client, pods: client.CoreV1().Pods(cfg.Namespace), log: cfg.Logger,
		pc: podConfig{owner: cfg.Owner, agentImage: cfg.AgentImage, runtimeClass: cfg.RuntimeClass, pullSecrets: cfg.PullSecrets,
			services: cfg.Services != nil},
		seen: map[string]*corev1.Pod{}, lost: map[string]lostPod{}, deleting: map[string]bool{},
		accesses: map[string]access{}, clients: map[string]podClient{}, changed: make(chan struct{}), serving: map[string]func(){},
	}
	switch cfg.Connect {
	case "", ConnectDirect:
		r.dial = dialDirect
	case ConnectPortForward:
		if r.dial, err = portForwarder(cfg.Rest, client); err != nil {
			return nil, err
		}
	default:
		return nil, errdefs.Invalid("kubernetes runtime: connect %q is neither %s nor %s", cfg.Connect, ConnectDirect, ConnectPortForward)
	}
	selector := labels.SelectorFromSet(labels.Set{LabelOwner: cfg.Owner}).String()
	// The informer retries what fails, forever: fail here instead, with
	// the API server's answer (no such namespace, no RBAC).
	if _, err := r.pods.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1}); err != nil {
		return nil, fmt.Errorf("kubernetes runtime: list the pods of namespace %s: %w", cfg.Namespace, classify(err))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := factory.Core().V1().Pods().Informer()
	// Thousands of Pods stay in memory: without their managed fields,
	// which nothing here reads, each is about half the size.
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.observe,
		UpdateFunc: func(_, obj any) { r.observe(obj) },
		DeleteFunc: r.forget,
	}); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	r.stop, r.stopped, r.done = stop, runCtx.Done(), make(chan struct{})
	factory.Start(runCtx.Done())
	go func() {
		<-runCtx.Done()
		factory.Shutdown()
		close(r.done)
	}()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		r.Close()
		return nil, fmt.Errorf("kubernetes runtime: list the pods of namespace %s: %w", cfg.Namespace, errors.Join(errdefs.ErrUnavailable, syncCtx.Err()))
	}
	if cfg.CheckNetworkPolicies {
		go r.warnUnenforcedPolicies(runCtx)
	}
	return r, nil
}

func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Ping checks that the cluster's API server answers and is ready (its
// /readyz, which every authenticated client may read): the daemon's
// readiness check.
func (r *Runtime) Ping(ctx context.Context) error {
	if _, err := r.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("kubernetes API server: %w", err)
	}
	return nil
}

// Close stops serving sandboxes and the informer, and waits for them.
// Sandboxes keep running; a new Runtime's Recover serves them again.
func (r *Runtime) Close() {
	r.unserveAll()
	r.stop()
	<-r.done
}

func (r *Runtime) Name() string { return Name }

// Capabilities: Pods lose their emptyDirs when stopped (a persistent
// sandbox's files stay on its claim: Persistence) and run on other
// machines; egress policies are enforced by the daemon's egress proxy when
// it has one (Config.Egress). What Kubernetes enforces its own way: the
// kubelet evicts a Pod over its ephemeral-storage limit (no ENOSPC), a Pod
// has an interface that its NetworkPolicy restricts (no egress at all: the
// daemon dials in for the proxy and services), which holds only where the
// cluster's network plugin enforces NetworkPolicies
// (CheckNetworkPolicies). The sandbox's seccomp
// policy is the agent's, as on every runtime, under the container
// runtime's RuntimeDefault profile.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	c := capabilities
	c.NetworkPolicy = r.cfg.Egress != nil
	return c
}

// capabilities are those of every kubernetes runtime: a persistent
// sandbox's files are on a PersistentVolumeClaim of the storage class it
// names, and a Pod's runtimeClassName is the sandbox's (or the runtime's).
var capabilities = sandbox.Capabilities{Persistence: true, StorageClass: true, RuntimeClass: true}

// observe records a Pod the informer added or updated.
func (r *Runtime) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	id, _, err := sandboxOf(pod, r.cfg.Owner)
	if err != nil {
		r.log.Warn("ignore pod", "pod", pod.Name, "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[id] = pod
	delete(r.lost, id)
	r.notify()
}

// forget drops a deleted Pod, and remembers its sandbox as lost when the
// runtime did not delete it.
func (r *Runtime) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	id, spec, err := sandboxOf(pod, r.cfg.Owner)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.seen[id]; cur == nil || cur.UID != pod.UID {
		return
	}
	delete(r.seen, id)
	if !r.deleting[id] {
		reason := "pod deleted" + disruption(pod)
		if state, why := podState(pod); state == sandbox.StateStopped && why != "" && pod.DeletionTimestamp == nil {
			reason = why
		}
		r.lost[id] = lostPod{reason: reason, spec: spec}
		r.log.Warn("sandbox pod gone", "sandbox", id, "reason", reason)
	}
	r.notify()
}

// notify wakes the waiters; r.mu is held.
func (r *Runtime) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitPod waits until done, called with the sandbox's Pod as the handlers
// saw it last (nil: none), returns true or an error. It gives up with
// ErrUnavailable once the runtime is closed: the handlers see nothing
// more then, and a wait without a deadline would never end.
func (r *Runtime) waitPod(ctx context.Context, id string, done func(pod *corev1.Pod) (bool, error)) error {
	for {
		r.mu.Lock()
		pod, changed := r.seen[id], r.changed
		r.mu.Unlock()
		ok, err := done(pod)
		if err != nil || ok {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stopped:
			return fmt.Errorf("pod of sandbox %s: %w", id, errClosed)
		}
	}
}

// errClosed is what waits on Pods end with once the runtime is closed.
var errClosed = fmt.Errorf("kubernetes runtime closed: %w", errdefs.ErrUnavailable)

// lookup returns the sandbox's Pod, or, for a lost one, nil and its record.
func (r *Runtime) lookup(id string) (*corev1.Pod, *lostPod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pod := r.seen[id]; pod != nil {
		return pod, nil, nil
	}
	if l, ok := r.lost[id]; ok {
		return nil, &l, nil
	}
	return nil, nil, errdefs.NotFound("sandbox %s not found", id)
}

func (r *Runtime) Create(ctx context.Context, spec *sandbox.Spec) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	if spec.Network.Egress != nil && r.cfg.Egress == nil {
		return errdefs.Invalid("sandbox %s needs network egress, which this runtime is not configured for", spec.ID)
	}
	id := spec.ID
	if _, _, err := r.lookup(id); err == nil {
		return errdefs.Conflict("sandbox %s already exists", id)
	}
	s := &specJSON{
		ID: id, Image: spec.Image, Env: spec.Env, Cwd: spec.Cwd, Resources: spec.Resources,
		Labels: spec.Labels, Egress: spec.Network.Egress, CreatedAt: time.Now().UTC().Truncate(time.Second),
		Persistence: spec.Persistence, RuntimeClass: spec.RuntimeClass,
	}
	// The Pod first: a name taken is a sandbox that exists, whose Secret
	// and policy must not be touched. Start makes them if a crash left
	// them unmade.
	if err := r.createPod(ctx, s, "", true); err != nil {
		if errors.Is(err, errdefs.ErrAlreadyExists) {
			return errdefs.Conflict("sandbox %s already exists", id)
		}
		return fmt.Errorf("create sandbox %s: %w", id, err)
	}
	made, err := r.ensureClaim(ctx, s)
	if err == nil {
		err = r.ensureAccess(ctx, id)
	}
	if err != nil {
		ctx := context.WithoutCancel(ctx)
		errs := []error{fmt.Errorf("create sandbox %s: %w", id, err), r.Delete(ctx, id)}
		if made { // whatever its policy: no sandbox had files there
			errs = append(errs, r.deleteClaim(ctx, id, false))
		}
		return errors.Join(errs...)
	}
	return nil
}

// createPod creates a gated Pod of s (its first, or one that replaces
// another) and waits for the informer to see it.
func (r *Runtime) createPod(ctx context.Context, s *specJSON, state string, first bool) error {
	pod, err := r.pc.pod(s, state, first)
	if err != nil {
		return err
	}
	made, err := r.pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return classify(err)
	}
	return r.waitPod(ctx, s.ID, func(p *corev1.Pod) (bool, error) { return p != nil && p.UID == made.UID, nil })
}

// ensureAccess makes the sandbox's NetworkPolicy and Secret unless they
// exist, and learns how to reach the agent.
func (r *Runtime) ensureAccess(ctx context.Context, id string) error {
	np := r.pc.policy(id, r.cfg.DaemonLabels)
	if _, err := r.client.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create network policy: %w", classify(err))
	}
	data, err := newSecretData()
	if err != nil {
		return err
	}
	if _, err := r.client.CoreV1().Secrets(r.cfg.Namespace).Create(ctx, r.pc.secret(id, data), metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			_, err = r.access(ctx, id)
			return err
		}
		return fmt.Errorf("create agent secret: %w", classify(err))
	}
	a, err := accessOf(data)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.accesses[id] = a
	r.mu.Unlock()
	return nil
}

// access returns how to reach the sandbox's agent, from its Secret.
func (r *Runtime) access(ctx context.Context, id string) (access, error) {
	r.mu.Lock()
	a, ok := r.accesses[id]
	r.mu.Unlock()
	if ok {
		return a, nil
	}
	sec, err := r.client.CoreV1().Secrets(r.cfg.Namespace).Get(ctx, objectName(id), metav1.GetOptions{})
	if err != nil {
		return access{}, fmt.Errorf("read the agent secret of sandbox %s: %w", id, classify(err))
	}
	if sec.Labels[LabelOwner] != r.cfg.Owner || sec.Labels[LabelSandbox] != id {
		return access{}, fmt.Errorf("the agent secret of sandbox %s is not one this daemon made", id)
	}
	if a, err = accessOf(sec.Data); err != nil {
		return access{}, fmt.Errorf("the agent secret of sandbox %s: %w", id, err)
	}
	r.mu.Lock()
	r.accesses[id] = a
	r.mu.Unlock()
	return a, nil
}

func (r *Runtime) Start(ctx context.Context, id string) error {
	if err := r.start(ctx, id); err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	if pod, _, err := r.lookup(id); err == nil && pod != nil {
		if _, spec, err := sandboxOf(pod, r.cfg.Owner); err == nil {
			r.serve(id, spec.Egress)
		}
	}
	return nil
}

func (r *Runtime) start(ctx context.Context, id string) error {
	pod, lost, err := r.lookup(id)
	if err != nil {
		return err
	}
	switch {
	case lost != nil:
		// Its Pod went (evicted): make it again.
		if lost.spec == nil {
			return fmt.Errorf("sandbox lost (%s) without its spec", lost.reason)
		}
		if err := r.createPod(ctx, lost.spec, "", false); err != nil {
			return err
		}
	case !gated(pod):
		if state, _ := podState(pod); state == sandbox.StateRunning {
			return nil
		}
		// Ended (failed, evicted) or being deleted: replace it.
		if err := r.replace(ctx, id, pod, "", 0); err != nil {
			return err
		}
	}
	r.mu.Lock()
	_, known := r.accesses[id]
	r.mu.Unlock()
	if !known { // made before a restart: a crash may have left them unmade
		if err := r.ensureAccess(ctx, id); err != nil {
			return err
		}
		if pod, _, err := r.lookup(id); err == nil && pod != nil {
			if _, spec, err := sandboxOf(pod, r.cfg.Owner); err == nil {
				if _, err := r.ensureClaim(ctx, spec); err != nil {
					return err
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	if pod, _, err = r.lookup(id); err != nil || pod == nil {
		return errors.Join(errdefs.ErrNotFound, err)
	}
	if err := r.ungate(ctx, pod); err != nil {
		return err
	}
	err = r.waitPod(ctx, id, func(p *corev1.Pod) (bool, error) {
		if p == nil || p.UID != pod.UID {
			return false, errors.New("its pod was deleted while starting")
		}
		if gated(p) {
			return false, nil // the informer has not seen the patch yet
		}
		if err := imageMissing(p); err != nil {
			return false, err
		}
		switch state, why := podState(p); {
		case state == sandbox.StateRunning:
			return p.Status.PodIP != "", nil
		case state == sandbox.StateStopped, state == sandbox.StateCreated && why != "":
			return false, errors.New(why)
		}
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		if p, _, lerr := r.lookup(id); lerr == nil && p != nil {
			err = fmt.Errorf("its Pod did not start within %s (%s): %w", r.cfg.StartTimeout, notStarted(p), err)
		}
	}
	if err != nil {
		return err
	}
	c, err := r.Agent(ctx, id)
	if err != nil {
		return err
	}
	// The container runs: the agent listens a moment later. The
	// connection stays open for what comes next.
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Info(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for agent: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// notStarted says why pod has not started, for a start that gave up
// waiting: the scheduler's reason while it is unscheduled ("0/3 nodes are
// available: 3 Insufficient cpu"), else what a container waits for, else
// its phase.
func notStarted(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return strings.TrimSuffix("not scheduled: "+c.Reason+": "+c.Message, ": ")
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				return strings.TrimSuffix(fmt.Sprintf("container %s waits: %s: %s", cs.Name, w.Reason, w.Message), ": ")
			}
		}
	}
	return "pod phase " + string(pod.Status.Phase)
}

// ungate removes the start gate from pod, so that the scheduler places it.
func (r *Runtime) ungate(ctx context.Context, pod *corev1.Pod) error {
	var rest []corev1.PodSchedulingGate
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name != startGate {
			rest = append(rest, g)
		}
	}
	ops := []map[string]any{{"op": "test", "path": "/metadata/uid", "value": string(pod.UID)}}
	if len(rest) == 0 {
		ops = append(ops, map[string]any{"op": "remove", "path": "/spec/schedulingGates"})
	} else {
		ops = append(ops, map[string]any{"op": "replace", "path": "/spec/schedulingGates", "value": rest})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if _, err := r.pods.Patch(ctx, pod.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("remove the start gate: %w", classify(err))
	}
	return nil
}

func (r *Runtime) Stop(ctx context.Context, id string, timeout time.Duration) error {
	pod, lost, err := r.lookup(id)
	if err != nil {
		return err
	}
	r.unserve(id)
	switch {
	case lost != nil:
		return nil // gone already
	case gated(pod) && pod.Annotations[annotationState] == "stopped":
		return nil
	}
	if err := r.replace(ctx, id, pod, "stopped", timeout); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return nil
}

// replace deletes pod, giving its processes grace to exit, and puts a
// gated Pod of the same spec in its place.
func (r *Runtime) replace(ctx context.Context, id string, pod *corev1.Pod, state string, grace time.Duration) error {
	_, spec, err := sandboxOf(pod, r.cfg.Owner)
	if err != nil {
		return err
	}
	r.setDeleting(id, true)
	defer r.setDeleting(id, false)
	if err := r.deletePod(ctx, id, pod, grace); err != nil {
		return err
	}
	return r.createPod(ctx, spec, state, false)
}

func (r *Runtime) setDeleting(id string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.deleting[id] = true
	} else {
		delete(r.deleting, id)
	}
}

// forceAfter is how long past its grace period a deleted Pod may take to
// go before it is deleted by force: its node is gone (its kubelet would
// confirm the deletion), or the kubelet cannot kill it.
var forceAfter = 30 * time.Second

// deletePod deletes pod and waits until the informer has seen it go.
func (r *Runtime) deletePod(ctx context.Context, id string, pod *corev1.Pod, grace time.Duration) error {
	gone := func(p *corev1.Pod) (bool, error) { return p == nil || p.UID != pod.UID, nil }
	del := func(secs int64) error {
		err := r.pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &secs,
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete pod: %w", classify(err))
		}
		return nil
	}
	secs := int64((grace + time.Second - 1) / time.Second)
	if err := del(secs); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+forceAfter)
	err := r.waitPod(wait, id, gone)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	r.log.Warn("pod not gone after its grace period: deleting it by force", "sandbox", id, "pod", pod.Name)
	if err := del(0); err != nil {
		return err
	}
	return r.waitPod(ctx, id, gone)
}

func (r *Runtime) Delete(ctx context.Context, id string) error {
	pod, lost, err := r.lookup(id)
	if err != nil {
		return err
	}
	r.unserve(id)
	r.setDeleting(id, true)
	defer r.setDeleting(id, false)
	var spec *specJSON
	if lost != nil {
		spec = lost.spec
	}
	if pod != nil {
		if _, s, err := sandboxOf(pod, r.cfg.Owner); err == nil {
			spec = s
		}
		if err := r.deletePod(ctx, id, pod, time.Second); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	if err := r.releaseClaim(ctx, id, spec); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	// The policy last: Recover finds Secrets a crash left by their policy.
	if err := r.deleteAccess(ctx, id); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	r.mu.Lock()
	delete(r.lost, id)
	delete(r.accesses, id)
	if pc, ok := r.clients[id]; ok {
		pc.c.Close()
		delete(r.clients, id)
	}
	r.mu.Unlock()
	return nil
}

// deleteAccess deletes the sandbox's Secret, then its NetworkPolicy.
func (r *Runtime) deleteAccess(ctx context.Context, id string) error {
	name := objectName(id)
	if err := r.client.CoreV1().Secrets(r.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete agent secret: %w", classify(err))
	}
	if err := r.client.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete network policy: %w", classify(err))
	}
	return nil
}

func (r *Runtime) Status(_ context.Context, id string) (sandbox.Status, error) {
	pod, lost, err := r.lookup(id)
	if err != nil {
		return sandbox.Status{}, err
	}
	if lost != nil {
		return lostStatus(id, lost), nil
	}
	return r.status(id, pod), nil
}

func lostStatus(id string, l *lostPod) sandbox.Status {
	st := sandbox.Status{ID: id, State: sandbox.StateStopped, Reason: l.reason}
	if l.spec != nil {
		st.Labels, st.CreatedAt = l.spec.Labels, l.spec.CreatedAt
	}
	return st
}

func (r *Runtime) status(id string, pod *corev1.Pod) sandbox.Status {
	st := sandbox.Status{ID: id}
	st.State, st.Reason = podState(pod)
	if _, spec, err := sandboxOf(pod, r.cfg.Owner); err == nil {
		st.Labels, st.CreatedAt = spec.Labels, spec.CreatedAt
	}
	return st
}

// List answers from the informer's view: no API call.
func (r *Runtime) List(context.Context) ([]sandbox.Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]sandbox.Status, 0, len(r.seen)+len(r.lost))
	for id, pod := range r.seen {
		out = append(out, r.status(id, pod))
	}
	for id, l := range r.lost {
		out = append(out, lostStatus(id, &l))
	}
	return out, nil
}

// Agent returns the client of the sandbox's agent: the same one while its
// Pod is the same, whose connections stay open between calls (a client
// per call would dial, and leave a connection idle, every time).
func (r *Runtime) Agent(ctx context.Context, id string) (*agent.Client, error) {
	pod, _, err := r.lookup(id)
	if err != nil {
		return nil, err
	}
	a, err := r.access(ctx, id)
	if err != nil {
		return nil, err
	}
	var uid types.UID
	if pod != nil {
		uid = pod.UID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pc, ok := r.clients[id]
	if ok && pc.uid == uid {
		return pc.c, nil
	}
	if ok {
		pc.c.Close() // its connections went to the Pod replaced
	}
	c := agent.NewClient(func(ctx context.Context) (net.Conn, error) {
		pod, _, err := r.lookup(id)
		if err != nil {
			return nil, err
		}
		if pod == nil || pod.Status.PodIP == "" {
			return nil, errdefs.Unavailable("sandbox %s is not running", id)
		}
		conn, err := r.dial(ctx, pod)
		if err != nil || a.tls == nil {
			return conn, err
		}
		tc := tls.Client(conn, a.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("agent of sandbox %s: %w", id, err)
		}
		return tc, nil
	}, a.token)
	r.clients[id] = podClient{uid: uid, c: c}
	return c, nil
}

// Recover deletes what a crash left half-made — the Secrets, policies and
// (unless retained) volume claims of sandboxes without a Pod, Pods that
// are no well-formed sandbox of this owner — and returns the sandboxes the
// informer sees.
func (r *Runtime) Recover(ctx context.Context) ([]sandbox.Status, error) {
	selector := labels.SelectorFromSet(labels.Set{LabelOwner: r.cfg.Owner}).String()
	pods, err := r.pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("recover: list pods: %w", classify(err))
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if _, _, err := sandboxOf(pod, r.cfg.Owner); err != nil {
			r.log.Warn("recover: delete malformed pod", "pod", pod.Name, "err", err)
			if err := r.pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("recover: delete pod %s: %w", pod.Name, classify(err))
			}
		}
	}
	if err := r.recoverPrepulls(ctx); err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	if err := r.recoverClaims(ctx); err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	policies, err := r.client.NetworkingV1().NetworkPolicies(r.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("recover: list network policies: %w", classify(err))
	}
	for _, np := range policies.Items {
		id := np.Labels[LabelSandbox]
		if !validID.MatchString(id) || np.Name != objectName(id) {
			continue
		}
		if _, _, err := r.lookup(id); err == nil {
			continue
		}
		// Created before the list above? Its Pod would be in the cache:
		// the informer synced before Recover, and Create waits for it.
		r.log.Info("recover: delete the leftovers of sandbox", "sandbox", id)
		if err := r.deleteAccess(ctx, id); err != nil {
			return nil, fmt.Errorf("recover: %w", err)
		}
	}
	r.mu.Lock()
	running := map[string]*specJSON{}
	for id, pod := range r.seen {
		if state, _ := podState(pod); state == sandbox.StateRunning {
			if _, spec, err := sandboxOf(pod, r.cfg.Owner); err == nil {
				running[id] = spec
			}
		}
	}
	r.mu.Unlock()
	for id, spec := range running {
		r.serve(id, spec.Egress)
	}
	return r.List(ctx)
}

// classify maps API errors to errdefs classes.
func classify(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return errdefs.NotFound("%s", err)
	case apierrors.IsAlreadyExists(err):
		return errdefs.Conflict("%s", err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return errdefs.Invalid("%s", err)
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return errdefs.Unavailable("%s", err)
	}
	return err
}

// dialDirect dials the agent on the Pod's IP.
func dialDirect(ctx context.Context, pod *corev1.Pod) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(AgentPort)))
}
