package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install copies the running binary to dst (mode 0755), for a runtime that
// cannot put the agent into a sandbox's image itself: the kubernetes
// runtime's init container runs it from the agent2env image, which has no
// shell or cp, into a volume the sandbox's container then runs it from.
// The copy appears under its name only once complete.
func Install(dst string) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("install agent: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".agent2env-*")
	if err != nil {
		return fmt.Errorf("install agent: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install agent to %s: %w", dst, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("install agent to %s: %w", dst, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install agent to %s: %w", dst, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install agent to %s: %w", dst, err)
	}
	return nil
}
