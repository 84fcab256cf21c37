package oci

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// fileNetns, in a sandbox dir of a runtime with CRIU, is the bind mount
// that keeps the sandbox's network namespace, made by the daemon rather
// than by runc (see checkpoint.go).
const fileNetns = "netns"

// makeNetns makes a network namespace with loopback up and keeps it at
// path, a new file bind-mounted from the namespace.
func makeNetns(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600)
	if err != nil {
		return fmt.Errorf("make netns: %w", err)
	}
	f.Close()
	err = onNewThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := loopbackUp(); err != nil {
			return err
		}
		return unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
	})
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("make netns: %w", err)
	}
	return nil
}

// keepNetns makes the namespace kept at path again when the file is there
// but the bind mount is not (after a reboot). Without the file it does
// nothing: the sandbox's namespace is runc's.
func keepNetns(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if st.Type == unix.NSFS_MAGIC {
		return nil
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return makeNetns(path)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// removeNetns unmounts and removes the namespace file at path, if any.
func removeNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// listenIn makes a listening unix socket at sock from within the network
// namespace kept at netns: CRIU dumps only sockets of the namespaces it
// dumps, so the agent's listener must belong to the sandbox's.
func listenIn(netns, sock string) (*os.File, error) {
	ns, err := os.Open(netns)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	var lf *os.File
	err = onNewThread(func() error {
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			return err
		}
		l.SetUnlinkOnClose(false)
		lf, err = l.File()
		l.Close()
		return err
	})
	return lf, err
}

// onNewThread runs f on an OS thread locked for it, then moves the thread
// back to the network namespace it had. Should that fail, the thread stays
// locked and Go ends it with the goroutine, so that no other goroutine
// runs in the namespace f moved it to. (Letting every such thread end is
// not enough: Go never ends the main thread, but wedges it, and /proc/self
// is the main thread's.)
func onNewThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		err = f()
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("back to the daemon's network namespace: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// loopbackUp brings up lo in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}
