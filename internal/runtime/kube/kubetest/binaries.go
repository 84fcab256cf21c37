package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/testenv"
)

// TierA are the binaries a [Cluster] runs; kubectl is for tests that drive
// the cluster the way an operator would.
var TierA = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"}

// BinEnv, when set, names the directory holding the binaries, instead of
// the one scripts/kube-binaries.sh builds into.
const BinEnv = "AGENT2ENV_KUBE_BIN"

// buildCommand is what a developer runs to build the binaries.
const buildCommand = "make kube-binaries"

// Binaries returns the directory holding the binaries named (TierA when
// none are). When one is missing it stops the test with how to build
// them: a skip, or under CI a failure (testenv.Missing).
func Binaries(t testing.TB, names ...string) string {
	t.Helper()
	if len(names) == 0 {
		names = TierA
	}
	dir, err := binDir()
	if err == nil {
		var missing []string
		for _, n := range names {
			if fi, statErr := os.Stat(filepath.Join(dir, n)); statErr != nil || fi.Mode()&0o111 == 0 {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return dir
		}
		err = fmt.Errorf("%s missing in %s (a background build logs to %s)", strings.Join(missing, ", "), dir,
			filepath.Join(filepath.Dir(dir), "build.log"))
	}
	testenv.Missing(t, "kubernetes binaries: %v: build them with %q (from the Go module proxy; tens of minutes cold), as make test does", err, buildCommand)
	return ""
}

// binDir is $AGENT2ENV_KUBE_BIN, or the cache directory the build script
// of this checkout names.
func binDir() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "kube-binaries.sh"), "--dir")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate the binaries: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// repoRoot is the nearest directory above the working directory whose
// go.mod is agent2env's.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/agent2env/agent2env\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no agent2env checkout above the working directory: set " + BinEnv)
		}
		dir = parent
	}
}
