package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// OCI whiteout names (image-spec layer.md) and the overlayfs xattr that
// marks an opaque directory.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
)

// unpacker extracts one layer tar into a directory, converting OCI
// whiteouts to overlayfs ones.
//
// Every path is resolved from the layer directory one component at a time
// with O_NOFOLLOW, so no entry can write outside it: not through an
// absolute name, a ".." component, nor a symlink an earlier entry made.
type unpacker struct {
	dir   string
	root  int  // fd of dir
	owner bool // euid is 0: ownership can be set, whiteouts made
	log   *slog.Logger
	buf   []byte
	size  int64
	// dirs holds directory metadata, applied after all entries because
	// creating entries changes a directory's mtime and a read-only mode
	// would stop an unprivileged unpacker from filling it.
	dirs  map[string]*tar.Header
	order []string
}

// unpack extracts the layer tar read from r into dir, an existing empty
// directory, and returns the number of bytes in regular files. Entries
// that would escape dir fail the whole layer with an ErrInvalidArgument
// error. Device nodes are skipped; the runtime provides /dev.
func unpack(ctx context.Context, r io.Reader, dir string, log *slog.Logger) (int64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open layer dir %s: %w", dir, err)
	}
	defer unix.Close(fd)
	u := &unpacker{
		dir:   dir,
		root:  fd,
		owner: os.Geteuid() == 0,
		log:   log,
		buf:   make([]byte, 256<<10),
		dirs:  make(map[string]*tar.Header),
	}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read layer tar: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return 0, fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
	if err := u.finishDirs(); err != nil {
		return 0, err
	}
	return u.size, nil
}

// cleanName turns a tar entry name into a path relative to the layer
// root, "" for the root itself. It rejects absolute names and ".."
// components instead of cleaning them away: a layer that has them is
// broken or hostile.
func cleanName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", errdefs.Invalid("absolute path %q in layer", n)
	}
	for _, c := range strings.Split(n, "/") {
		if c == ".." {
			return "", errdefs.Invalid("path %q leaves the layer", n)
		}
	}
	c := path.Clean(n)
	if c == "." {
		return "", nil
	}
	return c, nil
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "" {
		if hdr.Typeflag == tar.TypeDir {
			u.noteDir("", hdr)
		}
		return nil
	}
	dirRel, base := path.Split(rel)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(dirRel, base)
	}
	parent, err := u.openDir(dirRel, true)
	if err != nil {
		return err
	}
	defer unix.Close(parent)

	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.mkdir(parent, base, rel, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		return u.writeFile(parent, base, rel, hdr, r)
	case tar.TypeSymlink:
		if err := u.clear(parent, base, rel); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		return u.setMeta(parent, base, -1, hdr)
	case tar.TypeLink:
		return u.hardlink(parent, base, rel, hdr)
	case tar.TypeFifo:
		if err := u.clear(parent, base, rel); err != nil {
			return err
		}
		if err := unix.Mknodat(parent, base, unix.S_IFIFO|uint32(hdr.Mode&0o7777), 0); err != nil {
			return fmt.Errorf("mkfifo: %w", err)
		}
		return u.setMeta(parent, base, -1, hdr)
	default:
		// Device nodes, and tar metadata that is not a file.
		u.log.Debug("skip layer entry", "name", hdr.Name, "type", string(hdr.Typeflag))
		return nil
	}
}

// openDir opens the directory rel (relative to the layer root). With
// create, missing components are made as 0755 directories, as tar
// extraction does for entries whose parents the archive does not list.
// It fails if any component is a symlink or not a directory.
func (u *unpacker) openDir(rel string, create bool) (int, error) {
	fd, err := unix.Dup(u.root)
	if err != nil {
		return -1, fmt.Errorf("dup layer dir: %w", err)
	}
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if create && errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil {
				next, err = unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, errdefs.Invalid("path %q goes through %q, which is not a directory", rel, c)
		}
		if err != nil {
			return -1, fmt.Errorf("open %q: %w", rel, err)
		}
		fd = next
	}
	return fd, nil
}

// clear removes whatever exists at base in parent, so that a later entry
// replaces an earlier one as tar extraction does.
func (u *unpacker) clear(parent int, base, rel string) error {
	var st unix.Stat_t
	err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		// Every component of rel was just opened with O_NOFOLLOW and
		// nothing else writes to an unpack directory, so the path is
		// safe; RemoveAll does not follow symlinks inside it.
		for d := range u.dirs {
			if d == rel || strings.HasPrefix(d, rel+"/") {
				delete(u.dirs, d)
			}
		}
		return os.RemoveAll(filepath.Join(u.dir, rel))
	}
	if err := unix.Unlinkat(parent, base, 0); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 {
		u.size -= st.Size
	}
	return nil
}

func (u *unpacker) mkdir(parent int, base, rel string, hdr *tar.Header) error {
	var st unix.Stat_t
	err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := u.clear(parent, base, rel); err != nil {
			return err
		}
		err = unix.ENOENT
	}
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(parent, base, 0o755); err != nil {
			return fmt.Errorf("mkdir: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open dir: %w", err)
	}
	defer unix.Close(fd)
	if err := u.setXattrs(fd, hdr); err != nil {
		return err
	}
	u.noteDir(rel, hdr)
	return nil
}

func (u *unpacker) noteDir(rel string, hdr *tar.Header) {
	if _, ok := u.dirs[rel]; !ok {
		u.order = append(u.order, rel)
	}
	u.dirs[rel] = hdr
}

func (u *unpacker) writeFile(parent int, base, rel string, hdr *tar.Header, r io.Reader) error {
	if err := u.clear(parent, base, rel); err != nil {
		return err
	}
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, r, u.buf)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	u.size += n
	if err := u.setMeta(parent, base, fd, hdr); err != nil {
		return err
	}
	return f.Close()
}

func (u *unpacker) hardlink(parent int, base, rel string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return err
	}
	if target == "" || target == rel {
		return nil
	}
	tdir, tbase := path.Split(target)
	tparent, err := u.openDir(tdir, false)
	if err != nil {
		return err
	}
	defer unix.Close(tparent)
	if err := u.clear(parent, base, rel); err != nil {
		return err
	}
	// Flags 0: a link to a symlink links the symlink itself.
	if err := unix.Linkat(tparent, tbase, parent, base, 0); err != nil {
		return fmt.Errorf("hardlink to %q: %w", hdr.Linkname, err)
	}
	return nil
}

// whiteout converts an OCI whiteout entry in dirRel to its overlayfs form.
func (u *unpacker) whiteout(dirRel, base string) error {
	parent, err := u.openDir(dirRel, true)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if base == whiteoutOpaque {
		err := unix.Fsetxattr(parent, opaqueXattr, []byte("y"), 0)
		if errors.Is(err, unix.EPERM) {
			return errdefs.Precondition("opaque dir %q: trusted.* xattrs need root: %v", dirRel, err)
		}
		if err != nil {
			return fmt.Errorf("mark %q opaque: %w", dirRel, err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		// Other AUFS metadata has no meaning in a layer.
		return nil
	}
	victim := strings.TrimPrefix(base, whiteoutPrefix)
	if victim == "." || victim == ".." {
		return errdefs.Invalid("bad whiteout %q", base)
	}
	if err := u.clear(parent, victim, path.Join(dirRel, victim)); err != nil {
		return err
	}
	// overlayfs reads a 0:0 character device as "deleted in this layer".
	if err := unix.Mknodat(parent, victim, unix.S_IFCHR, 0); err != nil {
		if errors.Is(err, unix.EPERM) {
			return errdefs.Precondition("whiteout %q: creating overlay whiteouts needs root: %v", path.Join(dirRel, victim), err)
		}
		return fmt.Errorf("whiteout %q: %w", victim, err)
	}
	return nil
}

// setMeta sets ownership, mode, xattrs and times of the non-directory
// base in parent; fd is the open file or -1.
func (u *unpacker) setMeta(parent int, base string, fd int, hdr *tar.Header) error {
	symlink := hdr.Typeflag == tar.TypeSymlink
	if u.owner {
		if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	// chown clears set-id bits, so the mode comes after it. Linux has no
	// symlink modes.
	if !symlink {
		if err := unix.Fchmodat(parent, base, uint32(hdr.Mode&0o7777), 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	if fd >= 0 {
		if err := u.setXattrs(fd, hdr); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(atime(hdr).UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(parent, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

func atime(hdr *tar.Header) time.Time {
	if hdr.AccessTime.IsZero() {
		return hdr.ModTime
	}
	return hdr.AccessTime
}

// setXattrs applies the entry's extended attributes, best effort: a host
// may refuse some namespaces (trusted.* without root, security.* under
// some LSMs). overlay.* attributes are dropped: only whiteout conversion
// may set them, or a layer could forge opaque directories or redirects.
func (u *unpacker) setXattrs(fd int, hdr *tar.Header) error {
	const prefix = "SCHILY.xattr."
	for k, v := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(k, prefix)
		if !ok || strings.HasPrefix(attr, "trusted.overlay.") || strings.HasPrefix(attr, "user.overlay.") {
			continue
		}
		err := unix.Fsetxattr(fd, attr, []byte(v), 0)
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTSUP) {
			u.log.Debug("skip xattr", "name", hdr.Name, "xattr", attr, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("set xattr %s: %w", attr, err)
		}
	}
	return nil
}

// finishDirs applies directory ownership, modes and times, deepest first.
// A directory replaced by a later entry is no longer in u.dirs.
func (u *unpacker) finishDirs() error {
	for i := len(u.order) - 1; i >= 0; i-- {
		rel := u.order[i]
		hdr, ok := u.dirs[rel]
		if !ok {
			continue
		}
		fd, err := u.openDir(rel, false)
		if err != nil {
			return fmt.Errorf("layer dir %q: %w", rel, err)
		}
		err = u.setDirMeta(fd, hdr)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("layer dir %q: %w", rel, err)
		}
	}
	return nil
}

func (u *unpacker) setDirMeta(fd int, hdr *tar.Header) error {
	if u.owner {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	tv := []unix.Timeval{unix.NsecToTimeval(atime(hdr).UnixNano()), unix.NsecToTimeval(hdr.ModTime.UnixNano())}
	if err := unix.Futimes(fd, tv); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}
