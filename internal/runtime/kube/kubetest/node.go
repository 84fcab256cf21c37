package kubetest

import (
	"archive/tar"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TierB are the binaries a [Node] runs besides those of the host's
// packages (see [RequireNode]).
var TierB = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-router"}

// NodeName is the name of a [Node]'s node (the kubelet's
// --hostname-override).
const NodeName = "localhost"

// nodeSetupCommand is what a developer runs to install the packages a
// Node needs.
const nodeSetupCommand = "make kube-binaries kube-node"

// hostTools are the programs of Debian's containerd, runc,
// containernetworking-plugins, iproute2, iptables and ipset packages a
// Node runs.
var hostTools = []string{
	"/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/sbin/runc",
	"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback", "/usr/sbin/ip",
	"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/ipset",
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// nodeStartTimeout bounds how long the node may take to become Ready once
// the control plane is up.
const nodeStartTimeout = 3 * time.Minute

// NodeOptions configure [StartNode]; the zero value is a node whose
// registry holds the busybox and pause images.
type NodeOptions struct {
	// Images are pushed to the node's registry before the kubelet
	// starts, keyed by repository:tag (no registry host); Pods name them
	// with [Node.Image].
	Images map[string]v1.Image
	// PodPidsLimit is the kubelet's podPidsLimit, the most processes a
	// Pod may have (Kubernetes has no limit per Pod); 0 means 4096.
	PodPidsLimit int64
}

// A Node is a [Cluster] (its control plane, without kwok) whose one node
// is real: a kubelet on the host, named [NodeName], running Pods with the
// host's containerd (its own instance: config, socket and directories in
// the test's temporary directory), runc and the CNI bridge plugin, and
// pulling their images from a registry on loopback over plain HTTP.
//
// The Pods are on a bridge of their own with a private /24 chosen at
// random (PodCIDR); the host is its gateway, HostIP, where the API server
// and the kubelet listen, so the Pods reach the API server and the host
// reaches the Pods' IPs. kube-router's firewall enforces the Pods'
// NetworkPolicies (see firewall.go). There is no kube-proxy and no cluster DNS:
// in-cluster clients are told the API server's address
// ([Node.APIServerEnv]) instead of finding it at the kubernetes
// Service's ClusterIP.
//
// The test's cleanup deletes the Pods (the kubelet tears them down), stops
// everything, and fails the test for anything left behind: a process,
// a mount, a network namespace, a cgroup, the bridge, the firewall's
// iptables chains and ipsets.
type Node struct {
	*Cluster
	// Registry is the host:port of the registry on loopback.
	Registry string
	// HostIP is the host's address on the Pods' bridge.
	HostIP netip.Addr
	// PodCIDR is the subnet of the Pods' IPs.
	PodCIDR netip.Prefix

	dir         string // under the cluster's directory
	bridge      string // the Pods' bridge's name
	cgroupRoot  string // the kubelet's --cgroup-root, /kubetest<hex>
	containerd  string // the containerd socket's path
	shimsBefore map[string]bool
	hostBefore  map[string]bool // which of hostPaths existed before
	fw          *firewall
}

// SandboxNamespace is the namespace a node's tests run sandboxes in. It
// enforces the restricted Pod Security Standard, as the namespace of
// deploy/kubernetes does: a sandbox's Pod (its agent's init containers
// included) that asked for more than that standard allows would be
// refused by the API server's admission, and the test would fail.
const SandboxNamespace = "sandboxes"

// RestrictedLabels are the labels that make the API server's Pod
// Security admission enforce the restricted standard in a namespace.
var RestrictedLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// sandboxNamespace makes [SandboxNamespace] with [RestrictedLabels].
func (n *Node) sandboxNamespace(ctx context.Context) error {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SandboxNamespace, Labels: RestrictedLabels}}
	if _, err := n.Client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the sandboxes' namespace: %w", err)
	}
	return nil
}

// hostPaths are where the kubelet, containerd and the CNI plugins keep
// things whatever directories they are given: the kubelet's device plugin
// socket, the shims' sockets, the network namespaces and the CNI result
// cache. The node removes those it made once they hold nothing but empty
// directories and sockets.
var hostPaths = []string{"/var/lib/kubelet", "/run/containerd", "/run/netns", "/var/lib/cni"}

// RequireNode skips the test, saying what to install, unless it runs as
// root on a host with the binaries of [TierB] and the packages a Node
// needs; under CI, where a missing prerequisite is a bug, it fails it.
func RequireNode(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		missingPrerequisite(t, "a kubernetes node needs root (run go test as root)")
	}
	bin := Binaries(t, TierB...)
	var missing []string
	for _, tool := range hostTools {
		if fi, err := os.Stat(tool); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(bridgeNFCallIPTables); err != nil {
		missing = append(missing, "br_netfilter (modprobe br_netfilter)")
	}
	if err := checkBusybox(); err != nil {
		missing = append(missing, "a static busybox ("+err.Error()+")")
	}
	if len(missing) > 0 {
		missingPrerequisite(t, fmt.Sprintf("a kubernetes node needs %s: install them with %q",
			strings.Join(missing, ", "), nodeSetupCommand))
	}
	return bin
}

// missingPrerequisite skips the test for what is missing, or under CI
// fails it (testenv.Missing).
func missingPrerequisite(t testing.TB, what string) {
	t.Helper()
	testenv.Missing(t, "%s", what)
}

// StartNode starts a control plane and a real node, and waits for the
// node to be Ready. It skips the test when a prerequisite is missing (see
// [RequireNode]) and fails it when the node does not come up, with the
// tail of each component's log.
func StartNode(t testing.TB, opts NodeOptions) *Node {
	t.Helper()
	bin := RequireNode(t)
	started := time.Now()
	n := &Node{cgroupRoot: fmt.Sprintf("/kubetest%08x", rand.Uint32())}
	var err error
	if n.PodCIDR, err = freeSubnet(); err != nil {
		t.Fatalf("kubetest: choose the pods' subnet: %v", err)
	}
	n.HostIP = n.PodCIDR.Addr().Next()
	n.bridge = fmt.Sprintf("kt%08x", rand.Uint32())
	if err := addBridge(n.bridge, netip.PrefixFrom(n.HostIP, n.PodCIDR.Bits())); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() {
		if err := exec.Command("ip", "link", "del", n.bridge).Run(); err != nil {
			t.Errorf("kubetest: remove the bridge %s: %v", n.bridge, err)
		}
	})

	regDir := t.TempDir()
	host, closeRegistry, err := startRegistry(regDir)
	if err != nil {
		t.Fatalf("kubetest: start the registry: %v", err)
	}
	t.Cleanup(closeRegistry)
	n.Registry = host
	busybox, pause, err := busyboxImages()
	if err != nil {
		t.Fatalf("kubetest: make the test images: %v", err)
	}
	images := map[string]v1.Image{BusyboxImage: busybox, pauseImage: pause}
	for ref, img := range opts.Images {
		images[ref] = img
	}
	for ref, img := range images {
		if _, err := push(host, ref, img); err != nil {
			t.Fatalf("kubetest: %v", err)
		}
	}

	lock, err := lockFirewall(t)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	n.fw = &firewall{lock: lock}
	// Registered before the node's: runs after it, once the Pods are gone.
	t.Cleanup(func() {
		for _, l := range n.stopFirewall() {
			t.Errorf("kubetest: the node left %s behind", l)
		}
	})
	n.Cluster = start(t, Options{apiAddress: n.HostIP, realNode: true}, bin)
	controlPlane := time.Since(started)
	n.dir = filepath.Join(n.Cluster.dir, "node")
	n.shimsBefore = listDir("/run/containerd/s")
	n.hostBefore = map[string]bool{}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		n.hostBefore[p] = err == nil
	}
	// Registered after the cluster's: runs before it, while the API
	// server still answers.
	t.Cleanup(func() { n.stop(t) })
	ctx, cancel := context.WithTimeout(context.Background(), nodeStartTimeout)
	defer cancel()
	if err := n.start(ctx, opts); err != nil {
		t.Fatalf("kubetest: start the node: %v", err)
	}
	if err := n.sandboxNamespace(ctx); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Logf("kubetest: node %s Ready in %v, the control plane's %v of it (pods on %s, registry %s)", NodeName,
		time.Since(started).Round(time.Millisecond), controlPlane.Round(time.Millisecond), n.PodCIDR, n.Registry)
	return n
}

// Image is the reference of the image repoTag in the node's registry.
func (n *Node) Image(repoTag string) string { return n.Registry + "/" + repoTag }

// Push pushes img to the node's registry as repoTag and returns its
// reference.
func (n *Node) Push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := push(n.Registry, repoTag, img)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return ref
}

// BinEnvVar names the agent2env binary the agent2env image is made of
// (make test sets it to bin/agent2env).
const BinEnvVar = "AGENT2ENV_BIN"

// SelfImage pushes the agent2env image (as make image builds it) of the
// static binary $AGENT2ENV_BIN and the agent2env-agent binary (built from
// this checkout, as make build does) to the node's registry as
// agent2env/agent2env:kubetest, and returns its reference. Without
// $AGENT2ENV_BIN it skips the test, or fails it under CI.
func (n *Node) SelfImage(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(BinEnvVar)
	if bin == "" {
		missingPrerequisite(t, "the agent2env image needs a static agent2env binary: set "+BinEnvVar+" (make build; bin/agent2env)")
	}
	img, err := image.SelfImage(bin, image.SelfImageOptions{
		Agent:   buildAgent(t),
		CACerts: "/etc/ssl/certs/ca-certificates.crt", Created: time.Unix(0, 0).UTC(), Version: "kubetest",
	})
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return n.Push(t, "agent2env/agent2env:kubetest", img)
}

// buildAgent builds cmd/agent2env-agent as make build does (static,
// stripped) and returns its path.
func buildAgent(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), "agent2env-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/agent2env-agent")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubetest: build agent2env-agent: %v: %s", err, b)
	}
	return out
}

// RuntimetestImage pushes the image the runtimetest conformance suite
// wants (its package comment: busybox applets on PATH, its probe at
// runtimetest.ProbePath and, setuid root, at SetuidProbePath) to the
// node's registry as kubetest/runtimetest:latest, and returns its
// reference: BusyboxImage with a layer of the probes, built by
// runtimetest.InstallProbes (the go command).
func (n *Node) RuntimetestImage(t testing.TB) string {
	t.Helper()
	busybox, _, err := busyboxImages()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	dir := t.TempDir()
	runtimetest.InstallProbes(t, dir)
	files := []tarFile{
		{tar.Header{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "usr/local/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "usr/local/bin/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
	}
	for _, p := range []string{runtimetest.ProbePath, runtimetest.SetuidProbePath} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		mode := int64(0o755)
		if p == runtimetest.SetuidProbePath {
			mode |= 0o4000
		}
		files = append(files, tarFile{tar.Header{Name: strings.TrimPrefix(p, "/"), Typeflag: tar.TypeReg, Mode: mode}, b})
	}
	probes, err := layer(files)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(busybox, probes)
	if err != nil {
		t.Fatal(err)
	}
	return n.Push(t, "kubetest/runtimetest:latest", img)
}

// bashStaticPath is Debian's bash-static (make kube-node installs it).
const bashStaticPath = "/bin/bash-static"

// BashImage pushes BusyboxImage with bash (Debian's static build at
// /bin/bash) to the node's registry as kubetest/bash:latest and returns
// its reference: enough for the bash kernel of contexts and sessions.
func (n *Node) BashImage(t testing.TB) string {
	t.Helper()
	busybox, _, err := busyboxImages()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	b, err := os.ReadFile(bashStaticPath)
	if err != nil {
		t.Fatalf("kubetest: read bash (install bash-static: make kube-node): %v", err)
	}
	bash, err := layer([]tarFile{{tar.Header{Name: "bin/bash", Typeflag: tar.TypeReg, Mode: 0o755}, b}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(busybox, bash)
	if err != nil {
		t.Fatal(err)
	}
	return n.Push(t, "kubetest/bash:latest", img)
}

// APIServerEnv are the variables that point an in-cluster client
// (client-go's rest.InClusterConfig) at the API server, for a Pod's
// containers: there is no kube-proxy to carry the kubernetes Service.
func (n *Node) APIServerEnv() []corev1.EnvVar {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(n.server, "https://"))
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: n.HostIP.String()},
		{Name: "KUBERNETES_SERVICE_PORT", Value: port},
	}
}

func (n *Node) start(ctx context.Context, opts NodeOptions) error {
	for _, d := range []string{"containerd", "net.d", "ipam", "kubelet", "pod-logs", "volume-plugins", "opt", "runc"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}
	if err := n.startKubelet(ctx, opts); err != nil {
		return err
	}
	// kube-router reads the node's address from its Node.
	return n.startFirewall(ctx)
}

// startContainerd writes containerd's config and CNI config and starts it.
func (n *Node) startContainerd(ctx context.Context) error {
	n.containerd = filepath.Join(n.dir, "containerd", "containerd.sock")
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubetest",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": false,
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q, "rangeEnd": %q}]],
      "routes": [{"dst": "0.0.0.0/0", "gw": %q}],
      "dataDir": %q
    }
  }]
}
`, n.bridge, n.PodCIDR, n.HostIP, n.podRangeEnd(), n.HostIP, filepath.Join(n.dir, "ipam"))
	if err := os.WriteFile(filepath.Join(n.dir, "net.d", "10-kubetest.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	// The gateway is the host's address on the bridge, made by
	// addBridge: isGateway would also turn on the host's IP forwarding,
	// which nothing here needs.
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # The kubelet asks for oom_score_adj values below the test's own, which
  # an unprivileged or nested process may not set: containerd keeps them
  # at least as high as its own.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "/usr/sbin/runc"
  Root = %[6]q
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = %[7]q
  conf_dir = %[8]q
  max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = %[9]q
`, filepath.Join(n.dir, "containerd", "root"), filepath.Join(n.dir, "containerd", "state"), n.containerd,
		filepath.Join(n.dir, "opt"), n.Image(pauseImage), filepath.Join(n.dir, "runc"), cniBinDir,
		filepath.Join(n.dir, "net.d"), filepath.Join(n.dir, "registries"))
	// The registry on loopback, over plain HTTP.
	hosts := fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", n.Registry)
	if err := os.MkdirAll(filepath.Join(n.dir, "registries", n.Registry), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "registries", n.Registry, "hosts.toml"), []byte(hosts), 0o600); err != nil {
		return err
	}
	path := filepath.Join(n.dir, "containerd", "config.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return err
	}
	if err := n.runPath("containerd", "/usr/bin/containerd", "--config", path, "--log-level", "warn"); err != nil {
		return err
	}
	return n.waitFor(ctx, "containerd", func(context.Context) error {
		conn, err := net.Dial("unix", n.containerd)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// startKubelet starts the kubelet, with certificates from the cluster's
// CA, and waits for its node to be Ready.
func (n *Node) startKubelet(ctx context.Context, opts NodeOptions) error {
	dir := filepath.Join(n.dir, "kubelet")
	clientCert, clientKey, err := n.pki.issue("kubelet-client", "system:node:"+NodeName, []string{"system:nodes"})
	if err != nil {
		return err
	}
	servingCert, servingKey, err := n.pki.issue("kubelet", NodeName, nil, n.HostIP.AsSlice())
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, n.server, n.pki.CAFile(), clientCert, clientKey); err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	config := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"address":                  n.HostIP.String(),
		"port":                     ports[0],
		"readOnlyPort":             0,
		"healthzPort":              0,
		"tlsCertFile":              servingCert,
		"tlsPrivateKeyFile":        servingKey,
		"containerRuntimeEndpoint": "unix://" + n.containerd,
		"imageServiceEndpoint":     "unix://" + n.containerd,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": n.pki.CAFile()},
		},
		"authorization": map[string]any{"mode": "Webhook"},
		// cgroupfs on v1, v1 hybrid and v2 alike: the node's cgroups are
		// a tree of its own (cgroupRoot) that containerd and the kubelet
		// agree on, and the systemd driver would need systemd as PID 1.
		"cgroupDriver": "cgroupfs",
		"cgroupRoot":   n.cgroupRoot,
		// Kubernetes 1.35 refuses cgroup v1 unless told otherwise; the
		// hosts here have the v1 hybrid hierarchy.
		"failCgroupV1":        false,
		"failSwapOn":          false,
		"podLogsDir":          filepath.Join(n.dir, "pod-logs"),
		"volumePluginDir":     filepath.Join(n.dir, "volume-plugins"),
		"staticPodPath":       "",
		"serializeImagePulls": false,
		"podPidsLimit":        cmp.Or(opts.PodPidsLimit, 4096),
		// A shared test machine's disk and memory are what they are:
		// evict nothing unless the host is all but full.
		"evictionHard": map[string]string{
			"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
		},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"nodeStatusReportFrequency":   "10s",
		"syncFrequency":               "10s",
		"fileCheckFrequency":          "10s",
		"shutdownGracePeriod":         "0s",
	}
	b, err := json.Marshal(config) // YAML, to the kubelet
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	if err := n.run("kubelet",
		"--config="+path,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(dir, "root"),
		"--cert-dir="+filepath.Join(dir, "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+n.HostIP.String(),
	); err != nil {
		return err
	}
	return n.waitFor(ctx, "the kubelet to make node "+NodeName+" Ready", func(ctx context.Context) error {
		node, err := n.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("not ready: %s", cond.Message)
			}
		}
		return errors.New("not ready")
	})
}

// stop deletes every Pod and waits for the kubelet to have torn them
// down, stops the kubelet and containerd, removes whatever they left, and
// fails the test for what it could not remove.
func (n *Node) stop(t testing.TB) {
	if n.containerd == "" {
		return // containerd never started, or the node stopped already
	}
	defer func() { n.containerd = "" }()
	// The Pods' sandboxes as they run: the kubelet's teardown removes
	// their network namespaces, the sweep cannot.
	sandboxes := n.sandboxes()
	if err := n.deletePods(); err != nil {
		t.Errorf("kubetest: delete the pods: %v", err)
	}
	// containerd before the sweep: it would clean up after the shims the
	// sweep kills, with processes of its own.
	for _, name := range []string{"kubelet", "containerd"} {
		for _, p := range n.procs {
			if p.name == name {
				p.stop()
			}
		}
	}
	n.sweepContainers(t)
	var leaks []string
	for id, netns := range sandboxes {
		if left := n.removeSandbox(id, netns); len(left) > 0 {
			leaks = append(leaks, "pod sandbox "+id+" not torn down: "+strings.Join(left, ", "))
		}
	}
	found, err := unmountUnder(n.dir)
	// The kubelet makes its root directory a mount point of its own.
	if found = slices.DeleteFunc(found, func(m string) bool {
		return strings.HasPrefix(m, filepath.Join(n.dir, "kubelet", "root")+" ")
	}); len(found) > 0 {
		t.Logf("kubetest: unmounted what the node left mounted: %s", strings.Join(found, ", "))
	}
	if err != nil {
		leaks = append(leaks, err.Error())
	}
	if err := removeCgroupRoot(n.cgroupRoot); err != nil {
		leaks = append(leaks, err.Error())
	}
	for s := range listDir("/run/containerd/s") {
		// A shim still listening is another node's: this one's are gone.
		if path := filepath.Join("/run/containerd/s", s); !n.shimsBefore[s] && !listening(path) {
			leaks = append(leaks, "shim socket "+path)
		}
	}
	for _, p := range processesMentioning(n.dir) {
		leaks = append(leaks, "process "+p)
	}
	for _, p := range hostPaths {
		if !n.hostBefore[p] {
			if err := removeEmptyTree(p); err != nil {
				leaks = append(leaks, err.Error())
			}
		}
	}
	for _, l := range leaks {
		t.Errorf("kubetest: the node left %s behind", l)
	}
}

// deletePods stops the controllers that would replace Pods, deletes every
// Pod, and waits for the kubelet to have torn them down: it finishes a
// Pod's deletion once its containers, volumes and cgroups are gone.
func (n *Node) deletePods() error {
	for _, p := range n.procs {
		if p.name == "kube-controller-manager" {
			p.stop()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := n.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	// Without a kubelet, nothing would finish the deletions: they are
	// forced, and the sweep removes the containers.
	grace, kubelet := int64(1), n.kubeletRunning()
	if !kubelet {
		grace = 0
	}
	for _, pod := range pods.Items {
		err := n.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if !kubelet {
		return nil
	}
	return n.waitFor(ctx, "the kubelet to tear the pods down", func(ctx context.Context) error {
		pods, err := n.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left, %s/%s among them", len(pods.Items), pods.Items[0].Namespace, pods.Items[0].Name)
		}
		return nil
	})
}

// kubeletRunning reports whether the kubelet runs.
func (n *Node) kubeletRunning() bool {
	for _, p := range n.procs {
		if p.name == "kubelet" {
			select {
			case <-p.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

// sandboxes returns the Pods' sandboxes that run, by id, with their
// network namespaces: the bundles whose OCI spec names a namespace by
// path.
func (n *Node) sandboxes() map[string]string {
	specs, _ := filepath.Glob(filepath.Join(n.dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "config.json"))
	found := map[string]string{}
	for _, path := range specs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var spec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string }
			}
		}
		if json.Unmarshal(b, &spec) != nil {
			continue
		}
		for _, ns := range spec.Linux.Namespaces {
			// A container joins its sandbox's namespace by /proc/<pid>.
			if ns.Type == "network" && ns.Path != "" && !strings.HasPrefix(ns.Path, "/proc/") {
				found[filepath.Base(filepath.Dir(path))] = ns.Path
			}
		}
	}
	return found
}

// removeSandbox removes what the sandbox id left outside the node's
// directory once its containers are gone: its network namespace, its CNI
// results, its shim's socket. It returns what it found.
func (n *Node) removeSandbox(id, netns string) []string {
	var left []string
	if _, err := os.Stat(netns); err == nil {
		left = append(left, "network namespace "+netns)
		_ = unix.Unmount(netns, unix.MNT_DETACH)
		_ = os.Remove(netns)
	}
	results, _ := filepath.Glob("/var/lib/cni/results/*-" + id + "-*")
	for _, r := range results {
		left = append(left, "CNI result "+r)
		_ = os.Remove(r)
	}
	// containerd's name for the shim's socket.
	sum := sha256.Sum256([]byte(filepath.Join(n.containerd, "k8s.io", id)))
	socket := filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:]))
	if _, err := os.Stat(socket); err == nil {
		left = append(left, "shim socket "+socket)
		_ = os.Remove(socket)
	}
	return left
}

// sweepContainers kills what the kubelet did not tear down: the containers
// in this containerd's runc root and its shims.
func (n *Node) sweepContainers(t testing.TB) {
	defer func() {
		for _, pid := range pidsMentioning(n.containerd) {
			if name, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); strings.HasSuffix(name, "containerd-shim-runc-v2") {
				t.Logf("kubetest: killing shim %d, left running", pid)
				_ = syscallKill(pid)
			}
		}
	}()
	roots, _ := filepath.Glob(filepath.Join(n.dir, "runc", "*"))
	for _, root := range roots {
		out, err := exec.Command("/usr/sbin/runc", "--root", root, "list", "-q").Output()
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			t.Logf("kubetest: removing container %s, left running", id)
			_ = exec.Command("/usr/sbin/runc", "--root", root, "delete", "--force", id).Run()
		}
	}
}
