package memexec

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// New's file holds exactly what it was given, sealed with Seals, at or
// above minFD, close-on-exec; and a child runs it through Path.
func TestNew(t *testing.T) {
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("no true(1) to copy: %v", err)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, minFD := range []int{3, 40} {
		f, err := New("true", bytes.NewReader(want), minFD)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if int(f.Fd()) < minFD {
			t.Errorf("fd %d, want ≥ %d", f.Fd(), minFD)
		}
		if seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || seals != Seals {
			t.Errorf("seals %#x, %v; want %#x", seals, err, Seals)
		}
		if flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("fd flags %#x, %v; want close-on-exec", flags, err)
		}
		got, err := os.ReadFile(Path(f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("content of %s: %d bytes, %v; want the %d of %s", Path(f), len(got), err, len(want), bin)
		}
		if _, err := f.Write([]byte("x")); err == nil {
			t.Error("write to the sealed file succeeded")
		}
		if out, err := exec.Command(Path(f)).CombinedOutput(); err != nil {
			t.Errorf("exec %s: %v: %s", Path(f), err, strings.TrimSpace(string(out)))
		}
	}
}
