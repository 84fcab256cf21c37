package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agent2env/agent2env/internal/buildcache"
)

// The values of serve's --criu besides a path.
const (
	criuAuto = "auto"
	criuOff  = "off"
)

// defaultCacheDir is where scripts/criu.sh (make criu) caches the CRIU it
// builds, as criu-<version>-<key>/criu, unless --cache-dir says otherwise.
const defaultCacheDir = "/var/cache/agent2env"

// resolveCRIU returns the criu the oci runtime is given for checkpoints
// and restores (the setting oci.criu), from serve's --criu: off, none;
// auto, the newest one make criu cached under cacheDir, else a criu on
// PATH, else none; otherwise the path given. The runtime checks it with
// `criu check` and logs why checkpoints are off when that fails. Without
// one, it logs why here. A criu of the cache is held (its entry's lock,
// shared) until release, which the caller calls when the daemon stops: a
// later make criu of another version prunes entries unused for an hour,
// and this one is in use however long the daemon runs.
func resolveCRIU(setting, cacheDir string, log *slog.Logger) (path string, release func()) {
	release = func() {}
	switch setting {
	case criuOff:
		log.Info("snapshots are off (--criu off)")
		return "", release
	case criuAuto:
		if cacheDir == "" {
			cacheDir = defaultCacheDir
		}
		p := newestFile(filepath.Join(cacheDir, "criu-*", "criu"))
		if p != "" {
			if r, err := buildcache.Hold(filepath.Join(filepath.Dir(p), ".lock")); err != nil {
				log.Warn("snapshots: cannot mark the cached criu in use; a make criu of another version may prune it while the daemon runs", "err", err)
			} else {
				release = r
			}
		} else {
			p, _ = exec.LookPath("criu")
		}
		if p != "" {
			log.Info("snapshots: the oci runtime checks criu (--criu auto)", "criu", p)
			return p, release
		}
		log.Warn(fmt.Sprintf("snapshots are off: no criu under %s (make criu builds one) nor on PATH", cacheDir))
		return "", release
	}
	return setting, release
}

// newestFile returns the most recently modified file matching pattern, or
// "".
func newestFile(pattern string) string {
	matches, _ := filepath.Glob(pattern)
	var (
		best string
		at   int64
	)
	for _, m := range matches {
		fi, err := os.Stat(m)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if t := fi.ModTime().UnixNano(); best == "" || t > at {
			best, at = m, t
		}
	}
	return best
}
