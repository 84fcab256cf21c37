package kubetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestCluster creates a Pod with client-go, sees it become Ready through an
// informer with the IP the cluster chose, talks to what the PodFunc started
// there over TCP, directly and through kubectl port-forward (the API
// server, then kwok's kubelet server), deletes the Pod and sees that stop;
// then checks that
// stopping the cluster left no process behind.
func TestCluster(t *testing.T) {
	var dir string
	t.Run("pod", func(t *testing.T) {
		var (
			mu     sync.Mutex
			chosen = map[string]netip.Addr{}
		)
		c := Start(t, Options{OnPod: func(ctx context.Context, pod *corev1.Pod, ip netip.Addr) error {
			l, err := net.Listen("tcp", netip.AddrPortFrom(ip, 8080).String())
			if err != nil {
				return err
			}
			go func() {
				<-ctx.Done()
				l.Close()
			}()
			go greet(l, pod.Name)
			mu.Lock()
			chosen[pod.Name] = ip
			mu.Unlock()
			return nil
		}, ForwardPorts: []int32{8080}})
		dir = c.dir
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()

		out, err := c.Kubectl(ctx, "version", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Client struct{ GitVersion string } `json:"clientVersion"`
			Server struct{ GitVersion string } `json:"serverVersion"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("kubectl version: %v: %s", err, out)
		}
		if !regexp.MustCompile(`^v1\.\d+\.\d+$`).MatchString(v.Server.GitVersion) || v.Client.GitVersion != v.Server.GitVersion {
			t.Errorf("kubectl version: client %q, server %q; want the same release, set by the build", v.Client.GitVersion, v.Server.GitVersion)
		}

		ready := make(chan *corev1.Pod, 1)
		deleted := make(chan struct{})
		factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(metav1.NamespaceDefault))
		_, err = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) {
				if pod := obj.(*corev1.Pod); isReady(pod) {
					select {
					case ready <- pod:
					default:
					}
				}
			},
			DeleteFunc: func(any) { close(deleted) },
		})
		if err != nil {
			t.Fatal(err)
		}
		factory.Start(ctx.Done())
		defer func() {
			cancel() // Shutdown waits for the informer, which stops with ctx
			factory.Shutdown()
		}()
		factory.WaitForCacheSync(ctx.Done())

		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: new(false),
				Containers:                   []corev1.Container{{Name: "main", Image: "example.invalid/hello:1"}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		select {
		case got = <-ready:
		case <-ctx.Done():
			t.Fatal("the pod did not become ready")
		}
		mu.Lock()
		want := chosen["hello"].String()
		mu.Unlock()
		if diff := cmp.Diff([]string{want, want}, []string{got.Status.PodIP, got.Annotations[PodIPAnnotation]}); diff != "" {
			t.Errorf("pod ip, annotation (-want +got):\n%s", diff)
		}
		if got.Spec.NodeName != c.Nodes[0] {
			t.Errorf("pod scheduled to %q, want %q", got.Spec.NodeName, c.Nodes[0])
		}
		addr := net.JoinHostPort(got.Status.PodIP, "8080")
		if greeting, err := dialRead(addr); err != nil || greeting != "hello hello" {
			t.Errorf("the pod's ip answered %q, %v; want %q", greeting, err, "hello hello")
		}
		// The same, through the API server and kwok's kubelet server.
		if greeting, err := portForwardRead(ctx, c, "hello", 8080); err != nil || greeting != "hello hello" {
			t.Errorf("port-forward to the pod answered %q, %v; want %q", greeting, err, "hello hello")
		}

		if err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-deleted:
		case <-ctx.Done():
			t.Fatal("the pod was not deleted")
		}
		// The PodFunc's context ends with the Pod: its listener closes.
		for {
			_, err := dialRead(addr)
			if errors.Is(err, syscall.ECONNREFUSED) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the deleted pod's ip still answers: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if dir != "" {
		if leaked := processesMentioning(dir); len(leaked) > 0 {
			t.Errorf("processes left running after the cluster stopped:\n%s", strings.Join(leaked, "\n"))
		}
	}
}

// TestStartFailure checks that a component that cannot start fails Start
// with its name, rather than hanging until the timeout.
func TestStartFailure(t *testing.T) {
	// No real binary is needed: etcd, the first to start, exits at once.
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "etcd"), []byte("#!/bin/sh\necho no etcd here >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Bin: broken, dir: t.TempDir()}
	start := time.Now()
	err := c.start(context.Background(), t, Options{})
	c.stop(&quietTB{TB: t})
	if err == nil || !strings.Contains(err.Error(), "etcd exited") {
		t.Errorf("start with a broken etcd: %v; want an error naming etcd", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("start took %v to notice etcd exited", d)
	}
	if got := tail(filepath.Join(c.dir, "logs", "etcd.log"), 5); got != "no etcd here" {
		t.Errorf("etcd's log: %q", got)
	}
}

// quietTB takes the errors stop reports about components that exited,
// which TestStartFailure makes happen on purpose.
type quietTB struct {
	testing.TB
}

func (quietTB) Errorf(string, ...any) {}

func TestIPRange(t *testing.T) {
	r := ipRange{b: 100}
	var got []string
	for range 256 {
		got = append(got, r.next().String())
	}
	want := map[int]string{0: "127.100.0.1", 253: "127.100.0.254", 254: "127.100.1.1", 255: "127.100.1.2"}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("address %d: %s, want %s", i, got[i], w)
		}
	}
}

// TestIPRangeLease checks that ranges held at once, as by clusters of
// test processes running side by side, never share a B: each holds its
// lease, which no one else can take until it is released. (It takes 40
// of the 190, leaving the clusters of other packages running meanwhile
// their room.)
func TestIPRangeLease(t *testing.T) {
	held := map[byte]bool{}
	var ranges []ipRange
	t.Cleanup(func() {
		for i := range ranges {
			ranges[i].release()
		}
	})
	lease := func(b byte) string {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, b, 255, 254}), ipLeasePort).String()
	}
	for range 40 {
		r, err := newIPRange()
		if err != nil {
			t.Fatalf("range %d: %v", len(ranges)+1, err)
		}
		if held[r.b] {
			t.Fatalf("127.%d.0.0/16 handed out twice", r.b)
		}
		held[r.b] = true
		ranges = append(ranges, r)
		if l, err := net.Listen("tcp", lease(r.b)); err == nil {
			l.Close()
			t.Fatalf("the lease of 127.%d.0.0/16 could be taken while held", r.b)
		}
	}
	b := ranges[0].b
	ranges[0].release()
	l, err := net.Listen("tcp", lease(b))
	if err != nil {
		t.Fatalf("the lease of 127.%d.0.0/16 after its release: %v", b, err)
	}
	l.Close()
}

func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// greet answers every connection on l with "hello name".
func greet(l net.Listener, name string) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(conn, "hello %s\n", name)
		conn.Close()
	}
}

// portForwardRead runs kubectl port-forward to the pod's port and reads a
// line through it.
func portForwardRead(ctx context.Context, c *Cluster, pod string, port int) (string, error) {
	addr, stop, err := portForward(ctx, c, pod, port)
	if err != nil {
		return "", err
	}
	defer stop()
	return dialRead(addr)
}

func dialRead(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}
