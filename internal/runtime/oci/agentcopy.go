package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// A sandbox runs the agent binary of its own directory (fileAgent): a hard
// link to the runtime's copy of Config.AgentBinary in Root/_agents, named
// by its SHA-256 (installAgent). Upgrading the daemon in place replaces the
// file at Config.AgentBinary, not that copy, so the sandboxes running
// across an upgrade keep an agent that is a file: CRIU checkpoints them
// (it refuses to dump a deleted executable larger than 1 MiB, which a
// bind mount of the replaced file would be). A snapshot keeps a link (a
// copy across file systems) of its sandbox's agent beside CRIU's images,
// and the sandboxes restored from it run that one: CRIU finds the
// executable it saved, of the same size, after any upgrade. Start links
// the runtime's current agent afresh: a sandbox started again runs the
// daemon's own.

// installAgent returns the copy of agent binary bin in dir, made unless
// there, and removes the copies of other binaries that no sandbox or
// snapshot links any more.
func installAgent(bin, dir string, log *slog.Logger) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	sum, err := fileSHA256(bin)
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	path := filepath.Join(dir, sum)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := copyAgent(bin, path); err != nil {
			return "", fmt.Errorf("copy agent binary %s: %w", bin, err)
		}
	} else if err != nil {
		return "", err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if p == path {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		// Kept while a sandbox or snapshot links it; else it is the copy
		// of an earlier daemon whose sandboxes and snapshots are gone, or
		// one cut short by a crash.
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			continue
		}
		if err := os.Remove(p); err != nil {
			log.Warn("remove unused agent binary", "path", p, "err", err)
		}
	}
	return path, nil
}

// fileSHA256 returns the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyAgent copies executable src to dst, which appears whole or not at
// all, read-only and executable.
func copyAgent(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := out.Name()
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(0o555)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}

// linkAgent makes dst the agent binary src: a hard link, or a copy where
// they are on different file systems. A dst already there is replaced,
// unless it is src.
func linkAgent(src, dst string) error {
	if same, err := isLink(src, dst); err != nil || same {
		// Renaming a link over another of the same file does nothing.
		return err
	}
	tmp := dst + ".tmp"
	if err := removeIfExists(tmp); err != nil {
		return err
	}
	err := os.Link(src, tmp)
	if errors.Is(err, unix.EXDEV) {
		err = copyAgent(src, tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return fmt.Errorf("agent binary: %w", errors.Join(err, removeIfExists(tmp)))
	}
	return nil
}

// isLink reports whether dst is a link to agent binary src (false when
// there is no dst).
func isLink(src, dst string) (bool, error) {
	si, err := os.Stat(src)
	if err != nil {
		return false, fmt.Errorf("agent binary: %w", err)
	}
	di, err := os.Stat(dst)
	return err == nil && os.SameFile(si, di), nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// agentMount returns the mount of config that puts the agent binary in
// the sandbox, or nil.
func agentMount(config *specs.Spec) *specs.Mount {
	for i := range config.Mounts {
		if config.Mounts[i].Destination == agentPath {
			return &config.Mounts[i]
		}
	}
	return nil
}

// useCurrentAgent links the runtime's agent binary into sandbox dir and
// has its bundle mount it. The bundle of a sandbox made before sandboxes
// had an agent of their own mounts Config.AgentBinary, or what was there
// when it was made: it is rewritten to mount the link, before the link is
// made. So a sandbox whose link is the current agent already (every one
// just created) has a bundle that mounts it, and its bundle is not read.
func (r *Runtime) useCurrentAgent(dir string) error {
	own := filepath.Join(dir, fileAgent)
	if current, err := isLink(r.agent, own); err != nil || current {
		return err
	}
	var config specs.Spec
	if err := readJSONFile(filepath.Join(dir, fileConfig), &config); err != nil {
		return err
	}
	m := agentMount(&config)
	if m == nil {
		return fmt.Errorf("bundle %s mounts no agent binary", dir)
	}
	if m.Source != own {
		m.Source = own
		if err := writeJSONFile(filepath.Join(dir, fileConfig), &config); err != nil {
			return err
		}
	}
	return linkAgent(r.agent, own)
}
