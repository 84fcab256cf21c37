// Package kube is the "kubernetes" sandbox runtime: one Pod per sandbox in
// one namespace, on client-go.
//
// A sandbox is three objects (four when persistent), labelled with its id (agent2env.io/sandbox)
// and the daemon that owns it (agent2env.io/owner):
//
//   - a Pod, a2e-<id>, then a2e-<id>-<suffix> for each that replaces it
//     (a late deletion of the old one by name cannot hit the new). A
//     sidecar from the agent2env image copies the agent alone
//     (agent2env-agent, static) into an emptyDir in its start hook; the
//     sandbox's container runs it from there as PID 1, whatever the
//     sandbox's image is, as uid 1000
//     with no capabilities, no privilege escalation, RuntimeDefault
//     seccomp and a read-only root file system, /workspace, /tmp and the
//     home directory being emptyDirs. Resources become requests and limits
//     (the disk limit is ephemeral-storage). The Pod keeps the sandbox's
//     spec in an annotation, from which Stop and Recover rebuild it.
//   - a Secret a2e-<id> holding the agent's token, a random per-sandbox secret the
//     agent requires as a bearer token on every request: its TCP port is
//     never open to who does not know it. It holds a self-signed
//     certificate too, with which the agent serves TLS; the daemon trusts
//     that certificate alone for that sandbox (access.go), so neither the
//     token nor the traffic crosses the cluster's network in the clear.
//   - a default-deny NetworkPolicy a2e-<id>: ingress to the agent's port only from
//     the daemon's Pods, no egress at all. It holds only where the cluster's
//     network plugin enforces policies: the daemon's runtime checks that at
//     start (netcheck.go, Config.CheckNetworkPolicies) and warns when not.
//   - for a sandbox with Spec.Persistence, a PersistentVolumeClaim a2e-<id>
//     (its size and storage class, ReadWriteOnce, labelled with its
//     reclaim policy, agent2env.io/reclaim-policy): its Pods mount the
//     claim's workspace, tmp and home subdirectories instead of emptyDirs,
//     so the files outlive Pods. Delete deletes it unless the policy is
//     Retain; Recover deletes those of sandboxes that are gone, but
//     retained ones, which stay for an operator (pvc.go).
//
// A sandbox's Spec.RuntimeClass, or else Config.RuntimeClass, is its Pods'
// runtimeClassName (gVisor, Kata): a class the cluster lacks fails Create.
//
// A Pod cannot exist without running, nor run again once stopped, so the
// states are Pods with or without a scheduling gate (agent2env.io/start):
// Create makes a gated Pod, which the scheduler leaves alone (created);
// Start removes the gate and waits for the agent to answer (running); Stop
// deletes the Pod and makes a gated one from the same spec in its place
// (stopped: emptyDirs are lost, Capabilities().StopKeepsFiles is false;
// a persistent sandbox's files stay on its claim, and Start resumes them).
//
// The state of every sandbox comes from one Pod informer filtered by the
// owner label (List costs no API call); a Pod that failed (OOM kill,
// eviction) or was deleted behind the runtime's back (eviction API, node
// loss) is reported stopped, with the reason in Status.Reason. Everything
// read from the cluster is untrusted: ids are checked against the names,
// the spec annotation is size-limited and validated.
//
// The daemon reaches the agent on the Pod's IP (connect "direct", in the
// cluster) or through the API server's port-forward ("port-forward", from
// outside). Pods run on other machines: LocalFiles is false (no host
// mounts).
//
// The daemon's services (Config.Services: the LLM proxy, MCP) and, for a
// sandbox whose spec sets Network.Egress, its egress proxy (Config.Egress;
// without it such specs are refused, NetworkPolicy false) are at
// agent.ServicesAddr and agent.EgressAddr on the sandbox's loopback, as on
// one machine, but the daemon dials, not the sandbox: the Pod's
// environment has the agent listen there (agent.EnvServicesAccept,
// agent.EnvEgressAccept) before any command runs, and from Start (or
// Recover) until Stop or Delete the daemon keeps a few GET /v1/accept
// requests waiting in the agent per address (agent.Client.Listen), each
// taking one local connection, over the same authenticated channel as
// every other request, direct or through port-forward. The sandbox is known
// by the channel, and needs no egress: its NetworkPolicy allows none.
//
// Prepull (sandbox.NodePrepuller) has every node's kubelet pull an image
// through a DaemonSet, reporting nodes done of nodes. Warm pools need
// nothing here: they are ordinary sandboxes, Pods kept running. Usage
// (sandbox.UsageReader) comes from the agent, which reads its own cgroup
// and measures the writable directories, since the daemon cannot read a
// cgroup on another node; Logs (sandbox.LogReader) from the kubelet,
// through the API server. The daemon keeps one agent client per Pod.
//
// Pause (sandbox.Pauser) is not offered: Capabilities.Pause is false and
// the manager answers 501. A Pod's cgroup freezer is on its node, which the
// daemon does not reach, the Kubernetes API has no pause of a Pod, and the
// agent cannot freeze the Pod it runs in (its cgroup file system is
// read-only, and a frozen agent could not thaw itself). The plan: a
// node-local helper (a DaemonSet, as prepulls have) that writes
// cgroup.freeze of a Pod's cgroup, found by its UID, on the daemon's
// authenticated request; until then a kubernetes sandbox can only be
// stopped.
//
// The runtime passes runtimetest.RunContract against the control plane
// of package kubetest with fake nodes (tier A, TestContract), and the
// whole runtimetest.Run on a real node (tier B, kubetest's
// TestNodeRuntime).
//
// Snapshots with memory, and so fork, are not offered: the runtime is no
// sandbox.Checkpointer and its Capabilities say Checkpoint false, so the
// manager answers them 501 naming why (its sandboxes run on other
// machines). The plan: the kubelet's checkpoint API (ContainerCheckpoint,
// CRIU on the node) for the dump, and a restore from that archive as a new
// Pod, once the node's CRI runtime restores; until then, files only
// (persistent claims).
//
// A Runtime is safe for concurrent use; Close stops its informer.
package kube
