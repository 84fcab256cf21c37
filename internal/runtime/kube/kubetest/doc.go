// Package kubetest runs a real Kubernetes control plane for tests: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler on loopback
// with certificates made for the run, and kwok as the kubelet of fake nodes
// (tier A of the kube runtime's tests). A Pod scheduled to a fake node
// becomes Ready with a loopback IP the cluster chooses, and only after the
// test's [PodFunc] has started whatever should answer on that IP, so a
// runtime under test talks to its Pods over real TCP: directly, or through
// the API server's port-forward (to the ports in [Options.ForwardPorts]),
// which kwok's kubelet server carries to the same IP.
//
// [StartNode] runs the same control plane with a real node instead (tier
// B): a kubelet on the host with a containerd of its own (runc, the CNI
// bridge plugin, a private pod subnet on a bridge of its own) pulling from
// a registry on loopback that holds a busybox image and, on request, the
// agent2env image, and kube-router's firewall enforcing NetworkPolicies
// (one node with a firewall at a time on a host); the node's cleanup
// tears every Pod down and fails the test for anything left behind, the
// firewall's iptables chains and ipsets included. [Node.EgressTargets]
// proves a sandbox's policy from the inside.
//
// The binaries come from scripts/kube-binaries.sh (make kube-binaries),
// cached under /var/cache/agent2env/kube; [Start] skips the test with that
// command when they are missing, and fails it under CI (testenv.Missing).
//
// Everything a [Cluster] starts lives in the test's temporary directory and
// is stopped by the test's cleanup; a Cluster is safe for concurrent use.
package kubetest
