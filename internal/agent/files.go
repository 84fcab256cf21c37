package agent

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
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
// on: a regular file is read from there, anything else is read and
// skipped to it. An offset past the end sends nothing.
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
		f, err = os.Open(p)
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
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, "INVALID_PATH", fmt.Errorf("%s is a directory", p))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if fi.Mode().IsRegular() {
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
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return fmt.Errorf("%s is a directory: %w", p, unix.EISDIR)
		}
		tmp, err = os.CreateTemp(filepath.Dir(p), ".upload-*")
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
		writeFSError(w, fmt.Errorf("write %s: %w", p, err))
		return
	}
	s.writeStat(w, p, http.StatusCreated)
}

func (s *Server) handleStat(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.pathParam(w, r, "path"); ok {
		s.writeStat(w, p, http.StatusOK)
	}
}

func (s *Server) writeStat(w http.ResponseWriter, p string, status int) {
	var fi FileInfo
	err := s.asUser(func() (err error) {
		fi, err = stat(p)
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
			fi, err := stat(filepath.Join(p, e.Name()))
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
	if err := s.asUser(func() error { return os.Rename(from, to) }); err != nil {
		writeFSError(w, err)
		return
	}
	s.writeStat(w, to, http.StatusOK)
}

func stat(p string) (FileInfo, error) {
	fi, err := os.Lstat(p)
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
