package kubetest

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kwokStages are the stages kwok plays the fake nodes' kubelet with.
//
//go:embed kwok.yaml
var kwokStages []byte

// portForwardCRD lets the cluster tell kwok where each Pod's forwarded
// ports go.
//
//go:embed kwok-portforward-crd.yaml
var portForwardCRD []byte

// startTimeout bounds how long the control plane may take to come up; on a
// loaded two-core machine the API server alone can take half a minute.
const startTimeout = 3 * time.Minute

// serviceCIDR is the range of the Services' cluster IPs.
const serviceCIDR = "10.96.0.0/16"

const (
	// fakeNodeAnnotation marks the nodes kwok is the kubelet of.
	fakeNodeAnnotation = "kwok.x-k8s.io/node"
	// PodIPAnnotation is where the cluster writes the IP it chose for a
	// Pod once its [PodFunc] returned; kwok then makes the Pod Ready with
	// it as its podIP.
	PodIPAnnotation = "kubetest.agent2env/pod-ip"
)

// Options configure a [Cluster]. The zero value is one fake node whose
// Pods become Ready with an IP nothing answers on.
type Options struct {
	// Nodes is how many fake nodes the cluster has; 0 means 1.
	Nodes int
	// OnPod, when set, is called for every Pod scheduled to a fake node.
	OnPod PodFunc
	// ForwardPorts are the ports of every Pod that port-forwarding through
	// the API server reaches (kubectl port-forward, client-go's
	// portforward): each goes to the same port on the Pod's IP.
	ForwardPorts []int32

	// Set by StartNode: the address the API server serves on (loopback
	// when unset), and a real kubelet instead of kwok and fake nodes.
	apiAddress netip.Addr
	realNode   bool
}

// A Cluster is a running control plane with fake nodes. Its fields are
// set by [Start] and must not be changed.
type Cluster struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// Kubeconfig is a file holding Config, for kubectl and for a daemon
	// under test.
	Kubeconfig string
	// Client is a clientset on Config.
	Client kubernetes.Interface
	// Bin is the directory of the binaries (kubectl among them).
	Bin string
	// Nodes are the names of the fake nodes.
	Nodes []string

	dir    string
	procs  []*process
	pods   *podDispatcher
	pki    *pki   // the cluster's CA, for a real node's certificates
	server string // the API server's URL
}

// Start starts a cluster that the test's cleanup stops. It skips the test
// when the binaries are missing (see [Binaries]) and fails it when the
// cluster does not come up, with the tail of each component's log.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	return start(t, opts, Binaries(t))
}

// start starts a cluster from the binaries in bin.
func start(t testing.TB, opts Options, bin string) *Cluster {
	t.Helper()
	c := &Cluster{Bin: bin, dir: t.TempDir()}
	t.Cleanup(func() { c.stop(t) })
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.start(ctx, t, opts); err != nil {
		t.Fatalf("start the kubernetes test cluster: %v", err)
	}
	return c
}

// Kubectl runs kubectl against the cluster and returns its standard
// output; an error carries its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out, fmt.Errorf("kubectl %v: %w: %s", args, err, exit.Stderr)
	}
	return out, err
}

func (c *Cluster) start(ctx context.Context, t testing.TB, opts Options) error {
	for _, d := range []string{"pki", "logs", "etcd", "apiserver"} {
		if err := os.Mkdir(filepath.Join(c.dir, d), 0o700); err != nil {
			return err
		}
	}
	p, err := newPKI(filepath.Join(c.dir, "pki"))
	if err != nil {
		return err
	}
	c.pki = p
	loopback := net.IPv4(127, 0, 0, 1)
	apiAddress := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if opts.apiAddress.IsValid() {
		apiAddress = opts.apiAddress
	}
	servingCert, servingKey, err := p.issue("apiserver", "kube-apiserver", nil, apiAddress.AsSlice())
	if err != nil {
		return err
	}
	// The API server reaches kwok's kubelet server (port-forward) with its
	// own client certificate, and checks kwok's.
	kubeletClientCert, kubeletClientKey, err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return err
	}
	kwokCert, kwokKey, err := p.issue("kwok", "kwok", nil, loopback)
	if err != nil {
		return err
	}
	saKey, saPub, err := p.serviceAccountKey()
	if err != nil {
		return err
	}
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	// A port free on loopback is as good a guess for another address.
	server := "https://" + netip.AddrPortFrom(apiAddress, uint16(ports[2])).String()
	c.server = server
	kubeletPort := strconv.Itoa(ports[3])

	if err := c.run("etcd",
		"--name=kubetest",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		// A test's data need not survive a power cut, and fsync is most
		// of etcd's latency on a loaded disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "etcd", func(ctx context.Context) error {
		return httpOK(ctx, etcdURL+"/health")
	}); err != nil {
		return err
	}

	if err := c.run("kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address="+apiAddress.String(), "--advertise-address="+apiAddress.String(),
		"--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+filepath.Join(c.dir, "apiserver"),
		"--tls-cert-file="+servingCert, "--tls-private-key-file="+servingKey,
		"--client-ca-file="+p.CAFile(),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--kubelet-certificate-authority="+p.CAFile(),
		"--kubelet-client-certificate="+kubeletClientCert,
		"--kubelet-client-key="+kubeletClientKey,
		"--kubelet-preferred-address-types=InternalIP",
		// The kubernetes Service's endpoints would be a loopback address,
		// which the API refuses; with a real node there is no kube-proxy
		// to carry its ClusterIP, and Pods are told the address instead
		// (see [Node.APIServerEnv]).
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	); err != nil {
		return err
	}

	kubeconfig := func(name, user string, groups ...string) (string, error) {
		cert, key, err := p.issue(name, user, groups)
		if err != nil {
			return "", err
		}
		path := filepath.Join(c.dir, name+".kubeconfig")
		return path, writeKubeconfig(path, server, p.CAFile(), cert, key)
	}
	if c.Kubeconfig, err = kubeconfig("admin", "kubetest-admin", "system:masters"); err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	// The harness and the tests' bursts of creates must not be throttled by
	// client-go's defaults (5 qps).
	c.Config.QPS, c.Config.Burst = 500, 1000
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver", func(ctx context.Context) error {
		_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return err
	}

	kcm, err := kubeconfig("controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	if err := c.run("kube-controller-manager",
		"--kubeconfig="+kcm,
		"--leader-elect=false",
		"--secure-port=0",
		// Each controller as its own service account, with the roles
		// bootstrap RBAC gives it, as kubeadm runs them.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+saKey,
		"--root-ca-file="+p.CAFile(),
		"--cluster-name=kubetest",
	); err != nil {
		return err
	}
	scheduler, err := kubeconfig("scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	if err := c.run("kube-scheduler",
		"--kubeconfig="+scheduler,
		"--leader-elect=false",
		"--secure-port=0",
	); err != nil {
		return err
	}

	if opts.realNode {
		return c.waitForServiceAccount(ctx)
	}
	stages := filepath.Join(c.dir, "kwok.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return err
	}
	crd := filepath.Join(c.dir, "kwok-portforward-crd.yaml")
	if err := os.WriteFile(crd, portForwardCRD, 0o600); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "apply", "-f", crd); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/portforwards.kwok.x-k8s.io"); err != nil {
		return err
	}
	if err := c.run("kwok",
		"--kubeconfig="+c.Kubeconfig,
		"--config="+stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+fakeNodeAnnotation+"=fake",
		"--node-ip=127.0.0.1",
		"--node-lease-duration-seconds=40",
		// Its kubelet server, for port-forwards, configured per Pod by
		// PortForward objects.
		"--server-address=127.0.0.1:"+kubeletPort,
		"--node-port="+kubeletPort,
		"--tls-cert-file="+kwokCert, "--tls-private-key-file="+kwokKey,
		"--enable-crds=PortForward",
	); err != nil {
		return err
	}
	if err := c.addNodes(ctx, max(opts.Nodes, 1)); err != nil {
		return err
	}
	if err := c.waitForServiceAccount(ctx); err != nil {
		return err
	}
	c.pods, err = startPodDispatcher(t, c.Config, c.Nodes, opts)
	return err
}

// waitForServiceAccount waits for the controller manager to be up: once
// it has given the default namespace its service account, which
// admission wants of every Pod.
func (c *Cluster) waitForServiceAccount(ctx context.Context) error {
	return c.waitFor(ctx, "kube-controller-manager", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// addNodes creates n fake nodes, with room for thousands of Pods, and
// waits for kwok to make them Ready.
func (c *Cluster) addNodes(ctx context.Context, n int) error {
	room := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("256"),
		corev1.ResourceMemory:           resource.MustParse("1Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("10Ti"),
		corev1.ResourcePods:             resource.MustParse("5000"),
	}
	for i := range n {
		name := "kwok-node-" + strconv.Itoa(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{fakeNodeAnnotation: "fake"},
				Labels: map[string]string{
					corev1.LabelHostname: name,
					corev1.LabelOSStable: "linux",
					"kubernetes.io/arch": "amd64",
					"type":               "kwok",
				},
			},
			Status: corev1.NodeStatus{Allocatable: room, Capacity: room},
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		c.Nodes = append(c.Nodes, name)
	}
	for _, name := range c.Nodes {
		if err := c.waitFor(ctx, "kwok to make node "+name+" Ready", func(ctx context.Context) error {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return errors.New("not ready")
		}); err != nil {
			return err
		}
	}
	return nil
}

// waitFor polls cond until it returns nil, giving up when ctx ends or a
// component exits.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cond(attempt)
		cancel()
		if err == nil {
			return nil
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		for _, p := range c.procs {
			if p.exited() {
				return fmt.Errorf("wait for %s: %s exited: %v", what, p.name, p.cmd.ProcessState)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// stop stops the Pod dispatcher and the components, newest first, and
// fails the test for a component that exited on its own.
func (c *Cluster) stop(t testing.TB) {
	if c.pods != nil {
		c.pods.stop()
	}
	if t.Failed() && c.Kubeconfig != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := c.Kubectl(ctx, "get", "nodes,pods,events", "--all-namespaces", "-o", "wide")
		cancel()
		t.Logf("kubetest: the cluster as it failed:\n%s%v", out, err)
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.exited() {
			t.Errorf("kubetest: %s exited while the cluster ran: %v", p.name, p.cmd.ProcessState)
		}
		p.stop()
	}
	if t.Failed() {
		for _, p := range c.procs {
			t.Logf("kubetest: last lines of %s's log:\n%s", p.name, tail(p.log, 30))
		}
	}
}

func writeKubeconfig(path, server, ca, cert, key string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos["kubetest"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*cfg, path)
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
