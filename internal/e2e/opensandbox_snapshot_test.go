package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestOpenSandboxSnapshots drives agent2env's snapshots through the stock
// OpenSandbox Python SDK's snapshot calls (testdata/opensandbox_snapshot.py):
// Sandbox.create_snapshot, SandboxManager.get_snapshot, list_snapshots
// and delete_snapshot, and Sandbox.create(snapshot_id=...), whose sandbox
// has the parent's file and its background loop still counting (memory
// restored by CRIU). A named snapshot and a restore with other resources
// are refused with a 400 naming the field.
func TestOpenSandboxSnapshots(t *testing.T) {
	pythonBin := os.Getenv("AGENT2ENV_PYTHON")
	if pythonBin == "" {
		testenv.Missing(t, "set AGENT2ENV_PYTHON to the python of scripts/test-peers.sh (make test does) to run the OpenSandbox SDK")
	}
	const (
		key   = "a2e_e2e-opensandbox-key-0123456789"
		image = "agent2env/python"
	)
	criu := withCRIU(t)
	d := startDaemon(t, "", criu, func(c *exec.Cmd) {
		c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+key)
	})
	d.key = key
	// The first sandbox of an image waits for the image to be built,
	// longer than the SDK's readiness budget: build it first.
	warm := d.create(api.CreateSandboxRequest{Image: image})
	if code := d.do("DELETE", "/api/v1/sandboxes/"+warm.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete the warm-up sandbox: status %d", code)
	}

	res := openSandboxScript(t, pythonBin, d.addr, key, "opensandbox_snapshot.py", image)
	for k, want := range map[string]string{
		"state": "Ready", "of_sandbox": "true", "get_state": "Ready",
		"listed": "[true]", "listed_total": "1", "failed_total": "0", "named_total": "0",
		"restored_state": "Running", "file": "kept", "counting_on": "true", "count_restored": "true",
		"deleted": "404",
	} {
		if got := fmt.Sprint(res[k]); got != want {
			t.Errorf("%s = %q, want %q (all: %v)", k, got, want, res)
		}
	}
	for k, field := range map[string]string{"named": "name", "other_resources": "resourceLimits.cpu"} {
		if got := fmt.Sprint(res[k]); !strings.HasPrefix(got, "400 ") || !strings.Contains(got, field) {
			t.Errorf("%s = %q, want a 400 naming %s", k, got, field)
		}
	}
	var sbs api.List[api.Sandbox]
	if code := d.do("GET", "/api/v1/sandboxes", nil, &sbs); code != http.StatusOK || len(sbs.Items) != 0 {
		t.Errorf("sandboxes left: status %d, %+v", code, sbs.Items)
	}
	var snaps api.SnapshotList
	if code := d.do("GET", "/api/v1/snapshots", nil, &snaps); code != http.StatusOK || len(snaps.Items) != 0 {
		t.Errorf("snapshots left: status %d, %+v", code, snaps.Items)
	}
}

// openSandboxScript runs the Python script name of testdata with args,
// connected to the daemon at addr with key as the OpenSandbox SDK's README
// says (OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY), and returns the JSON
// object of its last line.
func openSandboxScript(t *testing.T, pythonBin, addr, key, name string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pythonBin, append([]string{"testdata/" + name}, args...)...)
	cmd.Env = append(os.Environ(), "OPEN_SANDBOX_DOMAIN="+addr, "OPEN_SANDBOX_API_KEY="+key)
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res map[string]any
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &res) != nil {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", name, args, err, out, stderr)
	}
	return res
}
