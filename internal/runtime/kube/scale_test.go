package kube_test

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/runtime/kube/kubetest"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// scaleEnv sets how many sandboxes TestScale makes.
const scaleEnv = "AGENT2ENV_KUBE_SCALE"

// TestScale creates, starts, lists and deletes many sandboxes at once (1000,
// or $AGENT2ENV_KUBE_SCALE) and
// reports the create rate, the informer's latency and the runtime's memory
// per sandbox. Its Pods' agents are stubs that check the token and answer
// info: real agents would measure this machine, not the runtime.
func TestScale(t *testing.T) {
	n := 1000 // the figure; -short makes it 100
	if testing.Short() {
		n = 100
	}
	if v := os.Getenv(scaleEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of sandboxes", scaleEnv, v)
		}
	}
	var (
		mu     sync.Mutex
		client kubernetes.Interface
	)
	c := kubetest.Start(t, kubetest.Options{Nodes: 4, OnPod: func(ctx context.Context, pod *corev1.Pod, ip netip.Addr) error {
		mu.Lock()
		cl := client
		mu.Unlock()
		return stubAgent(ctx, cl, pod, ip)
	}})
	mu.Lock()
	client = c.Client
	mu.Unlock()

	goruntime.GC()
	var before goruntime.MemStats
	goruntime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rt, err := kube.New(ctx, kube.Config{Rest: c.Config, Namespace: namespace, Owner: "scale", AgentImage: agentImage})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("scale%04d", i)
	}
	creates, starts := make([]time.Duration, n), make([]time.Duration, n)
	begin := time.Now()
	parallel(n, 32, func(i int) {
		t0 := time.Now()
		if err := rt.Create(ctx, &sandbox.Spec{ID: ids[i], Image: testImage,
			Resources: sandbox.Resources{MilliCPU: 100, MemoryBytes: 64 << 20}}); err != nil {
			t.Errorf("Create %s: %v", ids[i], err)
			return
		}
		t1 := time.Now()
		if err := rt.Start(ctx, ids[i]); err != nil {
			t.Errorf("Start %s: %v", ids[i], err)
			return
		}
		creates[i], starts[i] = t1.Sub(t0), time.Since(t1)
	})
	ready := time.Since(begin)
	if t.Failed() {
		t.FailNow()
	}

	t0 := time.Now()
	list, err := rt.List(ctx)
	listTime := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, st := range list {
		if st.State == sandbox.StateRunning {
			running++
		}
	}
	if running != n {
		t.Errorf("List: %d of %d sandboxes running", running, n)
	}
	goruntime.GC()
	var after goruntime.MemStats
	goruntime.ReadMemStats(&after)
	perSandbox := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)

	begin = time.Now()
	parallel(n, 32, func(i int) {
		if err := rt.Delete(ctx, ids[i]); err != nil {
			t.Errorf("Delete %s: %v", ids[i], err)
		}
	})
	deleted := time.Since(begin)
	if list, _ := rt.List(ctx); len(list) != 0 {
		t.Errorf("List after deleting all: %d sandboxes", len(list))
	}

	t.Logf("%d sandboxes on %d kwok nodes: ready in %v (%.0f/s); Create (API + informer) p50 %v p99 %v; Start p50 %v p99 %v; List %v; heap %d KiB per sandbox; deleted in %v (%.0f/s)",
		n, len(c.Nodes), ready.Round(time.Millisecond), float64(n)/ready.Seconds(),
		pct(creates, 50), pct(creates, 99), pct(starts, 50), pct(starts, 99), listTime,
		perSandbox>>10, deleted.Round(time.Millisecond), float64(n)/deleted.Seconds())
	// Bounds that hold on a loaded machine; the figures above are the point.
	if listTime > 100*time.Millisecond {
		t.Errorf("List of %d sandboxes took %v: it must answer from the informer", n, listTime)
	}
	if perSandbox > 256<<10 {
		t.Errorf("the runtime holds %d KiB per sandbox", perSandbox>>10)
	}
}

// stubAgent answers the agent's info on the Pod's IP, over TLS with the
// certificate of the Pod's Secret, to who holds its token, until ctx ends.
func stubAgent(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ip netip.Addr) error {
	sec, err := client.CoreV1().Secrets(pod.Namespace).Get(ctx, "a2e-"+pod.Labels[kube.LabelSandbox], metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := []byte("Bearer " + string(sec.Data["token"]))
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", netip.AddrPortFrom(ip, kube.AgentPort).String())
	if err != nil {
		return err
	}
	l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 || r.URL.Path != "/v1/info" {
			http.Error(w, `{"error":"no"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	})}
	go srv.Serve(l)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return nil
}

// parallel runs f(0..n-1) on at most k goroutines.
func parallel(n, k int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, k)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(time.Millisecond)
}
