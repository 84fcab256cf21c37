package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// asUser runs fn with the file-system identity of the sandbox user, so that
// file operations through the API are allowed exactly when the user's own
// code would be allowed them, and what they create belongs to the user.
// setfsuid is per thread: fn runs on this goroutine's locked thread. Going
// from fsuid 0 to another clears the file capabilities from the effective
// set; going back restores them.
func (s *Server) asUser(fn func() error) error {
	if s.uid < 0 {
		return fn()
	}
	runtime.LockOSThread()
	_, _ = unix.SetfsgidRetGid(s.gid)
	_, _ = unix.SetfsuidRetUid(s.uid)
	err := fn()
	_, _ = unix.SetfsuidRetUid(0)
	_, _ = unix.SetfsgidRetGid(0)
	// setfsuid returns the previous value: if this thread is still not
	// root, leave it locked so that it dies with the goroutine.
	if prev, _ := unix.SetfsuidRetUid(0); prev == 0 {
		runtime.UnlockOSThread()
	}
	return err
}

// cleanPath resolves p against the working directory and rejects what is
// not a plain path.
func (s *Server) cleanPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains NUL")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.cwd, p)
	}
	return filepath.Clean(p), nil
}

func (s *Server) pathParam(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	p, err := s.cleanPath(r.URL.Query().Get(name))
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_PATH", fmt.Errorf("%s: %w", name, err))
		return "", false
	}
	return p, true
}

// HeaderFileOffset confirms the offset a download starts at: an agent that
// does not send it (one older than ranged downloads) sent the file from
// its start.
const HeaderFileOffset = "X-File-Offset"

// handleDownload sends the file at path, from byte offset (0 when absent)
// on: a regular file is read from there, anything else (a pipe, a file of
// /proc or /sys) is read and skipped to it. An offset past the end sends
// nothing.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pathParam(w, r, "path")
	if !ok {
		return
	}
	var offset int64
	if o := r.URL.Query().Get("offset"); o != "" {
		n, err := strconv.ParseInt(o, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Errorf("offset %q is not a byte offset", o))
			return
		}
		offset = n
	}
	var f *os.File
	err := s.asUser(func() (err error) {
		// Without blocking, so that a named pipe no one writes to is
		// refused below rather than holding the request (and a thread)
		// until someone does.
		f, err = os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		return err
	})
	if err != nil {
		writeFSError(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeFSError(w, err)
		return
	}
	switch {
	case fi.IsDir():
		writeError(w, http.StatusBadRequest, "INVALID_PATH", fmt.Errorf("%s is a directory", p))
		return
	case fi.Mode()&os.ModeNamedPipe != 0:
		writeError(w, http.StatusBadRequest, "INVALID_PATH", fmt.Errorf("%s is a named pipe", p))
		return
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		writeFSError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if fi.Mode().IsRegular() && sizeKnown(f) {
		offset = min(offset, fi.Size())
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			writeFSError(w, err)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size()-offset, 10))
	} else if _, err := io.CopyN(io.Discard, f, offset); err != nil && !errors.Is(err, io.EOF) {
		writeFSError(w, err)
		return
	}
	w.Header().Set("X-File-Mode", strconv.FormatUint(uint64(fi.Mode().Perm()), 8))
	w.Header().Set(HeaderFileOffset, strconv.FormatInt(offset, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// pseudoFS are the file systems whose files report a size that is not
// their content's: 0 in /proc, a page in /sys, whatever the kernel's
// other interfaces make up. Their files are sent as they read.
var pseudoFS = []int64{
	unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC,
	unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC,
	unix.BPF_FS_MAGIC, unix.PSTOREFS_MAGIC, unix.EFIVARFS_MAGIC,
}

// sizeKnown reports whether f's size, as stat gives it, is its length:
// not so for a file of a pseudo file system (pseudoFS).
func sizeKnown(f *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	return !slices.Contains(pseudoFS, int64(st.Type))
}

// handleUpload streams the body into a temporary file beside the target and
// renames it into place, so a failed upload never leaves a partial file.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pathParam(w, r, "path")
	if !ok {
		return
	}
	mode := os.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o777 {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("mode %q is not an octal permission", m))
			return
		}
		mode = os.FileMode(v)
	}
	var tmp *os.File
	err := s.asUser(func() (err error) {
		if err = os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp, err = createUploadTemp(p)
		return err
	})
	if err != nil {
		writeFSError(w, err)
		return
	}
	_, err = io.Copy(tmp, r.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.asUser(func() error {
			if err := os.Chmod(tmp.Name(), mode); err != nil {
				return err
			}
			return os.Rename(tmp.Name(), p)
		})
	}
	if err != nil {
		_ = s.asUser(func() error { return os.Remove(tmp.Name()) })
		writeFSError(w, fmt.Errorf("write %s: %w", p, withoutTemp(err, tmp.Name())))
		return
	}
	s.writeStat(w, p, http.StatusCreated)
}

// withoutTemp returns err, an upload's, without the name of its temporary
// file tmp (the agent's own: "write …/.upload-123: no space left on
// device"), which the client did not ask for and cannot find.
func withoutTemp(err error, tmp string) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe) && pe.Path == tmp:
		return pe.Err
	case errors.As(err, &le) && le.Old == tmp:
		return le.Err
	}
	return err
}

// handleStat describes path; with follow=1, what a final symbolic link
// leads to (the kernel's walk: ELOOP past its limit).
func (s *Server) handleStat(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.pathParam(w, r, "path"); ok {
		follow, _ := strconv.ParseBool(r.URL.Query().Get("follow"))
		s.writeStatOf(w, p, http.StatusOK, follow)
	}
}

func (s *Server) writeStat(w http.ResponseWriter, p string, status int) {
	s.writeStatOf(w, p, status, false)
}

func (s *Server) writeStatOf(w http.ResponseWriter, p string, status int, follow bool) {
	var fi FileInfo
	err := s.asUser(func() (err error) {
		fi, err = stat(p, follow)
		return err
	})
	if err != nil {
		writeFSError(w, err)
		return
	}
	writeJSON(w, status, fi)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pathParam(w, r, "path")
	if !ok {
		return
	}
	var out []FileInfo
	err := s.asUser(func() error {
		ents, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		out = make([]FileInfo, 0, len(ents))
		for _, e := range ents {
			fi, err := stat(filepath.Join(p, e.Name()), false)
			if err != nil {
				continue // removed while listing
			}
			out = append(out, fi)
		}
		return nil
	})
	if err != nil {
		writeFSError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pathParam(w, r, "path")
	if !ok {
		return
	}
	parents := r.URL.Query().Get("parents") == "true"
	err := s.asUser(func() error {
		if parents {
			return os.MkdirAll(p, 0o755)
		}
		return os.Mkdir(p, 0o755)
	})
	if err != nil {
		writeFSError(w, err)
		return
	}
	s.writeStat(w, p, http.StatusCreated)
}

func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pathParam(w, r, "path")
	if !ok {
		return
	}
	if p == "/" {
		writeError(w, http.StatusBadRequest, "INVALID_PATH", errors.New("refusing to remove /"))
		return
	}
	recursive := r.URL.Query().Get("recursive") == "true"
	err := s.asUser(func() error {
		if _, err := os.Lstat(p); err != nil {
			return err
		}
		if recursive {
			return os.RemoveAll(p)
		}
		return os.Remove(p)
	})
	if err != nil {
		writeFSError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleMove(w http.ResponseWriter, r *http.Request) {
	from, ok := s.pathParam(w, r, "from")
	if !ok {
		return
	}
	to, ok := s.pathParam(w, r, "to")
	if !ok {
		return
	}
	err := s.asUser(func() error {
		err := os.Rename(from, to)
		if errors.Is(err, syscall.EXDEV) {
			err = moveAcross(from, to)
		}
		return err
	})
	if err != nil {
		writeFSError(w, err)
		return
	}
	s.writeStat(w, to, http.StatusOK)
}

// moveAcross moves from to to when they are on different mounts (a
// sandbox's /tmp and /workspace are two), where rename(2) cannot, as
// mv(1) does: it copies from into a directory beside to, renames the copy
// into place (so to appears whole, or not at all, and replaces what
// rename would) and then removes from. Regular files, directories and
// symbolic links are copied with their permissions and times.
func moveAcross(from, to string) error {
	if _, err := os.Lstat(from); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(to), ".agent2env-move-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, filepath.Base(to))
	if err := copyTree(from, staged); err != nil {
		return err
	}
	if err := os.Rename(staged, to); err != nil {
		return err
	}
	return os.RemoveAll(from)
}

// copyTree copies the file, link or directory tree at from to to, which
// does not exist.
func copyTree(from, to string) error {
	var dirs []string // made writable while filled, given their own modes after
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		dst := to
		if p != from {
			dst = filepath.Join(to, p[len(from)+1:])
		}
		switch t := fi.Mode().Type(); {
		case t == fs.ModeDir:
			dirs = append(dirs, p, dst)
			return os.Mkdir(dst, 0o700)
		case t == fs.ModeSymlink:
			target, err := os.Readlink(p)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			return err
		case t == 0:
			return copyFile(p, dst, fi)
		}
		return &fs.PathError{Op: "move", Path: p, Err: fmt.Errorf("%s is not a file, directory or link: %w", fi.Mode().Type(), syscall.EXDEV)}
	})
	for i := len(dirs) - 2; err == nil && i >= 0; i -= 2 {
		var fi fs.FileInfo
		if fi, err = os.Lstat(dirs[i]); err == nil {
			err = errors.Join(os.Chmod(dirs[i+1], fi.Mode().Perm()), os.Chtimes(dirs[i+1], fi.ModTime(), fi.ModTime()))
		}
	}
	return err
}

// copyFile copies the regular file from, whose FileInfo fi is, to the
// new file to.
func copyFile(from, to string, fi fs.FileInfo) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(to, fi.ModTime(), fi.ModTime())
	}
	return err
}

// stat describes p, or with follow what a final symbolic link leads to.
func stat(p string, follow bool) (FileInfo, error) {
	lstat := os.Lstat
	if follow {
		lstat = os.Stat
	}
	fi, err := lstat(p)
	if err != nil {
		return FileInfo{}, err
	}
	info := FileInfo{
		Name: fi.Name(), Path: p, Size: fi.Size(), Mode: fi.Mode(),
		ModTime: fi.ModTime().UTC(), IsDir: fi.IsDir(),
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		info.Link, _ = os.Readlink(p)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.UID, info.GID = int(st.Uid), int(st.Gid)
	}
	return info, nil
}

// createUploadTemp makes the temporary file that an upload to p is written
// to, beside p, and renamed to p once whole. Its errors name p, what the
// client asked for, never the temporary file.
func createUploadTemp(p string) (*os.File, error) {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return nil, &fs.PathError{Op: "write", Path: p, Err: syscall.EISDIR}
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".upload-*")
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return nil, &fs.PathError{Op: "write", Path: p, Err: pe.Err}
	}
	return f, err
}
