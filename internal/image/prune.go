package image

import (
	"encoding/hex"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/buildcache"
)

// cacheVersion returns the version of a file in the cache dir: the recipe
// or npm part hash its name starts with (hash.tar, hash.tar.lock,
// hash.build, hash.tar.zst, hash.npm.tar, hash.npm.d, ...). Other names
// are not the image builds'.
func cacheVersion(name string) (string, bool) {
	h, _, ok := strings.Cut(name, ".")
	if !ok || len(h) != 64 {
		return "", false
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", false
	}
	return h, true
}

// currentVersions returns the hashes of this version's built-in recipes
// and of their npm parts: their files in the cache dir are current.
func currentVersions() map[string]bool {
	current := map[string]bool{}
	for _, rc := range recipes {
		current[rc.hash()] = true
		if rc.npm != nil {
			current[rc.npm.hash()] = true
		}
	}
	return current
}

// pruneCache removes from the cache dir the files of other versions'
// recipes (layer tars of 0.3 to 1.4 GB, their zstd copies, unpacked npm
// layers, left work dirs) that no one has used for buildcache.Grace: see
// [buildcache.Prune]. [Store.cached] marks what it hands out as used. It
// logs what it cannot remove: the build it follows has succeeded.
func (s *Store) pruneCache() {
	removed, err := buildcache.Prune(s.cacheDir, cacheVersion, currentVersions(), time.Now())
	for _, v := range removed {
		s.log.Info("removed another version's build from the cache", logPath, s.cacheDir, "version", v)
	}
	if err != nil {
		s.log.Warn("prune the build cache", logPath, s.cacheDir, "err", err)
	}
}
