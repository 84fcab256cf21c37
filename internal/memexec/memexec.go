// Package memexec makes executables that live in memory only: a sealed
// memfd, which nobody can write once sealed, executed through
// /proc/self/fd/N by the process that holds it and by its children, which
// see it until their own exec closes it (Path), or through /proc/PID/fd/N
// by processes that may read the holder's descriptors (PIDPath).
package memexec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Seals are the seals of every executable New makes: no write, no resize,
// no change of seals. runc and crun check for exactly these (F_GET_SEALS)
// to learn that they run from a copy no container can overwrite, their
// defence against CVE-2019-5736, and then skip making a copy of their own.
const Seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// New copies what r yields into a new memfd named name, seals it (Seals),
// and returns it moved to the lowest free descriptor at or above minFD,
// close-on-exec. Between its fork and its exec, Go's child puts its n
// files at 0 to n-1 and moves its own pipe, and each file below its place,
// to just above the highest of its files (or n), over whatever is there:
// for the child still to have the file when it execs Path, choose minFD
// above n, and see that the highest of the child's files is above the
// file's descriptor or far enough below it. The caller keeps the file open
// for as long as it execs it.
func New(name string, r io.Reader, minFD int) (*os.File, error) {
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // before Linux 6.3, which has no MFD_EXEC
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err != nil {
		return nil, fmt.Errorf("create memfd for %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return nil, fmt.Errorf("write %s into its memfd: %w", name, err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, Seals); err != nil {
		return nil, fmt.Errorf("seal %s: %w", name, err)
	}
	moved, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, minFD)
	if err != nil {
		return nil, fmt.Errorf("move the memfd of %s: %w", name, err)
	}
	return os.NewFile(uintptr(moved), name), nil
}

// Path returns the path that executes f: /proc/self/fd/N, which resolves
// in the process and in its children until their exec, unless what a
// child renumbers lands on N (see New).
func Path(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}

// PIDPath returns the path that executes f from any process that may read
// this process's descriptors (its own user's and root's): /proc/PID/fd/N.
// Unlike Path, it does not depend on the descriptors of the process that
// executes it, which a child renumbers before its exec.
func PIDPath(f *os.File) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
}
