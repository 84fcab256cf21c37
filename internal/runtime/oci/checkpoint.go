package oci

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// criuConfigAnnotation names, in a bundle, the CRIU configuration file that
// runc gives CRIU on checkpoint and restore: the one way through runc to
// CRIU's --external and --inherit-fd, which runc has no flags for. crun
// has no such way (before CRIU 4.2): its CRIU reads the file named by
// CRIU_CONFIG_FILE in its environment (ociCLI.criu).
const criuConfigAnnotation = "org.criu.config"

// criuLibDir is the directory beside the criu binary where scripts/criu.sh
// puts the libcriu.so.2 of the same build, which crun loads to drive it.
const criuLibDir = "lib"

// Files of checkpoints: fileCRIUConf in the sandbox dir; the others in a
// snapshot dir.
const (
	fileCRIUConf     = "criu.conf"
	fileSnapshot     = "snapshot.json"
	dirCRIUImages    = "images"
	dirCRIUWork      = "criu-work"
	firstInheritedFD = 10 // the criu swrk child uses fds 3 and 4 itself (runc's)
)

// connsClosedTimeout bounds the wait for the agent to close the daemon's
// connections before a dump.
const connsClosedTimeout = 5 * time.Second

// forwardsSettle bounds the wait, once the daemon has closed its ends of
// the sandbox's forwards, for the agent to close its own: the sandbox is
// frozen next, and a frozen agent closes nothing. The wait ends as soon as
// they are closed; 200 ms was too short on a loaded machine (CI: CRIU
// then refused the dump, "External socket is used").
const forwardsSettle = time.Second

// checkCRIU returns the path of the criu binary named by criu when `criu
// check` passes with it (run with env added to the daemon's environment),
// or "" (checkpoints off) with a warning saying why.
func checkCRIU(criu string, env []string, log *slog.Logger) string {
	path, err := exec.LookPath(criu)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, path, "check")
		cmd.Env = withEnv(env)
		cmd.Stdout, cmd.Stderr = &out, &out
		// Tracked: the collection of criu's zombies must not take it.
		if err = runTracked(cmd); err != nil {
			err = fmt.Errorf("%s check: %w: %s", path, err, strings.TrimSpace(out.String()))
		}
	}
	if err != nil {
		log.Warn("checkpoint and restore are off: CRIU does not work here (scripts/criu.sh builds one that does)", "err", err)
		return ""
	}
	log.Info("checkpoint and restore are on: criu check passed", "criu", path)
	return path
}

// snapshot is what a snapshot dir records besides CRIU's images and the disk.
type snapshot struct {
	Meta   meta        `json:"meta"`
	Config *specs.Spec `json:"config"`
	// Dir is the sandbox dir the snapshot was taken of: Restore replaces
	// it in the paths of Config.
	Dir string `json:"dir"`
	// ListenerIno is the inode of the agent's listening socket (fd 3),
	// which CRIU restores from the new sandbox's (--inherit-fd).
	ListenerIno uint64 `json:"listener_ino"`
	// Externals are the agent's open files outside the sandbox (its
	// standard input, output and error: host files), by CRIU key.
	Externals  []external `json:"externals"`
	TookMillis int64      `json:"took_ms"`
}

// external is a host file the agent holds open, which CRIU leaves out of
// the dump (--external file[mnt_id:ino]) and takes from the restoring
// process (--inherit-fd).
type external struct {
	Key string `json:"key"`
	// Log: the file is the agent's log (its stdout and stderr); otherwise
	// /dev/null.
	Log bool `json:"log,omitempty"`
}

// criu returns a command of the runtime binary that drives CRIU at criu
// with the options of the CRIU configuration file conf (externals and
// inherited descriptors) and c.criuEnv added to its environment (which CRIU
// inherits). runc takes criu's path as a flag and conf from the bundle's
// annotation; crun runs the first criu on PATH through libcriu, loaded
// from LD_LIBRARY_PATH, and its CRIU reads conf from CRIU_CONFIG_FILE. CRIU
// reads that file before the runtime's own options, which would undo
// the booleans in it: they are flags of both runtimes (criuFlags).
func (c ociCLI) criu(ctx context.Context, criu, conf string, args ...string) *exec.Cmd {
	env := c.criuEnv
	head := []string{"--root", c.root}
	if c.annotateCRIU() {
		head = append(head, "--criu", criu)
	} else {
		dir := filepath.Dir(criu)
		env = append(slices.Clip(env), "CRIU_CONFIG_FILE="+conf, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		if _, err := os.Stat(filepath.Join(dir, criuLibDir, "libcriu.so.2")); err == nil {
			env = append(env, "LD_LIBRARY_PATH="+filepath.Join(dir, criuLibDir))
		}
	}
	cmd := exec.CommandContext(ctx, c.bin, append(head, args...)...)
	cmd.Env = withEnv(env)
	return cmd
}

// execCRIU runs cmd, a command of criu's, then has the zombies it leaves
// collected: a CRIU that fails leaves the processes it forked (its
// service, the restored tree's root) to the daemon, their subreaper,
// whichever runtime binary drove it.
func (c ociCLI) execCRIU(cmd *exec.Cmd) error {
	defer scheduleReap(c.bin)
	return c.exec(cmd)
}

// criuFlags are the CRIU options every checkpoint and restore takes: the
// agent's and its commands' TCP connections and file locks are saved.
var criuFlags = []string{"--tcp-established", "--file-locks", "--manage-cgroups-mode", "soft"}

// annotateCRIU says whether the runtime binary takes the CRIU
// configuration file from the bundle's criuConfigAnnotation (runc).
func (c ociCLI) annotateCRIU() bool {
	return filepath.Base(c.bin) != "crun"
}

// withEnv returns the daemon's environment plus env, or nil (the daemon's
// own, for exec.Cmd) when env is empty.
func withEnv(env []string) []string {
	if len(env) == 0 {
		return nil
	}
	return append(os.Environ(), env...)
}

// checkpointable checks that sandbox id can be checkpointed now.
func (r *Runtime) checkpointable(id string) (*meta, int, error) {
	if r.cfg.CRIU == "" {
		return nil, 0, fmt.Errorf("checkpoint sandbox %s: the runtime has no CRIU: %w", id, errdefs.ErrNotImplemented)
	}
	m, err := r.readMeta(id)
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	if _, err := os.Stat(filepath.Join(r.dir(id), fileNetns)); err != nil {
		return nil, 0, errdefs.Precondition("checkpoint sandbox %s: it was made before CRIU was configured", id)
	}
	pid, _ := r.agentState(r.dir(id))
	if pid == 0 {
		return nil, 0, errdefs.Precondition("checkpoint sandbox %s: it is not running", id)
	}
	return m, pid, nil
}

// Checkpoint saves sandbox id into dir with `runc checkpoint`: CRIU's
// images of every process, the sandbox's disk image, its bundle config and
// metadata. The disk is copied while the sandbox is frozen, so files and
// memory agree.
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string, leaveRunning bool) error {
	m, pid, err := r.checkpointable(id)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	if err := r.checkpoint(ctx, id, dir, m, pid, leaveRunning); err != nil {
		return errors.Join(fmt.Errorf("checkpoint sandbox %s: %w", id, err), os.RemoveAll(dir))
	}
	return nil
}

func (r *Runtime) checkpoint(ctx context.Context, id, dir string, m *meta, pid int, leaveRunning bool) error {
	start := time.Now()
	sdir := r.dir(id)
	snap := snapshot{Meta: *m, Dir: sdir}
	snap.Meta.Binary = r.binaryOf(id, m)
	if err := readJSONFile(filepath.Join(sdir, fileConfig), &snap.Config); err != nil {
		return err
	}
	// The snapshot keeps the agent binary the sandbox runs, which the
	// sandboxes restored from it run (agentcopy.go): the bundle mounts it
	// from the sandbox dir, which Restore moves to the new sandbox's.
	am := agentMount(snap.Config)
	if am == nil {
		return fmt.Errorf("bundle of sandbox %s mounts no agent binary", id)
	}
	if err := linkAgent(am.Source, filepath.Join(dir, fileAgent)); err != nil {
		return err
	}
	am.Source = filepath.Join(sdir, fileAgent)
	var err error
	if snap.ListenerIno, err = listenerIno(pid, filepath.Join(sdir, fileSock)); err != nil {
		return fmt.Errorf("agent listener: %w", err)
	}
	logIno, err := fileIno(filepath.Join(sdir, fileLog))
	if err != nil {
		return err
	}
	var conf []string
	seen := map[string]bool{}
	for fd := 0; fd <= 2; fd++ {
		key, ino, err := fdKey(pid, fd)
		if err != nil {
			return err
		}
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		snap.Externals = append(snap.Externals, external{Key: key, Log: ino == logIno})
		conf = append(conf, "external "+key)
	}
	if err := os.WriteFile(filepath.Join(sdir, fileCRIUConf), []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	fz := r.cgroups.freezer(id)
	paused, err := fz.frozen()
	if err != nil {
		return err
	}
	// The daemon's new requests to the agent (an exec, a file) wait
	// until the sandbox is saved: they would be in the dump otherwise.
	gate := r.gate(id)
	release := gate.hold()
	defer release()
	// Attached terminals and processes, the commands the daemon runs
	// (each an exec attached to a process of the agent's) and the code
	// contexts' executions (each attached to a run of the agent's) let
	// go, and attach again through the gate once it opens: their users
	// see a pause.
	suspended := 0
	if c := r.cachedClient(id); c != nil {
		var resume func()
		suspended, resume = c.SuspendAttachments()
		defer resume()
		c.Close()
	}
	// A paused sandbox's agent runs for the moment it takes to let the
	// daemon's connections go, and is saved paused again; but not when
	// a request of the daemon's is in flight (a file transfer since
	// before the pause, an older agent's code execution), which the dump
	// would fail on after the wait, the sandbox's code running all the
	// while.
	if paused {
		if inFlight := gate.conns() - suspended; inFlight > 0 {
			return fmt.Errorf("sandbox %s is paused with %d requests to its agent in flight (a file transfer, an older agent's code execution): "+
				"resume it and snapshot once they end: %w", id, inFlight, errdefs.ErrFailedPrecondition)
		}
		if err := fz.thaw(); err != nil {
			return err
		}
	}
	parked, err := r.waitConnsClosed(ctx, id, pid)
	if err == nil {
		err = fz.freeze(ctx)
	}
	if err != nil {
		if parked {
			err = errors.Join(err, r.serveSockets(id, m))
		}
		if paused {
			err = errors.Join(err, fz.freeze(ctx))
		}
		return err
	}
	frozen := time.Now()
	err = r.dump(ctx, id, snap.Meta.Binary, sdir, dir, leaveRunning)
	if parked && (leaveRunning || err != nil) {
		// Served again before the sandbox thaws: its forwards dial them
		// afresh.
		err = errors.Join(err, r.serveSockets(id, m))
	}
	if !paused { // a paused sandbox stays paused
		if thawErr := fz.thaw(); thawErr != nil && leaveRunning {
			err = errors.Join(err, thawErr)
		}
	}
	if err != nil {
		return err
	}
	snap.TookMillis = time.Since(start).Milliseconds()
	if !leaveRunning {
		reap(pid)
		r.stopSockets(id)
	}
	r.log.Debug("sandbox checkpointed", "sandbox", id, "prepare", frozen.Sub(start), "frozen", time.Since(frozen))
	return writeJSONFile(filepath.Join(dir, fileSnapshot), snap)
}

// dump copies the disk of frozen sandbox id and checkpoints it with
// runtime binary bin (the sandbox's: binaryOf).
func (r *Runtime) dump(ctx context.Context, id, bin, sdir, dir string, leaveRunning bool) error {
	cli, err := r.cliFor(bin)
	if err != nil {
		return err
	}
	if err := syncDir(filepath.Join(sdir, dirDisk)); err != nil {
		return err
	}
	if err := copySparse(filepath.Join(sdir, fileDisk), filepath.Join(dir, fileDisk)); err != nil {
		return fmt.Errorf("copy disk: %w", err)
	}
	// runc makes the work directory itself; crun needs it made.
	if err := os.Mkdir(filepath.Join(dir, dirCRIUWork), 0o700); err != nil {
		return err
	}
	args := append([]string{"checkpoint", "--image-path", filepath.Join(dir, dirCRIUImages),
		"--work-path", filepath.Join(dir, dirCRIUWork)}, criuFlags...)
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	var out bytes.Buffer
	cmd := cli.criu(ctx, r.cfg.CRIU, filepath.Join(sdir, fileCRIUConf), append(args, id)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cli.execCRIU(cmd); err != nil {
		// CRIU's words name host paths: they go to the daemon's log only.
		dumpLog := filepath.Join(dir, dirCRIUWork, "dump.log")
		r.log.Error("checkpoint: CRIU failed", "sandbox", id, "err", err, "output", strings.TrimSpace(out.String()),
			"log", logTail(dumpLog))
		if why := criuRefusal(dumpLog); why != nil {
			return fmt.Errorf("%s checkpoint: %w", filepath.Base(cli.bin), why)
		}
		return fmt.Errorf("%s checkpoint: %v: CRIU could not save the sandbox's processes as they were (the daemon's log says why); it runs on as before: %w",
			filepath.Base(cli.bin), err, errdefs.ErrUnavailable)
	}
	return nil
}

// criuRefusal is the error of a dump CRIU refused for a reason its user
// can remove, read from its log: nil when the log names none.
func criuRefusal(dumpLog string) error {
	b, _ := readTail(dumpLog, 64<<10)
	if bytes.Contains(b, []byte("ctty inheritance detected")) {
		// tty_verify_ctty: a process opened /dev/tty, its controlling
		// terminal, without an end of that terminal in its own files
		// (scripts/criu/0006 saves one that has one, as a shell does).
		return errdefs.Precondition("a program on a terminal of the sandbox holds its controlling terminal (/dev/tty) " +
			"in a way CRIU cannot save (its process has no end of that terminal of its own): end the programs " +
			"running on the sandbox's terminals, then snapshot again; the sandbox runs on as before")
	}
	return nil
}

// waitConnsClosed closes the daemon's idle connections to the agent of
// sandbox id and waits until no connection crosses the sandbox's edge:
// CRIU cannot dump a connection whose other end is outside the sandbox.
// Both kinds are unix connections, whose accepting end the kernel makes in
// the connecting end's network namespace. The daemon's connections to the
// agent are the daemon's (the agent's accepting ends are in the host's
// namespace, where CRIU, dumping the sandbox's, does not even find them):
// the agent closes its ends when it sees the daemon's end. The agent's
// connections to the daemon's services and egress proxy (the forwards of
// 127.0.0.1:4000 and :3128, one per connection a process of the sandbox
// makes) are the sandbox's (the daemon's accepting ends are in the
// sandbox's namespace): when there are any, the daemon parks the sockets
// it serves the sandbox (stopSockets, which ends those connections: their
// clients in the sandbox see them reset, as in a network blip, and a
// connection made meanwhile is refused) and parked is true; the caller
// serves them again (serveSockets) once the dump is done. The agent's
// ends of the forwards the daemon closed go once the agent reads their
// end: it is given forwardsSettle to close them (CI once froze it first,
// and CRIU refused the dump: "External socket is used"). A request of the
// daemon's own still in flight (a file transfer, an older agent's code
// execution; not a command's, a code execution's nor an attachment to a
// process, which the caller suspends) makes the checkpoint fail after
// connsClosedTimeout. The caller holds the agent client's dialGate: no
// new request of the daemon's starts meanwhile.
func (r *Runtime) waitConnsClosed(ctx context.Context, id string, pid int) (parked bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, connsClosedTimeout)
	defer cancel()
	var forwards map[string]bool // the agent's ends, when parked
	var settle time.Time         // when the daemon's ends were found closed
	gate := r.gate(id)
	for {
		if c := r.cachedClient(id); c != nil {
			c.Close()
		}
		host, inner, err := edgeConns(pid)
		if err != nil {
			return parked, err
		}
		// The daemon's connections the agent has not accepted yet are
		// only in the gate's count.
		host = max(host, gate.conns())
		if host+inner == 0 {
			if len(forwards) == 0 {
				return parked, nil
			}
			if settle.IsZero() {
				settle = time.Now()
			}
			open, err := agentForwards(pid)
			if err != nil || !anyOf(open, forwards) || time.Since(settle) > forwardsSettle {
				return parked, err
			}
		} else {
			settle = time.Time{}
		}
		if inner > 0 && !parked {
			if forwards, err = agentForwards(pid); err != nil {
				return false, err
			}
			r.stopSockets(id)
			parked = true
		}
		select {
		case <-ctx.Done():
			if inner > 0 {
				return parked, fmt.Errorf("the sandbox still holds %d connections to the daemon's services or egress proxy (127.0.0.1:4000, 127.0.0.1:3128) after they were closed: %w", inner, errdefs.ErrUnavailable)
			}
			return parked, fmt.Errorf("the agent still holds %d connections from the daemon (a file transfer, an older agent's code execution): %w", host, errdefs.ErrUnavailable)
		case <-time.After(time.Millisecond):
		}
	}
}

// serveSockets serves sandbox id the sockets its metadata m asks for (its
// egress proxy, the daemon's services) that the runtime has.
func (r *Runtime) serveSockets(id string, m *meta) error {
	if m.Egress != nil && r.cfg.Egress != nil {
		if err := r.serveEgress(id, m.Egress); err != nil {
			return err
		}
	}
	if m.Services && r.cfg.Services != nil {
		return r.serveServices(id)
	}
	return nil
}

// edgeConns counts the unix sockets that join the sandbox of agent pid to
// the daemon: host, the agent's sockets of the daemon's network namespace,
// and inner, the daemon's sockets of the sandbox's.
func edgeConns(pid int) (host, inner int, err error) {
	hostInodes, err := unixInodes("/proc/self/net/unix")
	if err != nil {
		return 0, 0, err
	}
	innerInodes, err := unixInodes(fmt.Sprintf("/proc/%d/net/unix", pid))
	if err != nil {
		return 0, 0, err
	}
	if host, err = socketsOf(strconv.Itoa(pid), hostInodes); err != nil {
		return 0, 0, err
	}
	if inner, err = socketsOf("self", innerInodes); err != nil {
		return 0, 0, err
	}
	return host, inner, nil
}

// agentForwards returns the inodes of the connected unnamed unix sockets
// that agent pid holds in the sandbox's network namespace: its ends of the
// connections its forwards make to the daemon's services and egress proxy
// (the connecting end of a unix connection has no name).
func agentForwards(pid int) (map[string]bool, error) {
	// St 03 is SS_CONNECTED; seven fields, no path.
	connected, err := unixInodesWhere(fmt.Sprintf("/proc/%d/net/unix", pid), func(f []string) bool {
		return len(f) == 7 && f[5] == "03"
	})
	if err != nil {
		return nil, err
	}
	return socketSet(strconv.Itoa(pid), connected)
}

// anyOf reports whether any of want is in have.
func anyOf(have, want map[string]bool) bool {
	for ino := range want {
		if have[ino] {
			return true
		}
	}
	return false
}

// socketsOf counts the open sockets of process proc ("self" or a pid)
// whose inodes are in inodes.
func socketsOf(proc string, inodes map[string]bool) (int, error) {
	set, err := socketSet(proc, inodes)
	return len(set), err
}

// socketSet returns the inodes of the open sockets of process proc that
// are in inodes.
func socketSet(proc string, inodes map[string]bool) (map[string]bool, error) {
	fds, err := os.ReadDir("/proc/" + proc + "/fd")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink("/proc/" + proc + "/fd/" + fd.Name())
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			if ino = strings.TrimSuffix(ino, "]"); inodes[ino] {
				set[ino] = true
			}
		}
	}
	return set, nil
}

// unixInodes returns the inodes of the unix sockets listed in path, a
// /proc/<pid>/net/unix.
func unixInodes(path string) (map[string]bool, error) {
	return unixInodesWhere(path, func([]string) bool { return true })
}

// unixInodesWhere returns the inodes of the unix sockets listed in path
// whose fields (Num RefCount Protocol Flags Type St Inode [Path]) keep
// accepts.
func unixInodesWhere(path string, keep func(fields []string) bool) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 7 && keep(f) {
			inodes[f[6]] = true
		}
	}
	return inodes, nil
}

// Restore makes sandbox newID from the snapshot in dir with `runc restore`:
// a copy of the snapshot's disk, the image's layers as the snapshot's
// sandbox had them, a new network namespace and a new listening socket,
// which CRIU gives the agent in place of the old one.
func (r *Runtime) Restore(ctx context.Context, newID, dir string, labels map[string]string) error {
	if r.cfg.CRIU == "" {
		return fmt.Errorf("restore sandbox %s: the runtime has no CRIU: %w", newID, errdefs.ErrNotImplemented)
	}
	var snap snapshot
	if err := readJSONFile(filepath.Join(dir, fileSnapshot), &snap); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errdefs.NotFound("restore sandbox %s: no snapshot in %s", newID, dir)
		}
		return fmt.Errorf("restore sandbox %s: %w", newID, err)
	}
	if !validID.MatchString(newID) {
		return errdefs.Invalid("sandbox id %q must match %s", newID, validID)
	}
	ndir := r.dir(newID)
	if err := os.Mkdir(ndir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errdefs.Conflict("restore sandbox %s: already exists", newID)
		}
		return fmt.Errorf("restore sandbox %s: %w", newID, err)
	}
	if err := r.restore(ctx, newID, dir, ndir, &snap, labels); err != nil {
		return errors.Join(fmt.Errorf("restore sandbox %s: %w", newID, err),
			r.destroy(context.WithoutCancel(ctx), newID, true))
	}
	return nil
}

func (r *Runtime) restore(ctx context.Context, id, dir, ndir string, snap *snapshot, labels map[string]string) error {
	start := time.Now()
	disk, rootfs := filepath.Join(ndir, dirDisk), filepath.Join(ndir, dirRootfs)
	if err := copySparse(filepath.Join(dir, fileDisk), filepath.Join(ndir, fileDisk)); err != nil {
		return fmt.Errorf("copy disk: %w", err)
	}
	if r.cfg.ThickDisks {
		if err := r.allocateDisk(filepath.Join(ndir, fileDisk)); err != nil {
			return err
		}
	}
	for _, d := range []string{disk, rootfs, filepath.Join(ndir, dirCRIUWork)} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if err := mountDisk(filepath.Join(ndir, fileDisk), disk); err != nil {
		return err
	}
	if err := mountRootfs(snap.Meta.Layers, disk, rootfs); err != nil {
		return err
	}
	if err := makeNetns(filepath.Join(ndir, fileNetns)); err != nil {
		return err
	}
	// Snapshots taken before they kept their agent binary mount the one
	// their sandbox had, wherever it is now.
	if _, err := os.Stat(filepath.Join(dir, fileAgent)); err == nil {
		if err := linkAgent(filepath.Join(dir, fileAgent), filepath.Join(ndir, fileAgent)); err != nil {
			return err
		}
	}
	cfg := rebase(snap.Config, snap.Dir, ndir)
	cfg.Hostname = id
	cfg.Linux.CgroupsPath = r.cgroups.path(id)
	if err := writeJSONFile(filepath.Join(ndir, fileConfig), cfg); err != nil {
		return err
	}
	lf, err := listenIn(filepath.Join(ndir, fileNetns), filepath.Join(ndir, fileSock))
	if err != nil {
		return fmt.Errorf("listen for the agent: %w", err)
	}
	defer lf.Close()
	logf, err := os.OpenFile(filepath.Join(ndir, fileLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	// The criu swrk child of runc and of crun keeps the fds it inherits
	// from the runtime binary: ours go at firstInheritedFD and up, past
	// the ones runc passes it.
	extra := make([]*os.File, firstInheritedFD-3)
	extra = append(extra, lf)
	conf := []string{fmt.Sprintf("inherit-fd fd[%d]:socket:[%d]", firstInheritedFD, snap.ListenerIno)}
	for _, e := range snap.Externals {
		f := null
		if e.Log {
			f = logf
		}
		conf = append(conf, fmt.Sprintf("inherit-fd fd[%d]:%s", 3+len(extra), e.Key))
		extra = append(extra, f)
	}
	if err := os.WriteFile(filepath.Join(ndir, fileCRIUConf), []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	m := snap.Meta
	m.ID, m.Labels, m.CreatedAt = id, labels, time.Now().UTC()
	// The restored agent forwards to its own sockets (the bundle mounts the
	// new sandbox's directories), served before it runs.
	if m.Egress != nil {
		if r.cfg.Egress == nil {
			return errdefs.Invalid("the snapshot's sandbox has network egress, which this runtime is not configured for")
		}
		if err := r.serveEgress(id, m.Egress); err != nil {
			return err
		}
	}
	if m.Services {
		if r.cfg.Services == nil { // the bundle mounts the directory all the same
			if err := os.Mkdir(filepath.Join(ndir, dirServices), 0o700); err != nil {
				return err
			}
		} else if err := r.serveServices(id); err != nil {
			return err
		}
	}
	prepared := time.Now()
	pidFile := filepath.Join(ndir, filePid)
	args := append([]string{"restore", "--detach", "--bundle", ndir,
		"--image-path", filepath.Join(dir, dirCRIUImages), "--work-path", filepath.Join(ndir, dirCRIUWork),
		"--pid-file", pidFile}, criuFlags...)
	// Snapshots taken before they recorded their binary are runc's: no
	// other binary could take one then.
	cli, err := r.cliFor(cmp.Or(snap.Meta.Binary, "runc"))
	if err != nil {
		return err
	}
	m.Binary = cli.bin
	cmd := cli.criu(ctx, r.cfg.CRIU, filepath.Join(ndir, fileCRIUConf), append(args, id)...)
	cmd.ExtraFiles = extra
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cli.execCRIU(cmd); err != nil {
		r.log.Error("restore: CRIU failed", "sandbox", id, "err", err, "output", logTail(filepath.Join(ndir, fileLog)),
			"log", logTail(filepath.Join(ndir, dirCRIUWork, "restore.log")))
		return fmt.Errorf("%s restore: %w: CRIU could not restore the snapshot's processes (the daemon's log says why)", filepath.Base(cli.bin), err)
	}
	if err := writePid(pidFile, filepath.Join(ndir, fileLog)); err != nil {
		return err
	}
	if pid, _ := r.agentState(ndir); pid == 0 {
		return fmt.Errorf("the restored agent is gone%s", logTail(filepath.Join(ndir, fileLog)))
	} else if err := setHostname(pid, id); err != nil {
		return fmt.Errorf("name the restored sandbox: %w", err)
	}
	if err := writeJSONFile(filepath.Join(ndir, fileMeta), m); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	restored := time.Now()
	if err := r.waitAgent(ctx, id, ndir); err != nil {
		return err
	}
	r.log.Debug("sandbox restored", "sandbox", id, "prepare", prepared.Sub(start),
		"restore", restored.Sub(prepared), "agent", time.Since(restored))
	return nil
}

// setHostname names the UTS namespace of process pid host: CRIU restores
// the snapshot's, the parent sandbox's id. The thread that joins the
// namespace stays locked, so Go ends it with its goroutine and no other
// goroutine runs in it.
func setHostname(pid int, host string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/uts", pid))
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWUTS); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- unix.Sethostname([]byte(host))
	}()
	return <-errc
}

// rebase returns a copy of config with every path under dir moved under
// ndir.
func rebase(config *specs.Spec, dir, ndir string) *specs.Spec {
	c := *config
	move := func(p string) string {
		if rest, ok := strings.CutPrefix(p, dir+"/"); ok {
			return filepath.Join(ndir, rest)
		}
		return p
	}
	root := *c.Root
	root.Path = move(root.Path)
	c.Root = &root
	c.Mounts = append([]specs.Mount(nil), c.Mounts...)
	for i := range c.Mounts {
		c.Mounts[i].Source = move(c.Mounts[i].Source)
	}
	linux := *c.Linux
	linux.Namespaces = append([]specs.LinuxNamespace(nil), linux.Namespaces...)
	for i := range linux.Namespaces {
		linux.Namespaces[i].Path = move(linux.Namespaces[i].Path)
	}
	c.Linux = &linux
	c.Annotations = map[string]string{}
	for k, v := range config.Annotations {
		c.Annotations[k] = move(v)
	}
	return &c
}

// fdKey returns CRIU's key of fd of process pid when it is a host file
// CRIU cannot dump ("file[mnt_id:ino]", hex) and its inode; "" for pipes
// and sockets, which CRIU handles.
func fdKey(pid, fd int) (string, uint64, error) {
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return "", 0, err
	}
	if strings.HasPrefix(link, "pipe:") || strings.HasPrefix(link, "socket:") || strings.HasPrefix(link, "anon_inode:") {
		return "", 0, nil
	}
	ino, err := fdIno(pid, fd)
	if err != nil {
		return "", 0, err
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		return "", 0, err
	}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			mnt, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return "", 0, err
			}
			return fmt.Sprintf("file[%x:%x]", mnt, ino), ino, nil
		}
	}
	return "", 0, fmt.Errorf("fd %d of pid %d: no mnt_id in fdinfo", fd, pid)
}

// listenerIno returns the inode of the listening unix socket bound to path
// in the network namespace of process pid. (The agent holds it at another
// fd than the 3 it was given: Go's net.FileListener takes a copy.)
func listenerIno(pid int, path string) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/unix", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// Num RefCount Protocol Flags Type St Inode Path; flag
		// __SO_ACCEPTCON marks listeners.
		if f := strings.Fields(line); len(f) == 8 && f[7] == path && f[3] == "00010000" {
			return strconv.ParseUint(f[6], 10, 64)
		}
	}
	return 0, fmt.Errorf("no listening socket at %s in the sandbox's network namespace", path)
}

// fdIno returns the inode of fd of process pid.
func fdIno(pid, fd int) (uint64, error) {
	return fileIno(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
}

func fileIno(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Ino, nil
}

// syncDir flushes the file system holding dir to its device.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
