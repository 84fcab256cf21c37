// Package buildcache prunes agent2env's build cache (--cache-dir,
// /var/cache/agent2env): what the code that makes a cache entry calls,
// once it has made the current version's, to remove other versions'
// entries that no one is using. Entries are keyed by version (a hash of
// their recipe, or version numbers), so every change of a recipe leaves
// the old entry behind, and nothing else ever removes it; several
// checkouts of the project on one machine share the cache, each with its
// own versions, so "not this version's" is not "unused".
//
// The rule, which scripts/cache-prune.sh applies to the shell scripts'
// entries too: a version other than the current ones goes, all its files
// with it, unless one of its locks is held (it is being made or used) or
// one of its files was modified since [Grace] ago (the code that uses an
// entry touches it: [MarkUsed]). Symbolic links are never followed, and
// nothing with a mount below it is removed.
package buildcache

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Grace is how long an entry of another version is kept after it was last
// used: another checkout on the machine may be using it.
const Grace = time.Hour

// lockSuffix ends the name of a lock file: held (flock) while its entry
// is made.
const lockSuffix = ".lock"

// Prune removes from dir (not below it) the files of each version that
// versionOf gives a name of, other than the current ones, unless the
// version is in use: one of its locks (its files named *.lock) is held
// by anyone, or one of its other files was modified after now-Grace. A
// version's locks are removed last, while held, so that a process
// waiting on one makes the entry anew. versionOf returns ok false for
// names that are no entry's: they stay. Prune returns the versions it
// removed; a missing dir has none.
func Prune(dir string, versionOf func(name string) (version string, ok bool), current map[string]bool, now time.Time) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("prune build cache %s: %w", dir, err)
	}
	stale := map[string][]string{} // version → its files
	for _, e := range entries {
		if v, ok := versionOf(e.Name()); ok && !current[v] {
			stale[v] = append(stale[v], e.Name())
		}
	}
	var removed []string
	var errs []error
	for _, v := range slices.Sorted(maps.Keys(stale)) {
		ok, err := removeVersion(dir, stale[v], now)
		if err != nil {
			errs = append(errs, fmt.Errorf("prune %s from build cache %s: %w", v, dir, err))
		}
		if ok {
			removed = append(removed, v)
		}
	}
	return removed, errors.Join(errs...)
}

// removeVersion removes files, one version's in dir, unless it is in use.
// It reports whether it removed them all.
func removeVersion(dir string, files []string, now time.Time) (bool, error) {
	var locks, rest []string
	for _, f := range files {
		if strings.HasSuffix(f, lockSuffix) {
			locks = append(locks, f)
		} else {
			rest = append(rest, f)
		}
	}
	for _, l := range locks {
		held, err := tryLock(filepath.Join(dir, l))
		if err != nil || held == nil {
			return false, err
		}
		defer held.Close()
	}
	for _, f := range rest {
		path := filepath.Join(dir, f)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if fi.ModTime().After(now.Add(-Grace)) {
			return false, nil
		}
		if fi.IsDir() {
			m, err := MountsUnder(path)
			if err == nil {
				var self bool
				if self, err = mountinfo.Mounted(path); self {
					m = append(m, path)
				}
			}
			if err != nil || len(m) > 0 {
				return false, errors.Join(err, mountedError(path, m))
			}
		}
	}
	var errs []error
	for _, f := range append(rest, locks...) {
		// RemoveAll removes a symbolic link, not what it points to, and
		// never descends through one.
		if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
			errs = append(errs, err)
		}
	}
	return len(errs) == 0, errors.Join(errs...)
}

// tryLock returns the lock file path locked, or nil if another process
// holds it (or it is not a regular file: a symbolic link is not
// followed, and stands for a lock held; or it is gone: another process
// is pruning).
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// MountsUnder returns the mount points below dir (not dir itself) in
// this mount namespace.
func MountsUnder(dir string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return !strings.HasPrefix(m.Mountpoint, dir+"/"), false
	})
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	points := make([]string, len(mounts))
	for i, m := range mounts {
		points[i] = m.Mountpoint
	}
	return points, nil
}

func mountedError(path string, mounts []string) error {
	if len(mounts) == 0 {
		return nil
	}
	return fmt.Errorf("%s has mounts (%s): not removing it", path, strings.Join(mounts, ", "))
}

// MarkUsed sets the modification time of path, an entry in the cache, to
// now, for Prune to keep it for Grace. A symbolic link is not followed.
func MarkUsed(path string) error {
	now := unix.NsecToTimespec(time.Now().UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
}

// Hold takes a shared lock on lock, the lock file of a cache entry, for as
// long as a process uses the entry (a daemon running the CRIU the cache
// holds): neither Prune nor scripts/cache-prune.sh removes an entry whose
// lock is held, however long ago it was last marked used. release lets it
// go. A symbolic link is not followed. It fails when the lock is held
// exclusively (the entry is being made or pruned) or cannot be opened.
func Hold(lock string) (release func(), err error) {
	f, err := os.OpenFile(lock, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("hold %s: %w", lock, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("hold %s: %w", lock, err)
	}
	return func() { f.Close() }, nil
}
