// Package stocksdk is the one definition of "the stock SDKs work against
// agent2env": [RunE2B] drives the stock E2B SDKs (issue 25) and
// [RunOpenSandbox] the stock OpenSandbox clients (issue 23), unchanged,
// by the scripts in internal/e2e/testdata, against a daemon, and checks
// what they print. internal/e2e runs them against the oci runtime,
// internal/runtime/kube/kubetest against the kubernetes runtime on a real
// node.
package stocksdk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/testenv"
)

// testdata is the path of internal/e2e/testdata's file name.
func testdata(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", name)
}

// Script runs bin with args and the environment env (within 4 minutes)
// and returns the JSON object its output's last line holds; anything else
// fails t with the output.
func Script(t *testing.T, env []string, bin string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res map[string]any
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &res) != nil {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", filepath.Base(bin), args, err, out, stderr)
	}
	return res
}

// Check fails for each key of want whose value in res, printed, is not
// want's.
func Check(t *testing.T, res map[string]any, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := fmt.Sprint(res[k]); got != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got, v, res)
		}
	}
}

// Python returns the interpreter with the newest stock Python SDKs,
// AGENT2ENV_PYTHON (make test sets it to scripts/test-peers.sh's); unset,
// it stops t as testenv.Missing does.
func Python(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("AGENT2ENV_PYTHON")
	if bin == "" {
		testenv.Missing(t, "set AGENT2ENV_PYTHON to the python of scripts/test-peers.sh (make test does) to run the stock Python SDKs")
	}
	return bin
}
