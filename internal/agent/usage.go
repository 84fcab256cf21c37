package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/internal/cgroupfs"
)

// Usage is what a sandbox uses, as its agent measures it from inside: the
// counters of the agent's own cgroup (the container's, which holds every
// process of the sandbox) and the space files take in the directories
// asked for. Runtimes that cannot read a sandbox's cgroup from the host (a
// Pod on another node) ask the agent.
type Usage struct {
	CPUNanos    uint64 `json:"cpu_nanos"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Pids        uint64 `json:"pids"`
	// DiskBytes is the space allocated to the files under the directories
	// of the request, each counted once, mounts below them left out.
	DiskBytes uint64 `json:"disk_bytes"`
}

// maxDiskEntries bounds the walk of a usage request: past it the disk
// figure is what was counted so far, a lower bound.
const maxDiskEntries = 200_000

// diskFresh is how long a disk figure is answered again before the
// directories are walked anew. The walk runs in the sandbox's cgroup, and
// a watcher that polls usage for the CPU time its processes use (a task
// run's liveness) must not see its own polling as work.
const diskFresh = 30 * time.Second

// diskCache is the last disk figure and what it measured.
type diskCache struct {
	mu    sync.Mutex
	dirs  string // the request's directories, NUL-separated
	at    time.Time
	bytes uint64
}

// get returns the space under dirs, walking them when the last figure for
// the same directories is older than diskFresh.
func (c *diskCache) get(dirs []string, walk func() (uint64, error)) (uint64, error) {
	key := strings.Join(dirs, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	if key == c.dirs && time.Since(c.at) < diskFresh {
		return c.bytes, nil
	}
	n, err := walk()
	if err != nil {
		return 0, err
	}
	c.dirs, c.at, c.bytes = key, time.Now(), n
	return n, nil
}

// handleUsage answers GET /v1/usage?disk=DIR&disk=DIR.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	var dirs []string
	for _, d := range r.URL.Query()["disk"] {
		p, err := s.cleanPath(d)
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_PATH", fmt.Errorf("disk: %w", err))
			return
		}
		dirs = append(dirs, p)
	}
	var u Usage
	var err error
	if u.CPUNanos, u.MemoryBytes, u.Pids, err = cgroupfs.SelfUsage(); err != nil {
		writeError(w, http.StatusInternalServerError, "USAGE_UNAVAILABLE", err)
		return
	}
	u.DiskBytes, err = s.disk.get(dirs, func() (n uint64, err error) {
		err = s.asUser(func() (err error) {
			n, err = diskUsage(dirs, maxDiskEntries)
			return err
		})
		return n, err
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "USAGE_UNAVAILABLE", fmt.Errorf("measure disk use: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, u)
}

// diskUsage adds up the blocks allocated to what lies under dirs, staying
// on each dir's filesystem, counting a file with several links once and
// visiting at most limit entries. A dir that does not exist counts 0;
// entries that vanish or cannot be read during the walk are left out.
func diskUsage(dirs []string, limit int) (uint64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total uint64
	n := 0
	errLimit := errors.New("limit reached")
	for _, dir := range dirs {
		var root syscall.Stat_t
		if err := syscall.Lstat(dir, &root); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return 0, err
		}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // vanished or unreadable: not counted
			}
			if n++; n > limit {
				return errLimit
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			if uint64(st.Dev) != uint64(root.Dev) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			key := inode{uint64(st.Dev), st.Ino}
			if seen[key] {
				return nil
			}
			seen[key] = true
			total += uint64(st.Blocks) * 512
			return nil
		})
		if errors.Is(err, errLimit) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}
