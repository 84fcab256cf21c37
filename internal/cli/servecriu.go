package cli

import (
	"cmp"
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

// runtimeAuto is serve's --runtime that picks the OCI runtime binary
// (resolveOCIBinary).
const runtimeAuto = "auto"

// defaultCacheDir is where scripts/criu.sh (make criu) and scripts/crun.sh
// (make crun) cache what they build, as criu-<version>-<key>/criu and
// crun-<version>-<key>/crun, unless --cache-dir says otherwise.
const defaultCacheDir = "/var/cache/agent2env"

// resolveCRIU returns the criu the oci runtime is given for checkpoints
// and restores (the setting oci.criu), from serve's --criu: off, none;
// auto, the newest one make criu cached under cacheDir, else a criu on
// PATH, else none; otherwise the path given. The runtime checks it with
// `criu check` and logs why checkpoints are off when that fails. Without
// one, it logs why here. A criu of the cache is held until release
// (cached).
func resolveCRIU(setting, cacheDir string, log *slog.Logger) (path string, release func()) {
	switch setting {
	case criuOff:
		log.Info("snapshots are off (--criu off)")
		return "", func() {}
	case criuAuto:
		p, release := cached(cacheDir, "criu", log)
		if p == "" {
			p, _ = exec.LookPath("criu")
		}
		if p != "" {
			log.Info("snapshots: the oci runtime checks criu (--criu auto)", "criu", p)
			return p, release
		}
		log.Warn(fmt.Sprintf("snapshots are off: no criu under %s (make criu builds one) nor on PATH", cacheRoot(cacheDir)))
		return "", release
	}
	return setting, func() {}
}

// resolveOCIBinary returns the OCI runtime binary (the setting oci.binary)
// from serve's --runtime: auto, the crun make crun cached under cacheDir
// (the fastest to start a sandbox, with checkpoints), else runc; crun,
// that crun, else crun on PATH; otherwise the name or path given. A crun
// of the cache is held until release (cached).
func resolveOCIBinary(setting, cacheDir string, log *slog.Logger) (bin string, release func()) {
	if setting != runtimeAuto && setting != "crun" {
		return setting, func() {}
	}
	p, release := cached(cacheDir, "crun", log)
	switch {
	case p != "":
		log.Info("sandboxes run with the project's crun (--runtime "+setting+")", "crun", p)
		return p, release
	case setting == runtimeAuto:
		log.Info(fmt.Sprintf("sandboxes run with runc (--runtime auto): no crun under %s; make crun builds one, which starts sandboxes faster", cacheRoot(cacheDir)))
		return "runc", release
	}
	return setting, release
}

// cached returns the newest program name that scripts/<name>.sh cached
// under cacheDir (default $AGENT2ENV_CACHE_DIR, as for those scripts, else
// defaultCacheDir) as <name>-<version>-<key>/<name>,
// or "". It is held (its entry's lock, shared) until release, which the
// caller calls when the daemon stops: a later build of another version
// prunes entries unused for an hour, and this one is in use however long
// the daemon runs.
func cached(cacheDir, name string, log *slog.Logger) (path string, release func()) {
	release = func() {}
	p := newestFile(filepath.Join(cacheRoot(cacheDir), name+"-*", name))
	if p == "" {
		return "", release
	}
	if r, err := buildcache.Hold(filepath.Join(filepath.Dir(p), ".lock")); err != nil {
		log.Warn("cannot mark the cached "+name+" in use; a build of another version may prune it while the daemon runs", "err", err)
	} else {
		release = r
	}
	return p, release
}

// cacheRoot is the cache dir serve's --cache-dir names, else
// $AGENT2ENV_CACHE_DIR, else defaultCacheDir.
func cacheRoot(cacheDir string) string {
	return cmp.Or(cacheDir, os.Getenv("AGENT2ENV_CACHE_DIR"), defaultCacheDir)
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
