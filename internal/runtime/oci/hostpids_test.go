package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// TestHostPids: CheckHost's arithmetic and its reading of procfs. A host
// at the kernel's default pid_max fits about 1,300 idle sandboxes besides
// its own threads; the lower of pid_max and threads-max bounds; the last
// sandbox that fits leaves the reserve.
func TestHostPids(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pidMax   string
		threads  string
		loadavg  string
		wantRoom int64
		wantErr  string // "" when a sandbox fits; a part of the error otherwise
	}{
		{"kernel default, idle host", "32768\n", "192739\n", "0.10 0.20 0.30 2/300 4242\n", (32768 - 512 - 300) / 24, ""},
		{"kernel default, 1,300 sandboxes", "32768\n", "192739\n", "1.00 1.00 1.00 3/31500 999\n", (32768 - 512 - 31500) / 24, ""},
		{"kernel default, full", "32768\n", "192739\n", "1.00 1.00 1.00 3/32250 999\n", 0, "32250 threads exist, the host allows 32768 (kernel.pid_max 32768"},
		{"systemd's pid_max, threads-max lower", "4194304\n", "100000\n", "0 0 0 1/98500 1\n", 0, "the host allows 100000 (kernel.pid_max 4194304, kernel.threads-max 100000)"},
		{"systemd's pid_max", "4194304\n", "192739\n", "0 0 0 1/50000 1\n", (192739 - 3011 - 50000) / 24, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := fakeProc(t, tc.pidMax, tc.threads, tc.loadavg)
			h, err := readHostPids(proc)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.room(); got != tc.wantRoom {
				t.Errorf("room %d, want %d", got, tc.wantRoom)
			}
			err = h.check()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("check: %v, want room", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, errdefs.ErrResourceExhausted)):
				t.Errorf("check: %v, want ErrResourceExhausted saying %q", err, tc.wantErr)
			}
		})
	}
	for _, loadavg := range []string{"", "0.1 0.2 0.3\n", "0.1 0.2 0.3 12 99\n", "0.1 0.2 0.3 1/x 99\n"} {
		if _, err := readHostPids(fakeProc(t, "32768", "1000", loadavg)); err == nil {
			t.Errorf("loadavg %q read without an error", loadavg)
		}
	}
	if _, err := readHostPids(t.TempDir()); err == nil {
		t.Error("an empty procfs read without an error")
	}
	if _, err := readHostPids("/proc"); err != nil {
		t.Errorf("this host's procfs: %v", err)
	}
}

// fakeProc returns a directory laid out as procfs for readHostPids.
func fakeProc(t *testing.T, pidMax, threadsMax, loadavg string) string {
	t.Helper()
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"sys/kernel/pid_max": pidMax, "sys/kernel/threads-max": threadsMax, "loadavg": loadavg} {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proc
}
