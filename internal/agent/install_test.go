package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestInstall(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "agent2env")
	if err := Install(dst); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, self) {
		t.Errorf("installed %d bytes, not the running binary's %d", len(got), len(self))
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed file: %v, %v; want mode 0755", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("install left %d files, want 1", len(entries))
	}
}
