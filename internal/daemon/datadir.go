package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// dataDirLock is the file whose lock a daemon holds on its data dir.
const dataDirLock = "daemon.lock"

// lockDataDir takes the lock of data dir dir, which the daemon holds while
// it runs, and writes in it its pid and listen address: a data dir is one
// daemon's (its store, if SQLite, its sandboxes' disks and bundles, its
// archive), so a second daemon on it is refused, told which one has it.
// The lock is flock(2)'s: the kernel lets go of it when the process ends,
// however it ends. Closing the file returned lets go of it sooner.
func lockDataDir(dir, listen string) (*os.File, error) {
	path := filepath.Join(dir, dataDirLock)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another agent2env daemon (%s): stop it, or give this one a --data-dir of its own",
				dir, describeHolder(string(holder)))
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = fmt.Fprintf(f, "pid %d listen %s\n", os.Getpid(), listen)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data dir: record the daemon in %s: %w", path, err)
	}
	return f, nil
}

// describeHolder says who holds a data dir's lock from what it wrote in
// the lock file ("pid N listen ADDR").
func describeHolder(s string) string {
	var pid int
	var listen string
	if n, _ := fmt.Sscanf(strings.TrimSpace(s), "pid %d listen %s", &pid, &listen); n == 2 {
		return fmt.Sprintf("pid %d, listening on %s", pid, listen)
	}
	return "one that is still starting"
}
