// Package kube is the "kubernetes" sandbox runtime: one Pod per sandbox in
// one namespace, on client-go.
//
// A sandbox is three objects, labelled with its id (agent2env.io/sandbox)
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
//     never open to who does not know it.
//   - a default-deny NetworkPolicy a2e-<id>: ingress to the agent's port only from
//     the daemon's Pods, egress only to them.
//
// A Pod cannot exist without running, nor run again once stopped, so the
// states are Pods with or without a scheduling gate (agent2env.io/start):
// Create makes a gated Pod, which the scheduler leaves alone (created);
// Start removes the gate and waits for the agent to answer (running); Stop
// deletes the Pod and makes a gated one from the same spec in its place
// (stopped: files are lost, Capabilities().StopKeepsFiles is false).
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
// mounts), and egress policies are refused (NetworkPolicy false) until the
// daemon's egress proxy is served to Pods.
//
// Prepull (sandbox.NodePrepuller) has every node's kubelet pull an image
// through a DaemonSet, reporting nodes done of nodes. Warm pools need
// nothing here: they are ordinary sandboxes, Pods kept running.
//
// A Runtime is safe for concurrent use; Close stops its informer.
package kube
