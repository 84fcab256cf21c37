package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/testenv"
)

// peerNamespace holds the Pods the egress checks talk to and from: no
// NetworkPolicy selects them, so they reach and are reached by anything
// on the Pods' network.
const peerNamespace = metav1.NamespaceDefault

// peerPort is where the peer Pod and the test's own server listen.
const peerPort = 8080

// NetnsAddr is the address of the test's own server on the Pods' bridge
// ([Node.EgressTargets]), above the range the node's IPAM gives Pods.
func (n *Node) NetnsAddr() netip.Addr {
	a := n.PodCIDR.Addr().As4()
	a[3] = 250
	return netip.AddrFrom4(a)
}

// podRangeEnd is the last address the IPAM gives a Pod of n: the
// addresses above are the tests' own.
func (n *Node) podRangeEnd() netip.Addr {
	a := n.PodCIDR.Addr().As4()
	a[3] = 239
	return netip.AddrFrom4(a)
}

// EgressTargets returns runtimetest's Factory.EgressTargets for the
// node's sandboxes: a Pod of another namespace (peerNamespace), the
// kubelet's port and the API server on the node's address, and a server
// of the test's own in a network namespace on the Pods' bridge. Before
// giving them it checks, from a Pod that no NetworkPolicy selects (made
// of image, the runtimetest image), that each answers, and waits for the
// firewall to police the sandbox's Pod. What it makes goes when t ends.
func (n *Node) EgressTargets(t *testing.T, image string) func(t *testing.T, id string) []runtimetest.EgressTarget {
	var (
		once    sync.Once
		targets []runtimetest.EgressTarget
		err     error
	)
	setUp := func() {
		targets, err = n.egressTargets(t, image)
	}
	return func(st *testing.T, id string) []runtimetest.EgressTarget {
		st.Helper()
		once.Do(setUp)
		if err != nil {
			st.Fatalf("kubetest: egress targets: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pods, lerr := n.Client.CoreV1().Pods(SandboxNamespace).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelSandbox + "=" + id})
		if lerr != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
			st.Fatalf("kubetest: the pod of %s: %v", id, lerr)
		}
		if werr := n.waitForPolicy(ctx, pods.Items[0].Status.PodIP); werr != nil {
			st.Fatalf("kubetest: %v", werr)
		}
		return targets
	}
}

// egressTargets makes the peer Pod and the test's server, and checks
// that a Pod under no policy reaches them all.
func (n *Node) egressTargets(t *testing.T, image string) ([]runtimetest.EgressTarget, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	peer, err := n.runPeer(ctx, t)
	if err != nil {
		return nil, err
	}
	server, err := n.netnsServer(t)
	if err != nil {
		return nil, err
	}
	node, err := n.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(n.server, "https://"))
	host := n.HostIP.String()
	targets := []runtimetest.EgressTarget{
		{Name: "a pod of another namespace", Addr: net.JoinHostPort(peer, strconv.Itoa(peerPort))},
		{Name: "the kubelet", Addr: net.JoinHostPort(host, strconv.Itoa(int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)))},
		{Name: "the API server", Addr: net.JoinHostPort(host, apiPort)},
		{Name: "a server in a network namespace of the test", Addr: server},
	}
	return targets, n.checkReachable(ctx, t, image, targets)
}

// runPeer starts a Pod serving HTTP on peerPort in peerNamespace and
// returns its IP once it is Ready.
func (n *Node) runPeer(ctx context.Context, t *testing.T) (string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-peer"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "httpd", Image: n.Image(BusyboxImage),
			Command: []string{"httpd", "-f", "-p", strconv.Itoa(peerPort)},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(peerPort)},
			}, PeriodSeconds: 1},
		}}},
	}
	pods := n.Client.CoreV1().Pods(peerNamespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create the peer pod: %w", err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })
	var ip string
	err := n.waitFor(ctx, "the peer pod", func(ctx context.Context) error {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ip = p.Status.PodIP
				return nil
			}
		}
		return errors.New("not ready")
	})
	return ip, err
}

// netnsServer makes a network namespace ([testenv.Netns]) with a veth on
// the Pods' bridge at NetnsAddr and a TCP server in it, answering every
// connection, and returns its address.
func (n *Node) netnsServer(t *testing.T) (string, error) {
	nsPath, err := testenv.Netns(t)
	if err != nil {
		return "", err
	}
	veth := n.bridge + "s"
	for _, args := range [][]string{
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", nsPath},
		{"ip", "link", "set", veth, "master", n.bridge, "up"},
		{"nsenter", "--net=" + nsPath, "ip", "addr", "add", netip.PrefixFrom(n.NetnsAddr(), n.PodCIDR.Bits()).String(), "dev", "eth0"},
		{"nsenter", "--net=" + nsPath, "ip", "link", "set", "eth0", "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	addr := net.JoinHostPort(n.NetnsAddr().String(), strconv.Itoa(peerPort))
	l, err := testenv.ListenIn(nsPath, addr)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(conn, "the test's server")
			conn.Close()
		}
	}()
	return addr, nil
}

// checkReachable runs a Pod of image in peerNamespace, which no policy
// selects, that connects to every target with the runtimetest probe,
// and fails unless it reached them all: a sandbox that does not reach
// them is kept out by its policy, not by the network.
func (n *Node) checkReachable(ctx context.Context, t *testing.T, image string, targets []runtimetest.EgressTarget) error {
	var script strings.Builder
	for _, tg := range targets {
		fmt.Fprintf(&script, "echo %s $(%s connect %s)\n", tg.Addr, runtimetest.ProbePath, tg.Addr)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-control"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "probe", Image: image, Command: []string{"sh", "-c", script.String()},
			}},
		},
	}
	pods := n.Client.CoreV1().Pods(peerNamespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the control pod: %w", err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })
	if err := n.waitFor(ctx, "the control pod", func(ctx context.Context) error {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return nil
		}
		return errors.New(string(p.Status.Phase))
	}); err != nil {
		return err
	}
	out, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the control pod's log: %w", err)
	}
	var failed []string
	for _, tg := range targets {
		if !strings.Contains(string(out), tg.Addr+" ok\n") {
			failed = append(failed, tg.Name+" ("+tg.Addr+")")
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("a pod under no policy does not reach %s either, so a sandbox not reaching it proves nothing:\n%s",
			strings.Join(failed, ", "), out)
	}
	t.Logf("kubetest: a pod under no policy reaches every egress target:\n%s", out)
	return nil
}
