package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// A deleted sandbox whose persistence says Retain leaves its disk image
// (its upper layer and /workspace, /tmp and home directory, laid out as
// disk.go says) as Root/_retained/<id>.img, or <id>.<unix nanoseconds>.img
// should that name be taken: a file the daemon never reads, mounts or
// deletes again. An operator reads it with `mount -o loop,ro` and removes
// it with rm (README, "Persistence"). Sandbox ids cannot hold '/' or start
// with '_' (validID), so the name stays in the directory and never meets
// a sandbox's.

// retainedPath is where the disk of deleted sandbox id is kept.
func (r *Runtime) retainedPath(id string) string {
	return filepath.Join(r.cfg.Root, dirRetained, id+".img")
}

// retain moves the disk of sandbox id, unmounted, out of its dir when its
// metadata says Retain; a sandbox without metadata (half made) keeps
// nothing.
func (r *Runtime) retain(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("retain the disk of sandbox %q: invalid id", id)
	}
	m, err := r.readMeta(id)
	if err != nil || !m.Retain {
		return nil
	}
	disk := filepath.Join(r.dir(id), fileDisk)
	if _, err := os.Lstat(disk); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	dst := r.retainedPath(id)
	err = unix.Renameat2(unix.AT_FDCWD, disk, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		dst = filepath.Join(r.cfg.Root, dirRetained, id+"."+strconv.FormatInt(time.Now().UnixNano(), 10)+".img")
		err = unix.Renameat2(unix.AT_FDCWD, disk, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	}
	if err != nil {
		return fmt.Errorf("retain the disk of sandbox %s: %w", id, err)
	}
	r.log.Info("sandbox deleted, its disk retained", "sandbox", id, "disk", dst)
	return nil
}

// maxDiskBytes is the largest disk a sandbox may ask for: the size of the
// file system holding root, which no image on it can outgrow.
func maxDiskBytes(root string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, fmt.Errorf("size of the file system of %s: %w", root, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}
