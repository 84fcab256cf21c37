package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// PodFunc prepares what answers on a Pod's IP, the way a kubelet starts a
// Pod's containers. It is called once per Pod scheduled to a fake node, in
// a goroutine of its own, with a copy of the Pod and the loopback address
// the Pod will have; when it returns nil the Pod becomes Ready with that
// IP. ctx ends when the Pod is deleted or the cluster stops, and whatever
// the function started must stop with it. An error fails the test and
// leaves the Pod Pending.
type PodFunc func(ctx context.Context, pod *corev1.Pod, ip netip.Addr) error

// podDispatcher watches the Pods on the fake nodes and runs the PodFunc
// for each new one.
type podDispatcher struct {
	t       testing.TB
	client  kubernetes.Interface
	dynamic dynamic.Interface
	nodes   []string
	onPod   PodFunc
	ports   []int32 // forwarded to every Pod's IP
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu   sync.Mutex
	live map[types.UID]context.CancelFunc // Pods whose PodFunc ran or runs
	ips  ipRange
	ctx  context.Context // the dispatcher's life; Pods' contexts derive from it
}

func startPodDispatcher(t testing.TB, config *rest.Config, nodes []string, opts Options) (*podDispatcher, error) {
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	onPod := opts.OnPod
	if onPod == nil {
		onPod = func(context.Context, *corev1.Pod, netip.Addr) error { return nil }
	}
	ips, err := newIPRange()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &podDispatcher{
		t: t, client: client, dynamic: dyn, nodes: nodes, onPod: onPod, ports: opts.ForwardPorts, cancel: cancel,
		live: map[types.UID]context.CancelFunc{}, ips: ips, ctx: ctx,
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.observe(obj) },
		UpdateFunc: func(_, obj any) { d.observe(obj) },
		DeleteFunc: d.forget,
	}); err != nil {
		cancel()
		ips.release()
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			ips.release()
			return nil, fmt.Errorf("sync the pod informer (%v)", typ)
		}
	}
	d.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	return d, nil
}

// observe starts the PodFunc of a Pod newly on a fake node. The Pods of
// a daemon's check of NetworkPolicies (kube.LabelNetcheck) are not
// sandboxes: a fake node has no network to check, and they never run
// (the check says it could not tell).
func (d *podDispatcher) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp != nil || pod.Annotations[PodIPAnnotation] != "" ||
		!slices.Contains(d.nodes, pod.Spec.NodeName) || pod.Labels[kube.LabelNetcheck] != "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, seen := d.live[pod.UID]; seen || d.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(d.ctx)
	d.live[pod.UID] = cancel
	ip := d.ips.next()
	pod = pod.DeepCopy()
	d.wg.Go(func() {
		if err := d.onPod(ctx, pod, ip); err != nil {
			if ctx.Err() == nil {
				d.t.Errorf("kubetest: start pod %s/%s: %v", pod.Namespace, pod.Name, err)
			}
			return
		}
		if err := d.forward(ctx, pod, ip); err != nil {
			if ctx.Err() == nil {
				d.t.Errorf("kubetest: forward the ports of pod %s/%s: %v", pod.Namespace, pod.Name, err)
			}
			return
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{PodIPAnnotation: ip.String()}},
		})
		_, err := d.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			d.t.Errorf("kubetest: give pod %s/%s its ip: %v", pod.Namespace, pod.Name, err)
		}
	})
}

// portForwards are kwok's PortForward objects.
var portForwards = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}

// forward tells kwok to send port-forwards to pod's ports d.ports to the
// same ports on ip. The Pod owns the PortForward: they go together.
func (d *podDispatcher) forward(ctx context.Context, pod *corev1.Pod, ip netip.Addr) error {
	if len(d.ports) == 0 {
		return nil
	}
	var forwards []any
	for _, port := range d.ports {
		forwards = append(forwards, map[string]any{
			"ports":  []any{int64(port)},
			"target": map[string]any{"port": int64(port), "address": ip.String()},
		})
	}
	pf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "PortForward",
		"metadata": map[string]any{
			"name":      pod.Name,
			"namespace": pod.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID),
			}},
		},
		"spec": map[string]any{"forwards": forwards},
	}}
	_, err := d.dynamic.Resource(portForwards).Namespace(pod.Namespace).Create(ctx, pf, metav1.CreateOptions{})
	return err
}

// forget ends the context of a deleted Pod's PodFunc.
func (d *podDispatcher) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cancel, ok := d.live[pod.UID]; ok {
		cancel()
		delete(d.live, pod.UID)
	}
}

// stop ends every PodFunc's context and waits for them to return.
func (d *podDispatcher) stop() {
	d.mu.Lock()
	d.cancel()
	d.mu.Unlock()
	d.wg.Wait()
	d.ips.release()
}

// ipRange hands out the addresses of 127.B.0.0/16 in turn. Every 127/8
// address is local on Linux: a test can listen on any of them with no
// setup. Clusters of tests running at once (packages, or two test runs,
// on one machine) must not share a B, or one Pod's agent would take
// another's address: a range holds its B by a listener of its own on
// 127.B.255.254, which no Pod is given, for as long as it is used.
type ipRange struct {
	b     byte
	n     int
	lease net.Listener
}

// ipLeasePort is the port of a range's lease, above the ephemeral ports
// (an outgoing connection never holds it) and unprivileged.
const ipLeasePort = 65534

// newIPRange takes a B no other range on this machine holds, trying them
// in random order.
func newIPRange() (ipRange, error) {
	for _, i := range rand.Perm(190) {
		b := byte(64 + i)
		l, err := net.Listen("tcp", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, b, 255, 254}), ipLeasePort).String())
		if err == nil {
			return ipRange{b: b, lease: l}, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return ipRange{}, fmt.Errorf("hold an address range for the pods: %w", err)
		}
	}
	return ipRange{}, errors.New("every 127.B.0.0/16 range for pods is held by another cluster")
}

// next returns the next address, skipping those ending in .0 and .255.
func (r *ipRange) next() netip.Addr {
	ip := netip.AddrFrom4([4]byte{127, r.b, byte(r.n / 254), byte(r.n%254 + 1)})
	r.n++
	return ip
}

// release lets another range take B.
func (r *ipRange) release() { _ = r.lease.Close() }

// EvictSandbox evicts the Pod named pod through the eviction API, as a
// drain would, behind the runtime's back, and waits until rt no longer
// reports sandbox id running.
func EvictSandbox(t testing.TB, client kubernetes.Interface, ns, pod string, rt sandbox.Runtime, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}}
	if err := client.CoreV1().Pods(ns).EvictV1(ctx, ev); err != nil {
		t.Fatalf("evict the pod of %s: %v", id, err)
	}
	for {
		st, err := rt.Status(ctx, id)
		if err != nil {
			t.Fatalf("Status of the evicted %s: %v", id, err)
		}
		if st.State != sandbox.StateRunning {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the runtime still reports the evicted %s running", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
