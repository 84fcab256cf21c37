package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// kdatDir is the tmpfs where CRIU keeps what it probed of the kernel
// (criu.kdat) on hosts whose /run is not a tmpfs: CRIU keeps that cache
// only on a tmpfs (a reboot must clear it) and, without it, probes the
// kernel anew on every dump and restore (100-150 ms each on 2 loaded
// cores). Patch 0004 of scripts/criu.sh makes CRIU take the directory from
// $CRIU_KDAT_DIR. The mount is shared by the host's daemons and left in
// place: it holds one small file.
const kdatDir = "/run/agent2env-criu"

// criuKdatEnv returns the environment that gives CRIU a kernel-data cache
// on a tmpfs: none when /run is a tmpfs (CRIU's own place), else
// CRIU_KDAT_DIR=kdatDir, a tmpfs mounted there if it is not one yet. When
// it cannot, CRIU works uncached and a warning says so.
func criuKdatEnv(log *slog.Logger) []string {
	if isTmpfs("/run") {
		return nil
	}
	if err := mountKdatDir(kdatDir); err != nil {
		log.Warn("CRIU probes the kernel on every snapshot and restore: no tmpfs for its cache", "dir", kdatDir, "err", err)
		return nil
	}
	return []string{"CRIU_KDAT_DIR=" + kdatDir}
}

// mountKdatDir makes dir a tmpfs, unless it is one, and removes the
// temporary file a CRIU that died while saving its cache leaves there
// (CRIU creates it exclusively, so one left over stops every later save).
func mountKdatDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !isTmpfs(dir) {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m,mode=0700"); err != nil {
			return fmt.Errorf("mount a tmpfs at %s: %w", dir, err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "criu.kdat.tmp")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// isTmpfs says whether path is on a tmpfs.
func isTmpfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.TMPFS_MAGIC
}
