package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// ociCLI runs the OCI runtime binary (runc, crun, runsc) with its state
// under one root directory. Only the commands all three share are used.
type ociCLI struct {
	bin  string
	root string
	// criuEnv is added to the environment of the commands that drive
	// CRIU (criuKdatEnv).
	criuEnv []string
	// hide is a cgroup2 mount point that the binary must not see, or "":
	// see exec.
	hide string
	// reap says whether the binary's helpers outlive it as zombies of the
	// daemon's, to be collected (scheduleReap): crun's do; runc waits for
	// its own (TestNoZombies), so its commands skip the scan of the
	// daemon's children.
	reap bool
}

// newOCICLI returns the ociCLI of runtime binary bin with its state
// under Root/_<its name> (stateRoot).
func newOCICLI(bin, root string) ociCLI {
	c := ociCLI{bin: bin, root: stateRoot(root, bin), reap: filepath.Base(bin) != "runc"}
	if filepath.Base(bin) == "crun" {
		c.hide = crunHybrid("/sys/fs/cgroup", fsType, os.ReadFile)
	}
	return c
}

// stateRoot is where runtime binary bin keeps its containers' state: one
// directory per binary name, so that two binaries' states never mix.
func stateRoot(root, bin string) string {
	return filepath.Join(root, "_"+filepath.Base(bin))
}

// exec runs cmd. With c.hide set it does so from a mount namespace of its own, made on a
// thread locked for it, in which an empty tmpfs covers c.hide.
// crun 1.8 refuses to run anything at all on a hybrid host, one whose
// cgroup2 holds a controller beside the v1 hierarchies ("cgroups in hybrid
// mode not supported"), even with its cgroup manager disabled; without
// that cgroup2 in sight it takes the host for a v1 one and manages the
// sandbox's v1 cgroups as runc does (limits, devices, freezer); what it
// makes for the sandbox in the tmpfs (a directory and a plain
// cgroup.procs file) goes with the namespace, and the sandbox stays in the
// daemon's cgroup2 cgroup, which holds no limit of the sandbox's. The
// namespace is a copy of the daemon's, slave to it, made per command (a
// copy of the mount table: tens of µs) so that it holds every mount the
// daemon made before; the container's own mount namespace is a copy of it,
// which pivot_root leaves behind. The thread is never unlocked: Go ends it
// with the goroutine, and its namespace with it.
//
// Then it has the zombies the binary's helpers leave to the daemon
// collected (scheduleReap): crun leaves one per run.
func (c ociCLI) exec(cmd *exec.Cmd) error {
	if c.reap {
		defer scheduleReap(c.bin)
	}
	if c.hide == "" {
		return runTracked(cmd)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := hideMount(c.hide); err != nil {
			errc <- fmt.Errorf("%s: %w", c.bin, err)
			return
		}
		errc <- runTracked(cmd)
	}()
	return <-errc
}

// hideMount moves the calling thread into a new mount namespace, slave to
// its old one, where an empty tmpfs covers dir.
func hideMount(dir string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts slave: %w", err)
	}
	if err := unix.Mount("agent2env-hidden", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0700"); err != nil {
		return fmt.Errorf("hide %s: %w", dir, err)
	}
	return nil
}

func (c ociCLI) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, c.bin, append([]string{"--root", c.root}, args...)...)
}

// output runs a command and returns its standard output; the error carries
// what the runtime said on standard error.
func (c ociCLI) output(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := c.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := c.exec(cmd); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", c.bin, args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// run creates and starts container id from bundle in one command and
// returns once its process runs. listener becomes the process's fd 3; its
// standard output and error go to log, and so do the runtime's own errors.
func (c ociCLI) run(ctx context.Context, id, bundle, pidFile string, listener, log *os.File) error {
	cmd := c.command(ctx, "run", "--detach", "--bundle", bundle,
		"--preserve-fds", "1", "--pid-file", pidFile, id)
	cmd.ExtraFiles = []*os.File{listener}
	cmd.Stdout, cmd.Stderr = log, log
	if err := c.exec(cmd); err != nil {
		return fmt.Errorf("%s run: %w", c.bin, err)
	}
	return nil
}

// delete removes container id, killing it if it still runs. A container
// the runtime does not know is not an error (runc and crun agree).
func (c ociCLI) delete(ctx context.Context, id string) error {
	_, err := c.output(ctx, "delete", "--force", id)
	return err
}

// list returns the ids of the runtime's containers.
func (c ociCLI) list(ctx context.Context) ([]string, error) {
	out, err := c.output(ctx, "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}
