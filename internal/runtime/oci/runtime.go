package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

var (
	_ sandbox.Runtime       = (*Runtime)(nil)
	_ sandbox.UsageReader   = (*Runtime)(nil)
	_ sandbox.LogReader     = (*Runtime)(nil)
	_ sandbox.ImagePreparer = (*Runtime)(nil)
	_ sandbox.Pauser        = (*Runtime)(nil)
	_ sandbox.Checkpointer  = (*Runtime)(nil)
)

// Config configures a Runtime. Root and Images are required.
type Config struct {
	// Root is the state directory, e.g. <data-dir>/oci. Keep it short:
	// the agent sockets below it are limited to 107 bytes of path.
	Root string
	// RuntimeBinary is the OCI runtime, by name ("runc", "crun", "runsc")
	// or path. Default "runc".
	RuntimeBinary string
	// Images holds the images sandboxes run, unpacked into layer
	// directories: PrepareImage ensures them there, Create mounts them.
	Images runtime.Images
	// AgentBinary is the host path of the agent2env binary that runs as
	// each sandbox's first process. Default: this executable.
	AgentBinary string
	// DefaultResources fill the zero fields of a Spec's Resources.
	// Defaults: 1000 millicpu, 1 GiB memory, 512 pids, 1 GiB disk.
	DefaultResources sandbox.Resources
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Egress serves the egress proxy of sandboxes whose spec sets
	// Network.Egress, on a unix socket per sandbox that the agent forwards
	// the sandbox's 127.0.0.1:3128 to (see doc.go). Without it such specs
	// are refused.
	Egress runtime.EgressProxy
	// Services, when set, serves the daemon's services to every sandbox
	// made from now on, on a unix socket per sandbox that the agent
	// forwards the sandbox's 127.0.0.1:4000 to (see doc.go).
	Services runtime.Services
	// CRIU is the path of the criu binary (scripts/criu.sh builds it)
	// that runc drives to checkpoint and restore sandboxes. Without it
	// Checkpoint and Restore are refused; with it every sandbox gets a
	// network namespace made by the daemon (checkpoint.go).
	CRIU string
	// ThickDisks allocates the whole size of every sandbox disk on Root's
	// file system when the disk is made, and of a disk made thin before
	// when its sandbox starts (allocateDisk): a sandbox's writes then never
	// meet a full host, and a disk that does not fit is refused with
	// errdefs.NoSpace. Default: thin, sparse disks that take room only as
	// they are written (doc.go).
	ThickDisks bool
	// DiskReserve is what allocating a thick disk must leave free on
	// Root's file system, for the daemon's own writes (its records,
	// snapshots, logs): serve --disk-reserve.
	DiskReserve int64
}

// Runtime runs sandboxes as OCI containers. Make one with New; the zero
// value is not usable. It is safe for concurrent use; calls for one id must
// be serialized by the caller (see sandbox.Runtime).
type Runtime struct {
	cfg       Config
	oci       ociCLI
	cgroups   *cgroups
	swapLimit bool   // set memory+swap = memory
	canPause  bool   // the host has a cgroup freezer (freezer.go)
	oomAdjust bool   // may lower the agent's oom_score_adj (CAP_SYS_RESOURCE)
	nofile    uint64 // hard RLIMIT_NOFILE of the agent
	// noCheckpoint says why the runtime has no checkpoint (Capabilities).
	noCheckpoint string
	agent        string // the copy of cfg.AgentBinary that sandboxes link (agentcopy.go)
	mkfs         string // mkfs.ext4
	maxDisk      int64  // the largest disk: Root's file system's size
	log          *slog.Logger

	tmplMu  sync.Mutex // making templates
	allocMu sync.Mutex // allocating thick disks (allocateDisk)

	mu      sync.Mutex
	clients map[string]*agent.Client
	gates   map[string]*dialGate // of the clients' dials, by sandbox id
	egress  map[string]func()    // stops serving a socket, by "<id>/<kind>"
}

// Names in Root besides the sandbox dirs. Sandbox ids start with a letter
// or digit, so they never collide with these.
const (
	dirTemplates = "_tmpl"
	// dirRetained holds the disks of deleted sandboxes whose persistence
	// says Retain, as <id>.img (retain.go).
	dirRetained = "_retained"
	// dirExe holds the link to the sealed copy of the runtime binary that
	// its commands execute (ociCLI.runFromMemory).
	dirExe = "_exe"
	// dirAgents holds the copies of the agent binaries that sandboxes
	// link, named by their SHA-256 (agentcopy.go).
	dirAgents = "_agents"
)

// Files in a sandbox dir.
const (
	fileDisk   = "disk.img"
	dirDisk    = "d"
	dirRootfs  = "r"
	fileConfig = "config.json"
	fileMeta   = "meta.json"
	fileSock   = "agent.sock"
	fileLog    = "agent.log"
	filePid    = "agent.pid"
	// fileAgent is the agent binary the sandbox runs, a link to one of
	// dirAgents (agentcopy.go); a snapshot dir holds one too.
	fileAgent = "agent"
)

// maxSocketPath is the longest path a unix socket address holds.
const maxSocketPath = 107

// agentStartTimeout bounds the wait for a started agent to answer when the
// caller's context has no earlier deadline.
const agentStartTimeout = 30 * time.Second

// killWait bounds the wait for a sandbox to die after SIGKILL.
const killWait = 10 * time.Second

var validID = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// New returns a Runtime with its state in cfg.Root, which it creates. Call
// Recover before anything else.
func New(cfg Config) (*Runtime, error) {
	if cfg.Root == "" {
		return nil, errdefs.Invalid("oci runtime: root is not set")
	}
	if cfg.Images == nil {
		return nil, errdefs.Invalid("oci runtime: no image store")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("oci runtime: %w", err)
	}
	cfg.Root = root
	if cfg.RuntimeBinary == "" {
		cfg.RuntimeBinary = "runc"
	}
	bin, err := exec.LookPath(cfg.RuntimeBinary)
	if err != nil {
		return nil, fmt.Errorf("oci runtime: %w: %w", errdefs.ErrUnavailable, err)
	}
	if cfg.AgentBinary == "" {
		if cfg.AgentBinary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("oci runtime: find agent binary: %w", err)
		}
	}
	if _, err := os.Stat(cfg.AgentBinary); err != nil {
		return nil, fmt.Errorf("oci runtime: agent binary: %w", err)
	}
	cfg.DefaultResources = withDefaults(cfg.DefaultResources, sandbox.Resources{
		MilliCPU: 1000, MemoryBytes: 1 << 30, Pids: 512, DiskBytes: 1 << 30,
	})
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	mkfs, err := lookPath("mkfs.ext4", "/usr/sbin", "/sbin")
	if err != nil {
		return nil, fmt.Errorf("oci runtime: %w: %w (install e2fsprogs)", errdefs.ErrUnavailable, err)
	}
	cg, err := readCgroups(cgroupParent(root))
	if err != nil {
		return nil, fmt.Errorf("oci runtime: %w", err)
	}
	cli := newOCICLI(bin, root)
	noCheckpoint := "it has no working CRIU (serve --criu; make criu builds one)"
	if filepath.Base(bin) == "crun" {
		if cfg.CRIU != "" {
			if err := criuBuiltIn(bin); err != nil {
				cfg.Logger.Warn("no checkpoint or restore with this runtime binary; use runc for snapshots", "binary", bin, "reason", err)
				cfg.CRIU = ""
				noCheckpoint = err.Error() + "; serve --runtime runc has snapshots"
			}
		}
	}
	var criuEnv []string
	if cfg.CRIU != "" {
		criuEnv = criuKdatEnv(cfg.Logger)
		cfg.CRIU = checkCRIU(cfg.CRIU, criuEnv, cfg.Logger)
	}
	cli.criuEnv = criuEnv
	for _, d := range []string{root, cli.root, filepath.Join(root, dirTemplates), filepath.Join(root, dirRetained)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("oci runtime: %w", err)
		}
	}
	agentCopy, err := installAgent(cfg.AgentBinary, filepath.Join(root, dirAgents), cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("oci runtime: %w", err)
	}
	if err := cli.runFromMemory(filepath.Join(root, dirExe)); err != nil {
		cfg.Logger.Info("the runtime binary runs from its file and copies itself on every command", "binary", bin, "reason", err)
	}
	if err := spreadSubdirs(root); err != nil {
		cfg.Logger.Debug("sandbox directories are not spread over the file system's block groups", "root", root, "err", err)
	}
	maxDisk, err := maxDiskBytes(root)
	if err != nil {
		return nil, fmt.Errorf("oci runtime: %w", err)
	}
	if cfg.ThickDisks {
		if err := canAllocate(root); err != nil {
			return nil, fmt.Errorf("oci runtime: %w", err)
		}
	}
	// Agents are started by the runtime binary, which exits at once: as a
	// subreaper the daemon inherits them and can reap them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("oci runtime: become subreaper: %w", err)
	}
	// Without CAP_SYS_RESOURCE neither the agent's OOM score nor its file
	// limit can go beyond the daemon's own.
	oomAdjust := hasCapability(unix.CAP_SYS_RESOURCE)
	nofile := uint64(maxNofile)
	if !oomAdjust {
		cfg.Logger.Warn("no CAP_SYS_RESOURCE: agents keep the daemon's oom_score_adj; the OOM killer still takes user commands first (oom_score_adj 1000)")
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil {
			nofile = min(nofile, lim.Max)
		}
	}
	r := &Runtime{
		cfg:          cfg,
		oomAdjust:    oomAdjust,
		nofile:       nofile,
		noCheckpoint: noCheckpoint,
		agent:        agentCopy,
		oci:          cli,
		cgroups:      cg,
		swapLimit:    cg.swapLimitable(),
		canPause:     cg.hasFreezer(),
		mkfs:         mkfs,
		maxDisk:      maxDisk,
		log:          cfg.Logger,
		clients:      make(map[string]*agent.Client),
		gates:        make(map[string]*dialGate),
		egress:       make(map[string]func()),
	}
	r.logHostPids()
	return r, nil
}

// fsTopdirFL is FS_TOPDIR_FL of linux/fs.h (chattr +T).
const fsTopdirFL = 0x00020000

// spreadSubdirs marks dir, on ext2/3/4, as the top of a directory
// hierarchy: its new subdirectories (the sandboxes' dirs) are spread over
// the file system's block groups, as top-level ones are, rather than put
// in dir's own group with their files. Where the file system has no
// journal (as on some VMs' root file systems), ext4 allocating an inode
// skips, one by one, every inode of the group freed in the last minutes
// (recently_deleted); with every sandbox's files in one group, a burst of
// creates and deletes made each new inode a walk over hundreds of freed
// ones (docs/PERFORMANCE.md). Other file systems refuse or ignore it.
func spreadSubdirs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopdirFL != 0 {
		return err
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFL))
}

// criuBuiltIn reports, for crun, whether it was built with CRIU, without
// which it cannot checkpoint or restore: `crun --version` lists +CRIU
// among its features then (crun 1.8.1 of Debian 12 does not).
func criuBuiltIn(bin string) error {
	var out strings.Builder
	cmd := exec.Command(bin, "--version")
	cmd.Stdout = &out
	if err := runTracked(cmd); err != nil {
		return fmt.Errorf("%s --version: %w", bin, err)
	}
	if !strings.Contains(out.String(), "+CRIU") {
		return fmt.Errorf("%s was built without CRIU (its --version lists no +CRIU)", bin)
	}
	return nil
}

// hasCapability reports whether the daemon has capability c in effect.
func hasCapability(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}

// lookPath finds name on PATH or in one of dirs (sbin is often not on a
// daemon's PATH).
func lookPath(name string, dirs ...string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, d := range dirs {
		if fi, serr := os.Stat(filepath.Join(d, name)); serr == nil && fi.Mode()&0o111 != 0 {
			return filepath.Join(d, name), nil
		}
	}
	return "", err
}

func withDefaults(r, def sandbox.Resources) sandbox.Resources {
	if r.MilliCPU == 0 {
		r.MilliCPU = def.MilliCPU
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = def.MemoryBytes
	}
	if r.Pids == 0 {
		r.Pids = def.Pids
	}
	if r.DiskBytes == 0 {
		r.DiskBytes = def.DiskBytes
	}
	return r
}

// Name returns "oci".
func (r *Runtime) Name() string { return Name }

// Capabilities reports that Stop keeps the sandbox's files, that
// sandboxes live on this host, that egress policies are enforced when
// the runtime has an egress proxy, and that the disk limit and the
// loopback-only network are the project's own (the seccomp filter is the
// agent's, package seccomp, on every runtime). Persistence sizes
// the sandbox's disk, up to the size of Root's file system, and Retain
// keeps it after Delete; there are no storage classes, and one runtime
// binary runs every sandbox (no runtime classes). Sandboxes pause where the
// host has a cgroup freezer (see freezer.go), and are checkpointed when the
// runtime has a working CRIU (checkpoint.go) and a binary that drives it:
// runc, or a crun built with CRIU (New logs why not otherwise).
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		StopKeepsFiles: true, LocalFiles: true, NetworkPolicy: r.cfg.Egress != nil,
		DiskQuota: true, LoopbackOnly: true,
		Persistence: true, MaxVolumeBytes: r.maxDisk, Pause: r.canPause,
		Checkpoint: r.cfg.CRIU != "", NoCheckpoint: r.noCheckpoint,
	}
}

// ImageReady reports whether ref is in the image store.
func (r *Runtime) ImageReady(ctx context.Context, ref string) (bool, error) {
	_, err := r.cfg.Images.Get(ctx, ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PrepareImage pulls or builds ref into the image store unless it is there.
func (r *Runtime) PrepareImage(ctx context.Context, ref string) error {
	_, err := r.cfg.Images.Ensure(ctx, ref, nil)
	return err
}

// image returns the stored image ref. Create does not fetch images:
// PrepareImage does.
func (r *Runtime) image(ctx context.Context, ref string) (*image.Image, error) {
	if ref == "" {
		return nil, errdefs.Invalid("no image")
	}
	img, err := r.cfg.Images.Get(ctx, ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("image %s is not prepared: %w", ref, err)
	}
	return img, err
}

func (r *Runtime) dir(id string) string { return filepath.Join(r.cfg.Root, id) }

// meta is what a sandbox dir records about its sandbox.
type meta struct {
	ID        string            `json:"id"`
	Image     string            `json:"image,omitempty"`
	Layers    []string          `json:"layers"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	// Egress is the sandbox's egress policy, served again after a restart.
	Egress *sandbox.Egress `json:"egress,omitempty"`
	// Services: the sandbox's bundle mounts the services directory, whose
	// socket is served again after a restart.
	Services bool `json:"services,omitempty"`
	// Retain: Delete keeps the sandbox's disk (persistence's reclaim
	// policy Retain).
	Retain bool `json:"retain,omitempty"`
	// Binary is the runtime binary that runs the sandbox's container (a
	// snapshot's, which restores it): the runtime's own, unless it was
	// restored from a snapshot another binary took; Start makes it the
	// runtime's. Metadata written before it was recorded has none
	// (binaryOf).
	Binary string `json:"binary,omitempty"`
}

// readMeta returns the metadata of sandbox id, or an ErrNotFound when
// there is no complete sandbox of that id.
func (r *Runtime) readMeta(id string) (*meta, error) {
	if !validID.MatchString(id) {
		return nil, errdefs.NotFound("sandbox %q not found", id)
	}
	var m meta
	err := readJSONFile(filepath.Join(r.dir(id), fileMeta), &m)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// validate checks spec, to be run on the image layers, and returns its
// resources with defaults applied.
func (r *Runtime) validate(spec *sandbox.Spec, layers []string) (sandbox.Resources, error) {
	res := withDefaults(spec.Resources, r.cfg.DefaultResources)
	if err := r.Capabilities().Refuse(spec, Name); err != nil {
		return res, err
	}
	if spec.Persistence != nil {
		// Its size is the disk's: the writable storage it asks for.
		res.DiskBytes = spec.Persistence.SizeBytes
	}
	switch {
	case !validID.MatchString(spec.ID):
		return res, errdefs.Invalid("sandbox id %q must match %s", spec.ID, validID)
	case len(filepath.Join(r.dir(spec.ID), fileSock)) > maxSocketPath:
		return res, errdefs.Invalid("sandbox id %q makes the agent socket path longer than %d bytes", spec.ID, maxSocketPath)
	case len(layers) == 0:
		return res, errdefs.Invalid("sandbox %s has no image layers", spec.ID)
	case res.MilliCPU < quantity.MinMilliCPU:
		return res, errdefs.Invalid("cpu limit %dm is below %dm", res.MilliCPU, quantity.MinMilliCPU)
	case res.MemoryBytes < 16<<20:
		return res, errdefs.Invalid("memory limit %d is below 16 MiB", res.MemoryBytes)
	case res.Pids < 8:
		return res, errdefs.Invalid("pids limit %d is below 8", res.Pids)
	case res.DiskBytes < minDiskBytes:
		return res, errdefs.Invalid("disk size %d is below %d", res.DiskBytes, minDiskBytes)
	}
	if err := r.validateEgress(spec); err != nil {
		return res, errdefs.Invalid("%v", err)
	}
	if p := r.servicesSock(spec.ID); r.cfg.Services != nil && len(p) > maxSocketPath {
		return res, errdefs.Invalid("sandbox id %q makes the services socket path %s longer than %d bytes", spec.ID, p, maxSocketPath)
	}
	for _, m := range spec.Mounts {
		if err := m.Check(); err != nil {
			return res, err
		}
	}
	for _, l := range layers {
		if fi, err := os.Stat(l); err != nil || !fi.IsDir() || !filepath.IsAbs(l) {
			return res, errdefs.Invalid("image layer %q is not an absolute path to a directory", l)
		}
		// The overlay mount options separate layers with ':' and options
		// with ','.
		if strings.ContainsAny(l, ":,") {
			return res, errdefs.Invalid("image layer path %q contains ':' or ','", l)
		}
	}
	res.DiskBytes = (res.DiskBytes + 4095) &^ 4095
	return res, nil
}

// Create prepares the sandbox's disk, root file system and bundle. On error
// nothing is left behind.
func (r *Runtime) Create(ctx context.Context, spec *sandbox.Spec) error {
	img, err := r.image(ctx, spec.Image)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	res, err := r.validate(spec, img.Layers)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	dir := r.dir(spec.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errdefs.Conflict("create sandbox %s: already exists", spec.ID)
		}
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	if err := r.create(ctx, spec, img, res, dir); err != nil {
		return errors.Join(fmt.Errorf("create sandbox %s: %w", spec.ID, err),
			r.destroy(context.WithoutCancel(ctx), spec.ID, false))
	}
	return nil
}

func (r *Runtime) create(ctx context.Context, spec *sandbox.Spec, img *image.Image, res sandbox.Resources, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The grace period the runtime binary's first cgroup move waits for
	// (warmAttach) runs during the disk and mounts too: crun, whose move
	// comes a millisecond into its start, waits for what is left of it.
	go r.cgroups.warmAttach()
	start := time.Now()
	tmpl, err := r.templatePath(res.DiskBytes)
	if err != nil {
		return err
	}
	disk, rootfs := filepath.Join(dir, dirDisk), filepath.Join(dir, dirRootfs)
	if err := copySparse(tmpl, filepath.Join(dir, fileDisk)); err != nil {
		return fmt.Errorf("make disk: %w", err)
	}
	if r.cfg.ThickDisks {
		if err := r.allocateDisk(filepath.Join(dir, fileDisk)); err != nil {
			return err
		}
	}
	dirs := []string{disk, rootfs}
	if spec.Network.Egress != nil {
		dirs = append(dirs, filepath.Join(dir, dirEgress))
	}
	if r.cfg.Services != nil {
		dirs = append(dirs, filepath.Join(dir, dirServices))
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if err := mountDisk(filepath.Join(dir, fileDisk), disk); err != nil {
		return err
	}
	if r.cfg.CRIU != "" {
		if err := makeNetns(filepath.Join(dir, fileNetns)); err != nil {
			return err
		}
	}
	diskDone := time.Now()
	if err := writeEtc(filepath.Join(disk, diskUpper, "etc"), spec.ID); err != nil {
		return fmt.Errorf("write /etc: %w", err)
	}
	if err := mountRootfs(img.Layers, disk, rootfs); err != nil {
		return err
	}
	rootfsDone := time.Now()
	env := processEnv(img.Config.Env, spec.Env)
	if err := linkAgent(r.agent, filepath.Join(dir, fileAgent)); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(dir, fileConfig), r.bundleSpec(spec, env, res, disk, rootfs)); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	m := meta{ID: spec.ID, Image: spec.Image, Layers: img.Layers, Labels: spec.Labels, CreatedAt: time.Now().UTC(), Egress: spec.Network.Egress,
		Services: r.cfg.Services != nil, Retain: spec.Persistence != nil && spec.Persistence.Retain, Binary: r.oci.bin}
	if err := writeJSONFile(filepath.Join(dir, fileMeta), m); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	r.log.Debug("sandbox created", "sandbox", spec.ID, "disk", diskDone.Sub(start),
		"rootfs", rootfsDone.Sub(diskDone), "files", time.Since(rootfsDone))
	return nil
}

// writeEtc writes the sandbox's /etc/hostname and /etc/hosts into the upper
// layer before the overlay is mounted: the upper layer is a fresh directory
// on the sandbox's own disk, so no symlink of the image can redirect the
// writes to the host.
func writeEtc(etc, id string) error {
	if err := os.WriteFile(filepath.Join(etc, "hostname"), []byte(id+"\n"), 0o644); err != nil {
		return err
	}
	hosts := "127.0.0.1\tlocalhost " + id + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	return os.WriteFile(filepath.Join(etc, "hosts"), []byte(hosts), 0o644)
}

// mount mounts the disk and root file system of a sandbox, and keeps its
// network namespace when the daemon made one, unless they still are (after
// Stop, or a daemon restart); after a reboot they are not.
func (r *Runtime) mount(dir string, m *meta) error {
	if err := keepNetns(filepath.Join(dir, fileNetns)); err != nil {
		return err
	}
	disk, rootfs := filepath.Join(dir, dirDisk), filepath.Join(dir, dirRootfs)
	if ok, err := isMountpoint(disk); err != nil {
		return err
	} else if !ok {
		if err := mountDisk(filepath.Join(dir, fileDisk), disk); err != nil {
			return err
		}
	}
	if ok, err := isMountpoint(rootfs); err != nil || ok {
		return err
	}
	return mountRootfs(m.Layers, disk, rootfs)
}

// Start starts the sandbox's agent and returns once it answers. Starting a
// running sandbox does nothing.
func (r *Runtime) Start(ctx context.Context, id string) error {
	m, err := r.readMeta(id)
	if err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	dir := r.dir(id)
	pid, started := r.agentState(dir)
	if pid > 0 {
		return nil
	}
	if r.cfg.ThickDisks { // its disk may have been made thin
		if err := r.allocateDisk(filepath.Join(dir, fileDisk)); err != nil {
			return fmt.Errorf("start sandbox %s: %w", id, err)
		}
	}
	if err := r.mount(dir, m); err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	if started {
		// The stopped container still holds the id.
		if err := r.deleteContainer(ctx, id); err != nil {
			return fmt.Errorf("start sandbox %s: %w", id, err)
		}
	}
	if m.Egress != nil {
		if r.cfg.Egress == nil {
			return fmt.Errorf("start sandbox %s: %w", id, errdefs.Invalid("it needs network egress, which this runtime is not configured for"))
		}
		if err := r.serveEgress(id, m.Egress); err != nil {
			return fmt.Errorf("start sandbox %s: %w", id, err)
		}
	}
	if m.Services && r.cfg.Services != nil {
		if err := r.serveServices(id); err != nil {
			r.stopEgress(id)
			return fmt.Errorf("start sandbox %s: %w", id, err)
		}
	}
	if err := r.useCurrentAgent(dir); err != nil {
		r.stopSockets(id)
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	start := time.Now()
	if err := r.run(ctx, id, dir); err != nil {
		r.stopSockets(id)
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	if m.Binary != r.oci.bin {
		m.Binary = r.oci.bin
		if err := writeJSONFile(filepath.Join(dir, fileMeta), m); err != nil {
			return fmt.Errorf("start sandbox %s: write metadata: %w", id, err)
		}
	}
	ran := time.Now()
	if err := r.waitAgent(ctx, id, dir); err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	r.log.Debug("sandbox started", "sandbox", id, "run", ran.Sub(start), "agent", time.Since(ran))
	return nil
}

// run starts the container with the agent's listening socket as fd 3.
func (r *Runtime) run(ctx context.Context, id, dir string) error {
	sock := filepath.Join(dir, fileSock)
	pidFile := filepath.Join(dir, filePid)
	for _, f := range []string{sock, pidFile} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	lf, err := r.listenAgent(dir, sock)
	if err != nil {
		return fmt.Errorf("listen for the agent: %w", err)
	}
	defer lf.Close()
	logf, err := os.OpenFile(filepath.Join(dir, fileLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	go r.cgroups.warmAttach()
	if err := r.oci.run(ctx, id, dir, pidFile, lf, logf); err != nil {
		return errors.Join(fmt.Errorf("%w%s", err, logTail(filepath.Join(dir, fileLog))),
			r.oci.delete(context.WithoutCancel(ctx), id))
	}
	return writePid(pidFile, filepath.Join(dir, fileLog))
}

// writePid adds the agent's start time to the pid the runtime binary wrote
// at path: with it the pid names this process and no later one.
func writePid(path, log string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read agent pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("read agent pid: %w", err)
	}
	start, err := processStart(pid)
	if err != nil {
		return fmt.Errorf("agent exited at once: %w%s", err, logTail(log))
	}
	return os.WriteFile(path, []byte(strconv.Itoa(pid)+" "+strconv.FormatUint(start, 10)+"\n"), 0o600)
}

// listenAgent makes the agent's listening socket at sock: in the
// sandbox's own network namespace when the daemon made one (the runtime
// has CRIU, or had when it made the sandbox), so that CRIU can dump it.
func (r *Runtime) listenAgent(dir, sock string) (*os.File, error) {
	if netns := filepath.Join(dir, fileNetns); exists(netns) {
		return listenIn(netns, sock)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The socket file stays for reconnecting clients; the daemon's copy of
	// the socket goes once the agent holds its own.
	l.SetUnlinkOnClose(false)
	defer l.Close()
	return l.File()
}

// waitAgent waits until the agent answers. The socket listened before the
// agent ran, so the first request waits in the backlog; it fails at once
// if the agent dies, as the last copy of the socket closes with it.
func (r *Runtime) waitAgent(ctx context.Context, id, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	if _, err := r.client(id).Info(ctx); err != nil {
		return fmt.Errorf("wait for agent: %w%s", err, logTail(filepath.Join(dir, fileLog)))
	}
	return nil
}

// logTail returns the end of the log at path, formatted to follow an error.
func logTail(path string) string {
	b, _ := readTail(path, 1024)
	if s := strings.TrimSpace(string(b)); s != "" {
		return ": " + s
	}
	return ""
}

// readTail returns at most the last limit bytes of the file at path.
func readTail(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		if _, err := f.Seek(-limit, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// Logs returns at most the last limit bytes of what the agent and the
// runtime binary wrote since the sandbox was created.
func (r *Runtime) Logs(ctx context.Context, id string, limit int64) ([]byte, error) {
	if limit < 0 {
		return nil, errdefs.Invalid("sandbox logs %s: negative limit %d", id, limit)
	}
	if _, err := r.readMeta(id); err != nil {
		return nil, fmt.Errorf("sandbox logs %s: %w", id, err)
	}
	b, err := readTail(filepath.Join(r.dir(id), fileLog), limit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // never started
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox logs %s: %w", id, err)
	}
	return b, nil
}

// Stop sends the agent SIGTERM, on which it ends every process of the
// sandbox and exits, and SIGKILL after timeout (at once if timeout is 0). When the agent, the pid
// namespace's init, is gone, the kernel has killed everything else. The
// signals go through a pidfd, so they cannot hit a recycled pid. A paused
// sandbox is thawed: before SIGTERM, so that it can end gracefully, and
// after SIGKILL, so that its processes run no further than to their death.
func (r *Runtime) Stop(ctx context.Context, id string, timeout time.Duration) error {
	if _, err := r.readMeta(id); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	err := r.stop(ctx, id, timeout)
	r.stopSockets(id)
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return nil
}

func (r *Runtime) stop(ctx context.Context, id string, timeout time.Duration) error {
	dir := r.dir(id)
	pid, _ := r.agentState(dir)
	if pid == 0 {
		return nil
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open agent pidfd: %w", err)
	}
	defer unix.Close(pidfd)
	// The pid may have been recycled between agentState and PidfdOpen.
	if p, _ := r.agentState(dir); p != pid {
		return nil
	}
	if c := r.cachedClient(id); c != nil {
		c.Close()
	}
	fz := r.cgroups.freezer(id)
	if timeout > 0 {
		if err := fz.thaw(); err != nil {
			return err
		}
		if err := unix.PidfdSendSignal(pidfd, unix.SIGTERM, nil, 0); err == nil {
			if exited, err := waitPidfd(ctx, pidfd, timeout); err != nil || exited {
				reap(pid)
				return err
			}
		}
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill agent: %w", err)
	}
	if err := fz.thaw(); err != nil {
		return err
	}
	exited, err := waitPidfd(ctx, pidfd, killWait)
	if err == nil && !exited {
		err = fmt.Errorf("agent pid %d did not die after SIGKILL: %w", pid, errdefs.ErrUnavailable)
	}
	reap(pid)
	return err
}

// deleteContainer removes container id from the runtime binary's state,
// and from that of the other binaries a daemon on the same Root may have
// run before (serve --runtime changed, or auto finding a crun built since):
// a sandbox made by runc and deleted or restarted on crun leaves nothing
// under Root/_runc. A binary no longer installed has its state of the
// container removed by hand (its processes are gone: the agent, which
// stop kills first, is the pid namespace's init).
func (r *Runtime) deleteContainer(ctx context.Context, id string) error {
	errs := []error{r.oci.delete(ctx, id)}
	for _, name := range binaryNames {
		root := stateRoot(r.cfg.Root, name)
		if root == r.oci.root {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, id)); err != nil {
			continue
		}
		bin, err := exec.LookPath(name)
		if err != nil {
			errs = append(errs, os.RemoveAll(filepath.Join(root, id)))
			continue
		}
		errs = append(errs, newOCICLI(bin, r.cfg.Root).delete(ctx, id))
	}
	return errors.Join(errs...)
}

// binaryNames are the runtime binaries whose state deleteContainer and
// binaryOf look in.
var binaryNames = []string{"runc", "crun", "runsc"}

// binaryOf returns the runtime binary that runs the container of sandbox
// id: the one its metadata records, or, for a sandbox made before it
// did, the one whose state holds the container, else this runtime's.
func (r *Runtime) binaryOf(id string, m *meta) string {
	if m.Binary != "" {
		return m.Binary
	}
	for _, name := range binaryNames {
		if _, err := os.Stat(filepath.Join(stateRoot(r.cfg.Root, name), id)); err == nil {
			return name
		}
	}
	return r.oci.bin
}

// cliFor returns the ociCLI that drives runtime binary bin (a path or a
// name): this runtime's own for a binary of its name; else bin, or, for a
// name or a path that is gone, the binary of its name on PATH. Checkpoints and
// restores go through the binary that made the container or the
// snapshot: CRIU's images of one are not the other's.
func (r *Runtime) cliFor(bin string) (ociCLI, error) {
	if filepath.Base(bin) == filepath.Base(r.oci.bin) {
		return r.oci, nil
	}
	path := bin
	if _, err := os.Stat(path); err != nil || !filepath.IsAbs(path) {
		if path, err = exec.LookPath(filepath.Base(bin)); err != nil {
			return ociCLI{}, fmt.Errorf("runtime binary %s: %w", bin, err)
		}
	}
	c := newOCICLI(path, r.cfg.Root)
	c.criuEnv = r.oci.criuEnv
	return c, nil
}

// Delete removes the sandbox and everything held for it.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if !validID.MatchString(id) {
		return errdefs.NotFound("delete sandbox %q: not found", id)
	}
	if _, err := os.Stat(r.dir(id)); errors.Is(err, fs.ErrNotExist) {
		return errdefs.NotFound("delete sandbox %s: not found", id)
	}
	if err := r.destroy(ctx, id, true); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

// destroy removes whatever exists of sandbox id: the container (when one
// may exist), mounts, cgroups and the sandbox dir, in that order. It stops
// before removing the dir if something could not be cleaned, so that a
// later Delete or Recover finds what is left.
func (r *Runtime) destroy(ctx context.Context, id string, container bool) error {
	r.mu.Lock()
	if c := r.clients[id]; c != nil {
		c.Close()
		delete(r.clients, id)
	}
	delete(r.gates, id)
	r.mu.Unlock()
	dir := r.dir(id)
	var errs []error
	if container {
		// Killing the agent ourselves is faster than runc delete --force,
		// which polls for the container's death in 100 ms steps.
		if err := r.stop(ctx, id, 0); err != nil {
			errs = append(errs, err)
		}
		if err := r.deleteContainer(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	r.stopSockets(id)
	for _, d := range []string{dirRootfs, dirDisk} {
		if err := unmount(filepath.Join(dir, d)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeNetns(filepath.Join(dir, fileNetns)); err != nil {
		errs = append(errs, err)
	}
	if err := r.cgroups.remove(id); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && container {
		if err := r.retain(id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
