package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
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
// one, it logs why here.
func resolveCRIU(setting, cacheDir string, log *slog.Logger) string {
	switch setting {
	case criuOff:
		log.Info("snapshots are off (--criu off)")
		return ""
	case criuAuto:
		if cacheDir == "" {
			cacheDir = defaultCacheDir
		}
		p := newestFile(filepath.Join(cacheDir, "criu-*", "criu"))
		if p == "" {
			p, _ = exec.LookPath("criu")
		}
		if p != "" {
			log.Info("snapshots: the oci runtime checks criu (--criu auto)", "criu", p)
			return p
		}
		log.Warn(fmt.Sprintf("snapshots are off: no criu under %s (make criu builds one) nor on PATH", cacheDir))
		return ""
	}
	return setting
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
