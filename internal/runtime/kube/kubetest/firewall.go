package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A node's NetworkPolicies are enforced by kube-router's firewall alone
// (no routing, no service proxy): iptables chains of the host's filter
// table, per Pod and per policy, that match the Pods' traffic against
// ipsets of their peers. kube-router is built from the Go module proxy
// (scripts/kube-binaries.sh, tier b) and needs only iptables and ipset
// (make kube-node); the Pods' bridge must hand its traffic to iptables
// (bridge-nf-call-iptables), which the node turns on while it runs.
//
// Those chains and sets are the host's, and kube-router removes those it
// does not know of: two firewalls at once would undo each other's work.
// A node holds firewallLock from the firewall's start to its cleanup, so
// that the nodes of other tests on the host wait their turn.

// firewallLock is the file whose lock a node running a firewall holds.
const firewallLock = "/run/lock/agent2env-kubetest-firewall.lock"

// bridgeNFCallIPTables is the switch that passes bridged IPv4 traffic
// through iptables (br_netfilter).
const bridgeNFCallIPTables = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// Names of what kube-router's firewall makes: chains of the filter table
// and ipsets.
var (
	firewallChainPrefixes = []string{"KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-"}
	firewallSetPrefixes   = []string{"KUBE-SRC-", "KUBE-DST-"}
)

// firewall is the state of a node's firewall.
type firewall struct {
	lock     *os.File
	bridgeNF []byte // bridge-nf-call-iptables before the node set it
}

// firewallLockTimeout bounds the wait for another node's firewall: a
// whole tier-B test of another package.
const firewallLockTimeout = 20 * time.Minute

// lockFirewall takes firewallLock, waiting while another node holds it.
func lockFirewall(t testing.TB) (*os.File, error) {
	lock, err := os.OpenFile(firewallLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("firewall lock: %w", err)
	}
	for start := time.Now(); ; {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if waited := time.Since(start); waited > time.Second {
				t.Logf("kubetest: waited %v for another node's firewall to stop", waited.Round(time.Second))
			}
			return lock, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Since(start) > firewallLockTimeout {
			lock.Close()
			return nil, fmt.Errorf("firewall lock %s (another node's test holds it): %w", firewallLock, err)
		}
		time.Sleep(time.Second)
	}
}

// startFirewall (with the lock held) removes what a firewall killed before
// its cleanup left, turns bridge-nf-call-iptables on and starts
// kube-router's firewall for the node, then waits for its chains.
func (n *Node) startFirewall(ctx context.Context) error {
	var err error
	// With the lock, no firewall runs: what is there was left by a test
	// killed before its cleanup.
	if _, err := removeFirewallState(); err != nil {
		return err
	}
	if n.fw.bridgeNF, err = os.ReadFile(bridgeNFCallIPTables); err != nil {
		return fmt.Errorf("the pods' bridge needs br_netfilter: %w", err)
	}
	if err := os.WriteFile(bridgeNFCallIPTables, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("turn on %s: %w", bridgeNFCallIPTables, err)
	}
	if err := n.run("kube-router",
		"--kubeconfig="+n.Kubeconfig,
		"--hostname-override="+NodeName,
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
		"--enable-ipv4=true", "--enable-ipv6=false",
		"--service-cluster-ip-range="+serviceCIDR,
		"--health-port=0", "--metrics-port=0",
		"--v=1",
	); err != nil {
		return err
	}
	return n.waitFor(ctx, "kube-router's firewall", func(context.Context) error {
		return exec.Command("iptables", "-w", "-n", "-L", "KUBE-ROUTER-FORWARD").Run()
	})
}

// stopFirewall stops kube-router, removes its chains and sets, restores
// bridge-nf-call-iptables and lets the lock go; it returns what it could
// not remove.
func (n *Node) stopFirewall() []string {
	if n.fw == nil {
		return nil
	}
	defer func() { n.fw.lock.Close(); n.fw = nil }() // lets the lock go
	for _, p := range n.procs {
		if p.name == "kube-router" {
			p.stop()
		}
	}
	var leaks []string
	if removed, err := removeFirewallState(); err != nil {
		leaks = append(leaks, err.Error())
	} else if left := firewallState(); len(left) > 0 {
		leaks = append(leaks, fmt.Sprintf("firewall state %s (removed %d)", strings.Join(left, ", "), removed))
	}
	if n.fw.bridgeNF != nil {
		if err := os.WriteFile(bridgeNFCallIPTables, n.fw.bridgeNF, 0o644); err != nil {
			leaks = append(leaks, fmt.Sprintf("%s at 1 (it was %s): %v", bridgeNFCallIPTables, bytes.TrimSpace(n.fw.bridgeNF), err))
		}
	}
	return leaks
}

// StopFirewall stops the node's firewall and removes its rules: the
// node's NetworkPolicies are not enforced from then on, as in a cluster
// whose network plugin ignores them. The node keeps the firewall's lock.
func (n *Node) StopFirewall(t testing.TB) {
	t.Helper()
	for _, p := range n.procs {
		if p.name == "kube-router" {
			p.stop()
		}
	}
	if _, err := removeFirewallState(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
}

// firewallState lists kube-router's chains in the filter table and its
// ipsets, as "chain NAME" and "ipset NAME".
func firewallState() []string {
	var found []string
	chains, _, _ := filterTable()
	for _, c := range chains {
		found = append(found, "chain "+c)
	}
	for _, s := range firewallSets() {
		found = append(found, "ipset "+s)
	}
	return found
}

// removeFirewallState removes kube-router's rules, chains and ipsets from
// the host, and returns how many things it removed.
func removeFirewallState() (int, error) {
	chains, jumps, err := filterTable()
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	ipt := func(args ...string) {
		if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out)))
		}
	}
	for _, rule := range jumps {
		ipt(append([]string{"-D"}, rule...)...)
		removed++
	}
	for _, c := range chains {
		ipt("-F", c)
	}
	for _, c := range chains {
		ipt("-X", c)
		removed++
	}
	// The sets once no rule refers to them.
	for _, s := range firewallSets() {
		if out, err := exec.Command("ipset", "destroy", s).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ipset destroy %s: %w: %s", s, err, bytes.TrimSpace(out)))
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// filterTable returns kube-router's chains in the host's filter table and
// the rules of the other chains that jump to them (as iptables -S gives
// them, without -A).
func filterTable() (chains []string, jumps [][]string, err error) {
	out, err := exec.Command("iptables-save", "-t", "filter").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("iptables-save: %w", err)
	}
	ours := func(name string) bool {
		return slices.ContainsFunc(firewallChainPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 0 && strings.HasPrefix(f[0], ":") && ours(f[0][1:]):
			chains = append(chains, f[0][1:])
		case len(f) > 2 && f[0] == "-A" && !ours(f[1]):
			if i := slices.Index(f, "-j"); i > 0 && i+1 < len(f) && ours(f[i+1]) {
				jumps = append(jumps, unquote(f[1:]))
			}
		}
	}
	return chains, jumps, nil
}

// unquote joins the words of a rule that iptables-save quoted (comments)
// back into single arguments.
func unquote(words []string) []string {
	var args []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, `"`) {
			for !strings.HasSuffix(w, `"`) || len(w) == 1 {
				if i+1 >= len(words) {
					break
				}
				i++
				w += " " + words[i]
			}
			w = strings.Trim(w, `"`)
		}
		args = append(args, w)
	}
	return args
}

// firewallSets lists kube-router's ipsets.
func firewallSets() []string {
	out, err := exec.Command("ipset", "list", "-n").Output()
	if err != nil {
		return nil
	}
	var sets []string
	for _, s := range strings.Fields(string(out)) {
		if slices.ContainsFunc(firewallSetPrefixes, func(p string) bool { return strings.HasPrefix(s, p) }) {
			sets = append(sets, s)
		}
	}
	return sets
}

// waitForPolicy waits until the firewall polices the traffic of the Pod
// whose IP is ip under a NetworkPolicy: a jump from the forwarded
// traffic it sends to the Pod's chain, and from that chain to a policy's.
// kube-router installs them a moment after the kubelet reports the IP.
func (n *Node) waitForPolicy(ctx context.Context, ip string) error {
	return n.waitFor(ctx, "the firewall's rules for pod "+ip, func(context.Context) error {
		out, err := exec.Command("iptables-save", "-t", "filter").Output()
		if err != nil {
			return err
		}
		var podChain string
		for l := range strings.Lines(string(out)) {
			f := strings.Fields(l)
			if len(f) > 4 && f[0] == "-A" && f[1] == "KUBE-ROUTER-FORWARD" && f[2] == "-s" && f[3] == ip+"/32" &&
				strings.HasPrefix(f[len(f)-1], "KUBE-POD-FW-") {
				podChain = f[len(f)-1]
			}
		}
		if podChain == "" {
			return errors.New("no chain for the pod yet")
		}
		for l := range strings.Lines(string(out)) {
			f := strings.Fields(l)
			if len(f) > 3 && f[0] == "-A" && f[1] == podChain && strings.HasPrefix(f[len(f)-1], "KUBE-NWPLCY-") &&
				f[len(f)-1] != "KUBE-NWPLCY-DEFAULT" {
				return nil
			}
		}
		return fmt.Errorf("no policy in the pod's chain %s yet", podChain)
	})
}
