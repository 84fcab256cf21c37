package kubetest

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveEmptyTree checks what the node's cleanup removes of the host
// directories the kubelet and containerd make: empty directories and dead
// sockets, never a file, never a socket another node listens on.
func TestRemoveEmptyTree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, dir string)
		removed bool
		wantErr bool
	}{
		{"empty directories", func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "a", "b")) }, true, false},
		{"a dead socket", func(t *testing.T, dir string) {
			l := listen(t, filepath.Join(dir, "s", "dead.sock"))
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
		}, true, false},
		{"a live socket", func(t *testing.T, dir string) { listen(t, filepath.Join(dir, "s", "live.sock")) }, false, false},
		{"a file", func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "a"))
			if err := os.WriteFile(filepath.Join(dir, "a", "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tree")
			mkdir(t, dir)
			tc.make(t, dir)
			err := removeEmptyTree(dir)
			if (err != nil) != tc.wantErr {
				t.Errorf("removeEmptyTree: %v, want error %v", err, tc.wantErr)
			}
			if _, statErr := os.Stat(dir); (statErr != nil) != tc.removed {
				t.Errorf("after removeEmptyTree, stat: %v; want removed %v", statErr, tc.removed)
			}
		})
	}
	if err := removeEmptyTree(filepath.Join(t.TempDir(), "missing")); err != nil {
		t.Errorf("removeEmptyTree of a missing directory: %v", err)
	}
}

// TestFreeSubnet checks that the Pods' subnet is private and none of the
// host's addresses is in it.
func TestFreeSubnet(t *testing.T) {
	p, err := freeSubnet()
	if err != nil {
		t.Fatal(err)
	}
	if p.Bits() != 24 || !netip.MustParsePrefix("10.200.0.0/13").Contains(p.Addr()) {
		t.Errorf("subnet %s, want a /24 of 10.200.0.0/13", p)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.(*net.IPNet).IP); ok && p.Contains(ip.Unmap()) {
			t.Errorf("subnet %s holds the host's address %s", p, a)
		}
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func listen(t *testing.T, path string) net.Listener {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
