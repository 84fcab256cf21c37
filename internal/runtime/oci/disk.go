package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Layout of a sandbox disk. The template image is made with these entries
// already in place, so a new disk needs no mkdir or chown.
const (
	diskUpper     = "upper"     // overlay upper layer
	diskWork      = "work"      // overlay work dir
	diskWorkspace = "workspace" // bind-mounted at /workspace
	diskHome      = "home"      // bind-mounted at the home directory
	diskTmp       = "tmp"       // bind-mounted at /tmp
)

// agentPath is where the agent binary is bind-mounted in every sandbox.
const agentPath = "/.agent2env/agent2env"

// minDiskBytes is the smallest disk an ext4 file system with 4 KiB blocks
// and room for user files can be made on.
const minDiskBytes = 16 << 20

// templatePath returns the template image for disks of size bytes, making
// it first if needed. Templates are made once per size and never change:
// every sandbox disk of that size starts as a copy of one.
func (r *Runtime) templatePath(size int64) (string, error) {
	p := filepath.Join(r.cfg.Root, dirTemplates, strconv.FormatInt(size, 10)+".img")
	r.tmplMu.Lock()
	defer r.tmplMu.Unlock()
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	stage, err := os.MkdirTemp(filepath.Dir(p), "stage-")
	if err != nil {
		return "", fmt.Errorf("make disk template: %w", err)
	}
	defer os.RemoveAll(stage)
	if err := stageDiskTree(stage); err != nil {
		return "", fmt.Errorf("make disk template: %w", err)
	}
	tmp := p + ".tmp"
	// No journal (a sandbox disk is scratch space and a crash loses the
	// sandbox anyway), no reserved blocks (ENOSPC at the size asked for),
	// 4 KiB blocks even on small disks, inode tables left to the holes of
	// the sparse file (mounted with noinit_itable, nothing zeroes them).
	out, err := exec.Command(r.mkfs, "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0",
		"-O", "^has_journal", "-E", "lazy_itable_init=1,root_owner=0:0",
		"-d", stage, tmp, strconv.FormatInt(size/1024, 10)+"k").CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("make disk template: %s: %w: %s", r.mkfs, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("make disk template: %w", err)
	}
	return p, nil
}

// stageDiskTree lays out the directories of a fresh disk under dir: the
// overlay upper layer with the sandbox's mount points, and the user's
// writable directories.
func stageDiskTree(dir string) error {
	dirs := []struct {
		path     string
		mode     uint32 // raw, with the sticky bit as S_ISVTX
		uid, gid int
	}{
		{diskUpper, 0o755, 0, 0},
		{diskUpper + "/etc", 0o755, 0, 0},
		{diskUpper + "/proc", 0o555, 0, 0},
		{diskUpper + "/sys", 0o555, 0, 0},
		{diskUpper + "/dev", 0o755, 0, 0},
		{diskUpper + "/tmp", 0o1777, 0, 0},
		{diskUpper + sandbox.WorkDir, 0o755, 0, 0},
		{diskUpper + filepath.Dir(sandbox.HomeDir), 0o755, 0, 0},
		{diskUpper + sandbox.HomeDir, 0o755, 0, 0},
		{diskUpper + filepath.Dir(agentPath), 0o755, 0, 0},
		{diskWork, 0o700, 0, 0},
		{diskWorkspace, 0o755, sandbox.UserID, sandbox.GroupID},
		{diskHome, 0o700, sandbox.UserID, sandbox.GroupID},
		{diskTmp, 0o1777, 0, 0},
	}
	for _, d := range dirs {
		p := filepath.Join(dir, d.path)
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
		// Mkdir applies the umask: set the mode exactly.
		if err := unix.Chmod(p, d.mode); err != nil {
			return err
		}
		if err := os.Lchown(p, d.uid, d.gid); err != nil {
			return err
		}
	}
	// The bind mount of the agent binary needs a file to land on.
	return os.WriteFile(filepath.Join(dir, diskUpper+agentPath), nil, 0o755)
}

// copySparse copies the template at src to a new file dst of the same size,
// copying only the data extents: a fresh ext4 image is a few hundred KiB of
// metadata in a file of gigabytes.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := copyExtents(in, out, fi.Size()); err != nil {
		out.Close()
		return hostFull(fmt.Errorf("copy %s: %w", src, err))
	}
	return out.Close()
}

// hostFull marks err errdefs.NoSpace (507) when a write of the host's
// failed for want of room (ENOSPC, EDQUOT): a refusal, not the daemon's
// own failure.
func hostFull(err error) error {
	if isFull(err) {
		return errdefs.NoSpace(err)
	}
	return err
}

// isFull reports whether err is a write of the host's refused for want of
// room.
func isFull(err error) bool { return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) }

// allocateDisk gives the disk image at path its whole size on Root's file
// system (Config.ThickDisks): fallocate makes unwritten extents, which
// cost the file system's metadata but no data written, and a write of the
// sandbox into them then needs no block of the host, full or not. On a
// file system that shares extents (xfs's reflinks, which copySparse's
// copy_file_range may make) the template's blocks are unshared too. A
// disk allocated already costs a stat. Allocations are serialized, so
// that each one's check of the free space counts the ones before it: one
// that would leave less than Config.DiskReserve free is refused with
// errdefs.NoSpace, nothing allocated, as is one the file system refuses
// (whose caller removes the file: ext4 keeps what a failed fallocate
// took).
func (r *Runtime) allocateDisk(path string) error {
	r.allocMu.Lock()
	defer r.allocMu.Unlock()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("allocate disk: %w", err)
	}
	defer f.Close()
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("allocate disk: %w", err)
	}
	need := st.Size - st.Blocks*512
	if need <= 0 {
		return nil
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("allocate disk: %w", err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	if free-need < r.cfg.DiskReserve {
		return r.noRoom(st.Size, need, free)
	}
	if err := unix.Fallocate(fd, 0, 0, st.Size); err != nil {
		if isFull(err) { // written meanwhile by another than the daemon
			return r.noRoom(st.Size, need, free)
		}
		return fmt.Errorf("allocate disk: fallocate %s: %w", path, err)
	}
	err = unix.Fallocate(fd, unix.FALLOC_FL_UNSHARE_RANGE, 0, st.Size)
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
		return hostFull(fmt.Errorf("allocate disk: unshare %s: %w", path, err))
	}
	return nil
}

// noRoom is allocateDisk's refusal of a disk of size bytes that needs
// need more of Root's file system, which has free.
func (r *Runtime) noRoom(size, need, free int64) error {
	keeps := ""
	if r.cfg.DiskReserve > 0 {
		keeps = fmt.Sprintf(" and keeps %s free (--disk-reserve)", quantity.Mebibytes(r.cfg.DiskReserve))
	}
	return errdefs.NoSpace(fmt.Errorf("no room on the host for the sandbox's disk of %s, whose whole size is allocated when it is made (--disk-provisioning thick): it needs %s more of the file system of %s, which has %s free%s; the operator may free space there",
		quantity.Mebibytes(size), quantity.Mebibytes(need), r.cfg.Root, quantity.Mebibytes(free), keeps))
}

func copyExtents(in, out *os.File, size int64) error {
	if err := out.Truncate(size); err != nil {
		return err
	}
	ifd, ofd := int(in.Fd()), int(out.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(ifd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return err
		}
		end, err := unix.Seek(ifd, start, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		roff, woff := start, start
		for roff < end {
			n, err := unix.CopyFileRange(ifd, &roff, ofd, &woff, int(end-roff), 0)
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
		}
		off = end
	}
	return nil
}

// mountDisk attaches img to a free loop device and mounts its ext4 file
// system at dir. The loop device is set to clear itself when the mount goes
// away, so unmounting is the whole of detaching.
func mountDisk(img, dir string) error {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	loop, err := attachLoop(f)
	if err != nil {
		return fmt.Errorf("attach %s to a loop device: %w", img, err)
	}
	// Closing the loop device before the mount holds it would clear it.
	defer loop.Close()
	if err := unix.Mount(loop.Name(), dir, "ext4", unix.MS_NOATIME, "noinit_itable"); err != nil {
		return fmt.Errorf("mount %s at %s: %w", loop.Name(), dir, err)
	}
	return nil
}

// attachLoop binds f to a free loop device with LOOP_CONFIGURE, retrying
// when another process claims the same device first.
func attachLoop(f *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for range 100 {
		n, err := loops.claim(int(ctl.Fd()))
		if err != nil {
			return nil, err
		}
		loop, err := configureLoop(n, f)
		loops.release(n)
		if err == nil || !errors.Is(err, unix.EBUSY) {
			return loop, err
		}
	}
	return nil, fmt.Errorf("no free loop device: %w", unix.EBUSY)
}

func configureLoop(n int, f *os.File) (*os.File, error) {
	loop, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	if err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg); err != nil {
		loop.Close()
		return nil, fmt.Errorf("configure %s: %w", loop.Name(), err)
	}
	return loop, nil
}

// loops hands this process's concurrent attaches distinct loop devices.
// The kernel calls a device free (LOOP_CTL_GET_FREE) until LOOP_CONFIGURE
// on it returns, and since Linux 6.15 that waits for an fsync of the
// backing file while holding the device's lock: attaches started together
// were all offered the same device, queued on its lock to open it, found
// it taken and asked again, one fsync after another (a burst of 100
// creates, docs/PERFORMANCE.md).
var loops = loopClaims{busy: map[int]int{}}

type loopClaims struct {
	mu   sync.Mutex
	busy map[int]int // attaches of this process configuring each device
}

// claim returns the number of a loop device that is not bound and that no
// other attach of this process is configuring, making the device if the
// kernel has none such. Where the kernel makes no more devices (max_loop),
// it returns the kernel's free one, which concurrent attaches may then
// share: LOOP_CONFIGURE lets one have it and fails the others with EBUSY,
// as it does when another process binds a device first.
func (c *loopClaims) claim(ctl int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	free, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return 0, fmt.Errorf("get free loop device: %w", err)
	}
	n := free
	for c.busy[n] > 0 || loopBound(n) {
		n++
	}
	if n != free {
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(ctl), unix.LOOP_CTL_ADD, uintptr(n)); errno != 0 && errno != unix.EEXIST {
			n = free
		}
	}
	c.busy[n]++
	return n, nil
}

func (c *loopClaims) release(n int) {
	c.mu.Lock()
	if c.busy[n]--; c.busy[n] <= 0 {
		delete(c.busy, n)
	}
	c.mu.Unlock()
}

// loopBound reports whether loop device n has a backing file, without
// taking the device's lock (sysfs has its loop/ attributes only then).
func loopBound(n int) bool {
	_, err := os.Stat("/sys/block/loop" + strconv.Itoa(n) + "/loop/backing_file")
	return err == nil
}

// mountRootfs mounts the overlay root file system at dir. layers are lowest
// first; overlayfs wants the top one first.
func mountRootfs(layers []string, disk, dir string) error {
	lower := make([]string, len(layers))
	for i, l := range layers {
		lower[len(layers)-1-i] = l
	}
	opts := "lowerdir=" + strings.Join(lower, ":") +
		",upperdir=" + filepath.Join(disk, diskUpper) +
		",workdir=" + filepath.Join(disk, diskWork)
	if err := unix.Mount("overlay", dir, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", dir, err)
	}
	return nil
}

// isMountpoint reports whether dir is mounted on: a mount has its own
// device, except a bind mount of the same file system, which we never make.
func isMountpoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// unmount unmounts dir, detaching lazily if it is still busy. A dir that is
// not mounted (or does not exist) is not an error.
func unmount(dir string) error {
	err := unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", dir, err)
}

// diskUsage returns the bytes in use on the file system mounted at dir.
func diskUsage(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return (st.Blocks - st.Bfree) * uint64(st.Bsize), nil
}

// canAllocate refuses thick disks (Config.ThickDisks) on a file system
// whose allocated blocks are not written in place: btrfs, zfs and the
// like write every overwrite elsewhere, so room allocated ahead keeps no
// promise. ext4 and xfs do (their unwritten extents), and tmpfs holds
// the pages it allocates.
func canAllocate(root string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return fmt.Errorf("file system of %s: %w", root, err)
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return nil
	}
	return errdefs.Invalid("thick disks (--disk-provisioning thick) need a file system that writes the blocks allocated to a file in place, ext4, xfs or tmpfs: %s is on one of type %#x", root, st.Type)
}
