package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ociCLI runs the OCI runtime binary (runc, crun, runsc) with its state
// under one root directory. Only the commands all three share are used.
type ociCLI struct {
	bin  string
	root string
	// criuEnv is added to the environment of the commands that drive
	// CRIU (criuKdatEnv).
	criuEnv []string
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
	if err := cmd.Run(); err != nil {
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
	if err := cmd.Run(); err != nil {
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
