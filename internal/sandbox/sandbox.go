// Package sandbox defines the contract between the daemon and the runtimes
// that run sandboxes: the Runtime interface, the Spec a sandbox is created
// from and the Status a runtime reports.
//
// A runtime owns everything below the sandbox record: images as its
// sandboxes need them, root filesystems, containers or pods, cgroups and the
// channel to the in-sandbox agent. The contract assumes no local host: a
// runtime may run its sandboxes on other machines (a cluster's nodes). The
// daemon (package manager) owns the records and the lifecycle above it. Every
// implementation must pass the conformance suite in package runtimetest;
// runtimes register by name in package runtime.
//
// Runtimes differ, and say how in their Capabilities (persistence,
// storage and runtime classes, files kept across a stop, host mounts,
// network policy): the manager refuses a spec a runtime cannot honour
// (Refuse names the field) rather than run it otherwise, and the
// conformance suite holds each runtime to what it declares. A Status
// carries the reason a sandbox stopped (evicted, OOM-killed, node lost).
// What only some runtimes do are optional interfaces a caller tests for:
// ImagePreparer, NodePrepuller, UsageReader, LogReader, Pauser and
// Checkpointer.
package sandbox

import (
	"context"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// User code runs as this unprivileged user inside every sandbox.
const (
	UserID  = 1000
	GroupID = 1000
	HomeDir = "/home/sandbox"
	WorkDir = "/workspace"
)

// Spec is what a runtime needs to create a sandbox. The manager resolves
// templates, overrides and images into a Spec before calling the runtime.
type Spec struct {
	// ID is the sandbox id: short, lowercase, unique on this daemon.
	ID string
	// Image is the reference of the image the sandbox runs, as the client
	// gave it ("python:3.12") or normalized. Getting it where the sandbox
	// runs is the runtime's business (see ImagePreparer).
	Image string
	// Env is the sandbox's own environment (the template's, then the
	// request's): KEY=VALUE, sorted. Processes start with the image's
	// environment and this on top, as Environ merges them.
	Env []string
	// Cwd is the default working directory of commands.
	Cwd string
	// Resources are the limits enforced on the whole sandbox.
	Resources Resources
	// Network says what the sandbox may reach. The zero value is none
	// (loopback only).
	Network Network
	// Labels are opaque key/values kept with the sandbox and returned by
	// List and Recover, so the daemon can match runtime state to records.
	Labels map[string]string
	// Mounts are host directories bound into the sandbox (shared
	// volumes); runtimes that cannot bind host paths refuse them.
	Mounts []Mount
	// Persistence, when set, puts the sandbox's writable storage
	// (/workspace, /tmp, the home directory) on a volume of its own of
	// Persistence.SizeBytes, instead of Resources.DiskBytes of scratch
	// space: a runtime with Capabilities.Persistence honours it.
	Persistence *Persistence
	// SpareKernel, when set, is the language of a code kernel the agent
	// starts as it boots, overlapping the interpreter's start with the
	// daemon's own work; the sandbox's first kernel adopts it when it is
	// of that language with the default environment and directory (else
	// it is ended). Sandboxes made for contexts, sessions and warm pools
	// set it when they have no startup steps; a runtime may ignore it.
	SpareKernel string
	// RuntimeClass names the container runtime the sandbox runs under
	// (Kubernetes' runtimeClassName: gVisor, Kata); empty is the
	// runtime's default. Only runtimes with Capabilities.RuntimeClass
	// honour it.
	RuntimeClass string
}

// Persistence is a sandbox's persistent storage: LiteBoxd's persistence
// field of a template.
type Persistence struct {
	// SizeBytes is the size of the volume.
	SizeBytes int64 `json:"size_bytes"`
	// StorageClass names the class of storage the volume is made of
	// (Kubernetes' storageClassName); empty is the runtime's default.
	// Only runtimes with Capabilities.StorageClass honour it.
	StorageClass string `json:"storage_class,omitempty"`
	// Retain keeps the volume when the sandbox is deleted, for an
	// operator to read or remove; otherwise it goes with the sandbox.
	Retain bool `json:"retain,omitempty"`
}

// Mount binds the host directory Source at Destination in the sandbox.
type Mount struct {
	Source      string
	Destination string
	ReadOnly    bool
}

// reservedPaths are where no mount may go: the sandbox's own file
// systems and the agent's.
var reservedPaths = []string{"/", "/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/.agent2env"}

// Check refuses a mount a runtime must not make: paths that are relative,
// unclean (with "..") or reserved, and a source that is not a directory
// itself (a symlink could point anywhere on the host).
func (m Mount) Check() error {
	for _, p := range []string{m.Source, m.Destination} {
		if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsAny(p, "\x00,:") {
			return errdefs.Invalid("mount %s:%s: paths must be absolute and clean, without ',' or ':'", m.Source, m.Destination)
		}
	}
	for _, r := range reservedPaths {
		if m.Destination == r || (r != "/" && strings.HasPrefix(m.Destination, r+"/")) {
			return errdefs.Invalid("mount %s:%s: %s is reserved", m.Source, m.Destination, r)
		}
	}
	fi, err := os.Lstat(m.Source)
	if err != nil {
		return errdefs.Invalid("mount source %s: %v", m.Source, err)
	}
	if !fi.IsDir() {
		return errdefs.Invalid("mount source %s is not a directory (symlinks are refused)", m.Source)
	}
	return nil
}

// Resources are the limits of one sandbox. Zero means the runtime default.
type Resources struct {
	// MilliCPU is the CPU quota in thousandths of a core.
	MilliCPU int64
	// MemoryBytes is the memory limit (RAM; no swap).
	MemoryBytes int64
	// Pids is the maximum number of processes and threads.
	Pids int64
	// DiskBytes is the size of the writable storage shared by /workspace,
	// /tmp and the home directory. Filling it ends in ENOSPC.
	DiskBytes int64
}

// Network is the network policy of a sandbox.
type Network struct {
	// Mode is "none" (loopback only, the default).
	Mode string
	// Egress, when set, lets the sandbox reach what it allows through the
	// daemon's egress proxy, which enforces it. The sandbox gets no other
	// way out (no interface but loopback, or a Pod's that its
	// NetworkPolicy closes: Capabilities.LoopbackOnly): the agent serves
	// the proxy at EgressProxyAddr on its loopback, and commands find it in
	// HTTP_PROXY and HTTPS_PROXY. Nil means no way out at all.
	Egress *Egress
}

// EgressProxyAddr is where a sandbox with egress finds the proxy, on its
// own loopback.
const EgressProxyAddr = agent.EgressAddr

// Egress is what a sandbox may reach through the egress proxy: the
// template's network.allowInternetAccess and network.allowedDomains.
type Egress struct {
	// AllowInternet allows any host.
	AllowInternet bool `json:"allow_internet,omitempty"`
	// AllowedDomains are the hosts allowed otherwise: exact names
	// ("api.example.com"), wildcards matching every subdomain of a name
	// but not the name itself ("*.example.com"), or IP literals. Case and
	// a trailing dot do not matter.
	AllowedDomains []string `json:"allowed_domains,omitempty"`
}

// State is the runtime's view of a sandbox.
type State string

// Runtime states.
const (
	StateCreated State = "created" // prepared, agent not started
	StateRunning State = "running" // agent running
	StatePaused  State = "paused"  // processes frozen in memory (Pauser)
	StateStopped State = "stopped" // agent exited or was stopped
	StateUnknown State = "unknown" // runtime cannot tell
)

// Status is a runtime's report on one sandbox.
type Status struct {
	ID    string
	State State
	// Pid is the host pid of the agent, when the runtime knows it (0
	// otherwise). A new Pid means the agent was started again.
	Pid       int
	CreatedAt time.Time
	Labels    map[string]string
	// Reason says why a sandbox is stopped or unknown when the runtime
	// knows more than its state ("pod Evicted: ...", "OOMKilled"); it
	// may be empty.
	Reason string
}

// Usage is a point-in-time reading of a sandbox's resource use.
type Usage struct {
	CPUNanos    uint64 // cumulative CPU time
	MemoryBytes uint64
	Pids        uint64
	DiskBytes   uint64
}

// Capabilities say what a runtime can do where runtimes differ, so that the
// daemon refuses what a runtime cannot honour instead of ignoring it. The
// zero value is a runtime that can do none of it. Port forwarding is not
// among them: it goes through the agent (its dial request), which every
// runtime serves. Optional operations are separate interfaces found by type
// assertion (UsageReader, LogReader, ImagePreparer), not capabilities.
type Capabilities struct {
	// StopKeepsFiles: Stop keeps the sandbox's writable storage, and Start
	// resumes it with the same files (the API's stop and start). Without
	// it a stopped sandbox cannot be started again.
	StopKeepsFiles bool
	// NetworkPolicy: the runtime enforces a per-sandbox egress policy
	// (Spec.Network.Egress) with the daemon's egress proxy; without
	// LoopbackOnly, only as far as the interface's own policy holds.
	// Without it, Create refuses specs that set one.
	NetworkPolicy bool
	// LocalFiles: sandboxes run on the daemon's host and their storage is
	// on its disks, so host paths can be bind-mounted into them (the
	// egress proxy's socket is). False when sandboxes run elsewhere.
	LocalFiles bool
	// DiskQuota: writing past Resources.DiskBytes fails with ENOSPC.
	// Without it the limit is enforced otherwise: Kubernetes evicts a Pod
	// over its ephemeral-storage limit, after it wrote past it.
	DiskQuota bool
	// LoopbackOnly: a sandbox's network namespace has no interface but
	// loopback; its only ways out are the agent's forwards to the daemon.
	// Without it a sandbox has an interface whose traffic a policy
	// restricts (a Pod's, under its NetworkPolicy, which the cluster's
	// network plugin must enforce); the conformance suite then proves
	// the policy instead, with targets the sandbox must not reach
	// (runtimetest.Factory.EgressTargets).
	LoopbackOnly bool
	// Persistence: the runtime honours Spec.Persistence's size and
	// reclaim policy (a volume of the sandbox's own, kept after Delete
	// when it says Retain), and a sandbox with one keeps its files across
	// Stop and Start even where StopKeepsFiles is false (see KeepsFiles).
	// Without it Create refuses specs that set one.
	Persistence bool
	// StorageClass: the runtime chooses a persistent volume's storage by
	// Persistence.StorageClass. Without it Create refuses specs that set
	// one.
	StorageClass bool
	// RuntimeClass: the runtime runs a sandbox under the container
	// runtime Spec.RuntimeClass names. Without it Create refuses specs
	// that set one.
	RuntimeClass bool
	// Pause: the runtime is a Pauser and can freeze its sandboxes on this
	// host (the oci runtime where the cgroup freezer is mounted). Without
	// it the manager refuses a pause.
	Pause bool
	// Checkpoint: the runtime is a Checkpointer that works on this host
	// (the oci runtime given a criu that passes `criu check`).
	Checkpoint bool
	// NoCheckpoint says, when a Checkpointer's Checkpoint is false, why:
	// what a refused snapshot tells its user to change.
	NoCheckpoint string
	// MaxVolumeBytes is the largest Persistence.SizeBytes the runtime can
	// give; zero is no limit of its own.
	MaxVolumeBytes int64
}

// Refuse returns an ErrInvalidArgument naming, as a template names it, a
// field of spec that a runtime (named runtime) with these capabilities
// cannot honour; nil when it can honour them all. The network policy is
// not among them: the manager and runtimes refuse it with their own
// message.
func (c Capabilities) Refuse(spec *Spec, runtime string) error {
	if p := spec.Persistence; p != nil {
		switch {
		case !c.Persistence:
			return errdefs.Invalid("persistence: runtime %s cannot keep a sandbox's storage on a volume of its own", runtime)
		case p.SizeBytes <= 0:
			return errdefs.Invalid("persistence.size %d is not positive", p.SizeBytes)
		case c.MaxVolumeBytes > 0 && p.SizeBytes > c.MaxVolumeBytes:
			return errdefs.Invalid("persistence.size %d is more than the %d bytes runtime %s can give", p.SizeBytes, c.MaxVolumeBytes, runtime)
		case p.StorageClass != "" && !c.StorageClass:
			return errdefs.Invalid("persistence.storageClassName %q: runtime %s has no storage classes", p.StorageClass, runtime)
		}
	}
	if spec.RuntimeClass != "" && !c.RuntimeClass {
		return errdefs.Invalid("runtimeClassName %q: runtime %s runs every sandbox under one container runtime, its own", spec.RuntimeClass, runtime)
	}
	return nil
}

// KeepsFiles reports whether Stop keeps the files of a sandbox, which is
// persistent when its spec had a Persistence, so that Start resumes them.
func (c Capabilities) KeepsFiles(persistent bool) bool {
	return c.StopKeepsFiles || persistent && c.Persistence
}

// Runtime runs sandboxes. Implementations are safe for concurrent use;
// calls for one id are serialized by the caller.
type Runtime interface {
	// Name is the runtime's registry name ("oci", "kubernetes").
	Name() string
	Capabilities() Capabilities
	// Create prepares a sandbox (root filesystem, bundle, or pod) without
	// starting it. A runtime that implements ImagePreparer may require
	// PrepareImage(spec.Image) to have succeeded first. On error nothing
	// is left behind.
	Create(ctx context.Context, spec *Spec) error
	// Start starts the in-sandbox agent and returns once it accepts
	// connections. A runtime that gets images itself as sandboxes start
	// (a cluster's kubelet pulls) fails with ErrImageNotFound when the
	// image cannot be had.
	Start(ctx context.Context, id string) error
	// Stop ends every process of the sandbox, waiting up to timeout for a
	// graceful exit before killing. Files survive when
	// Capabilities().StopKeepsFiles.
	Stop(ctx context.Context, id string, timeout time.Duration) error
	// Delete removes the sandbox and everything the runtime holds for it.
	// Deleting an unknown id returns an ErrNotFound.
	Delete(ctx context.Context, id string) error
	// Status reports on one sandbox; ErrNotFound if unknown.
	Status(ctx context.Context, id string) (Status, error)
	// List reports on every sandbox the runtime holds, in one call: the
	// daemon reconciles its records against it every second, so it must
	// cost no exec and no call per sandbox (a cluster runtime answers from
	// its watch cache). A sandbox still being created or deleted may be
	// missing.
	List(ctx context.Context) ([]Status, error)
	// Agent returns a client for the sandbox's agent. It does not dial;
	// each call on the client does.
	Agent(ctx context.Context, id string) (*agent.Client, error)
	// Recover is called once at daemon start, before anything else. It
	// cleans up what a crash left half-made and returns what still exists.
	Recover(ctx context.Context) ([]Status, error)
}

// ErrImageNotFound is the class of a Start's error when the sandbox's
// image cannot be had (no registry has it, or its name is not one's): the
// daemon fails such a sandbox as its image's, as it does one whose
// PrepareImage failed. It is an errdefs.ErrNotFound too.
var ErrImageNotFound = errdefs.NotFound("image not found")

// ImagePreparer is implemented by runtimes that must fetch an image before
// Create can use it quickly: the oci runtime pulls or builds it into the
// daemon's image store. The daemon asks ImageReady whether a new sandbox
// can start at once, or returns it pending while PrepareImage runs in the
// background. Runtimes without it get images themselves as sandboxes start
// (a cluster's kubelet pulls).
type ImagePreparer interface {
	// ImageReady reports whether Create can use ref without fetching it.
	ImageReady(ctx context.Context, ref string) (bool, error)
	// PrepareImage fetches ref unless it is ready. Concurrent calls for
	// one ref share the work.
	PrepareImage(ctx context.Context, ref string) error
}

// NodePrepuller is implemented by runtimes whose nodes pull images
// themselves (a cluster's kubelets): the daemon's prepulls go to them, not
// to its own image store.
type NodePrepuller interface {
	// Prepull has every node fetch ref and returns once all have; progress
	// (which may be nil) receives the nodes done of the nodes to fetch on
	// whenever that changes.
	Prepull(ctx context.Context, ref string, progress func(ready, total int)) error
}

// HostChecker is implemented by runtimes whose sandboxes share something of
// their host that no sandbox's limits bound and that the host can run out
// of: the oci runtime's sandboxes share the machine's process ids. The
// daemon asks before it makes or starts a sandbox; CheckHost returns nil
// when one more fits, else an error wrapping errdefs.ErrResourceExhausted
// that says what is short and how the operator adds to it.
type HostChecker interface {
	CheckHost() error
}

// UsageReader is implemented by runtimes that can measure resource use.
type UsageReader interface {
	Usage(ctx context.Context, id string) (Usage, error)
}

// LogReader is implemented by runtimes that keep a sandbox's console
// output (the agent's and the sandbox's main process's).
type LogReader interface {
	// Logs returns at most the last limit bytes of output.
	Logs(ctx context.Context, id string, limit int64) ([]byte, error)
}

// Pauser is implemented by runtimes that can freeze a running sandbox's
// processes where they are, in memory, and let them go on later: no CPU
// is used meanwhile, memory and files stay, and what they were doing
// continues as if nothing happened (their clocks, though, went on).
// Capabilities.Pause says whether it works on this host.
type Pauser interface {
	// Pause freezes every process of running sandbox id and returns once
	// all are frozen; Status then says StatePaused. Pausing a paused
	// sandbox does nothing; one that is not running is an
	// ErrFailedPrecondition.
	Pause(ctx context.Context, id string) error
	// Resume lets the processes of paused sandbox id run again; resuming a
	// running sandbox does nothing, one that is stopped is an
	// ErrFailedPrecondition. Stop and Delete work on a paused sandbox
	// without a Resume first.
	Resume(ctx context.Context, id string) error
}

// Checkpointer is a Runtime that saves a running sandbox whole (its
// processes with their memory, its writable files and its spec) into a
// snapshot directory, and makes new sandboxes from such a directory,
// running where the original was when it was saved.
type Checkpointer interface {
	// Checkpoint saves running sandbox id into dir, which must not exist
	// yet. With leaveRunning the sandbox is frozen only while it is saved
	// and runs on afterwards; without, it is stopped once saved (its
	// memory freed, its files kept). A sandbox that is not running is an
	// ErrFailedPrecondition; on error dir is removed and the sandbox is as
	// it was.
	Checkpoint(ctx context.Context, id, dir string, leaveRunning bool) error
	// Restore makes and starts sandbox newID from the snapshot in dir, with
	// labels, and returns once its agent answers. The snapshot is only
	// read: one snapshot restores any number of times. On error nothing of
	// newID is left.
	Restore(ctx context.Context, newID, dir string, labels map[string]string) error
}

// Environ is the environment a sandbox's processes start with: defaults an
// image may leave out (PATH, USER, LANG), the image's environment imageEnv,
// HOME set to HomeDir (the sandbox user's, whatever the image says), and the
// spec's env on top. A later entry for a key replaces an earlier one; the
// result is sorted.
func Environ(imageEnv, env []string) []string {
	vars := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"USER": "sandbox", "LANG": "C.UTF-8",
	}
	set := func(kvs []string) {
		for _, kv := range kvs {
			if k, v, ok := strings.Cut(kv, "="); ok {
				vars[k] = v
			}
		}
	}
	set(imageEnv)
	vars["HOME"] = HomeDir
	set(env)
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
