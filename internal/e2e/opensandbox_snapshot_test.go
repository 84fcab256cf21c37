package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2e/stocksdk"
)

// TestOpenSandboxSnapshots drives agent2env's snapshots through the stock
// OpenSandbox Python SDK's snapshot calls (testdata/opensandbox_snapshot.py):
// Sandbox.create_snapshot, SandboxManager.get_snapshot, list_snapshots
// and delete_snapshot, and Sandbox.create(snapshot_id=...), whose sandbox
// has the parent's file and its background loop still counting (memory
// restored by CRIU). A named snapshot and a restore with other resources
// are refused with a 400 naming the field.
func TestOpenSandboxSnapshots(t *testing.T) {
	pythonBin := stocksdk.Python(t)
	const (
		key   = stocksdk.OpenSandboxKey
		image = "agent2env/python"
	)
	requireCRIU(t)
	d := startDaemon(t, "", func(c *exec.Cmd) {
		c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+key)
	})
	d.key = key
	// The first sandbox of an image waits for the image to be built,
	// longer than the SDK's readiness budget: build it first.
	warm := d.create(api.CreateSandboxRequest{Image: image})
	if code := d.do("DELETE", "/api/v1/sandboxes/"+warm.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete the warm-up sandbox: status %d", code)
	}

	res := stocksdk.Script(t, append(os.Environ(), "OPEN_SANDBOX_DOMAIN="+d.addr, "OPEN_SANDBOX_API_KEY="+key),
		pythonBin, "testdata/opensandbox_snapshot.py", image)
	stocksdk.Check(t, res, map[string]string{
		"state": "Ready", "of_sandbox": "true", "get_state": "Ready",
		"listed": "[true]", "listed_total": "1", "failed_total": "0", "named_total": "0",
		"restored_state": "Running", "file": "kept", "counting_on": "true", "count_restored": "true",
		"deleted": "404",
	})
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
