package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agent2env/agent2env/internal/memexec"
)

// ociCLI runs the OCI runtime binary (runc, crun, runsc) with its state
// under one root directory. Only the commands all three share are used.
type ociCLI struct {
	bin  string
	root string
	// exe is a link named as bin to sealed, a copy of bin in memory
	// (runFromMemory), which its commands execute in place of bin; or "".
	exe    string
	sealed *os.File
	// criuEnv is added to the environment of the commands that drive
	// CRIU (criuKdatEnv).
	criuEnv []string
	// reap says whether the binary's helpers outlive it as zombies of the
	// daemon's, to be collected (scheduleReap): crun's do; runc waits for
	// its own (TestNoZombies), so its commands skip the scan of the
	// daemon's children.
	reap bool
}

// newOCICLI returns the ociCLI of runtime binary bin with its state
// under Root/_<its name> (stateRoot).
func newOCICLI(bin, root string) ociCLI {
	return ociCLI{bin: bin, root: stateRoot(root, bin), reap: filepath.Base(bin) != "runc"}
}

// sealedFD is the lowest descriptor a sealed copy of a runtime binary
// takes: out of the way of those the daemon opens and closes all the time.
const sealedFD = 256

// runFromMemory makes c execute a sealed copy of its binary in memory
// (memexec), made once, through a symbolic link to it in dir named as the
// binary. runc and crun defend against a container overwriting the host's
// binary (CVE-2019-5736) by running from such a copy; one that is not
// started from one makes it itself on every command, before anything else
// (crun: a read-only bind mount of itself, or a copy, and a second exec
// with its dynamic loader's start: ≈ 0.6 ms of CPU a command here). With
// the copy made here they find themselves sealed and skip that. The link
// names the processes as the binary (an exec of /proc/self/fd/N is named
// N), which ps shows and the zombie collection looks for (scheduleReap).
// It leads to the daemon's descriptor, /proc/PID/fd/N (memexec.PIDPath),
// not the child's own: before its exec, a child of os/exec moves its own
// pipe to just above the highest of its files, which was N when that was
// N-1 and a descriptor below was free (a busy daemon holds hundreds), and
// an exec of /proc/self/fd/N then found the pipe (EACCES).
func (c *ociCLI) runFromMemory(dir string) error {
	path, err := exec.LookPath(c.bin)
	if err != nil {
		return err
	}
	link := filepath.Join(dir, filepath.Base(c.bin))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	bin, err := os.Open(path)
	if err != nil {
		return err
	}
	defer bin.Close()
	sealed, err := memexec.New(filepath.Base(path), bin, sealedFD)
	if err != nil {
		return err
	}
	if err := os.Symlink(memexec.PIDPath(sealed), link); err != nil {
		sealed.Close()
		return err
	}
	c.exe, c.sealed = link, sealed
	return nil
}

// stateRoot is where runtime binary bin keeps its containers' state: one
// directory per binary name, so that two binaries' states never mix.
func stateRoot(root, bin string) string {
	return filepath.Join(root, "_"+filepath.Base(bin))
}

// exec runs cmd, then has the zombies the binary's helpers leave to the
// daemon collected (scheduleReap): crun leaves one per run.
func (c ociCLI) exec(cmd *exec.Cmd) error {
	if c.reap {
		defer scheduleReap(c.bin)
	}
	if c.exe != "" {
		cmd.Path = c.exe
	}
	return runTracked(cmd)
}

// command returns a command of the binary (see exec for what is executed).
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
