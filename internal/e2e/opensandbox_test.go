package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2e/stocksdk"
)

// TestOpenSandboxSDK runs the stock OpenSandbox clients, unchanged
// (stocksdk.RunOpenSandbox, which kubetest's TestNodeSDKs runs on
// the kubernetes runtime), against a daemon on the oci runtime with API
// keys: the Python SDK (PyPI opensandbox, pinned
// in scripts/peers-requirements.txt, as are its code interpreter and MCP
// server) and the JS SDK (npm, installed by scripts/test-peers.sh). The
// Python SDK's README quickstart (Sandbox.create, commands.run, destroy)
// with a failing command and a files.write_file/read_file round trip,
// lifecycle, background commands, files, bash sessions, metrics and
// egress, the code interpreter, the MCP server over stdio, the JS SDK's
// quickstart, then the failures a user meets
// first: a wrong key, an unknown id, an image that does not exist. Each
// must fail at once with the server's {code, message}, and leave no
// sandbox behind (issue 23). Every exchange goes through a proxy that
// checks OpenSandbox's wire rules (wireRecorder).
//
// The interpreter is AGENT2ENV_PYTHON, the one scripts/test-peers.sh makes
// for this run (make test sets it): not clients.env's, which the last run
// of the script on the machine names, whatever its requirements were.
func TestOpenSandboxSDK(t *testing.T) {
	pythonBin := stocksdk.Python(t)
	const key = stocksdk.OpenSandboxKey
	// The clients reach the daemon through a proxy that checks the wire
	// rules on every exchange ("wire rules" below): the daemon's public
	// URL, which its endpoints lead to.
	wire := newWireRecorder(t)
	d := startDaemon(t, "", func(c *exec.Cmd) {
		c.Args = append(c.Args, "--public-url", "http://"+wire.addr)
		c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+key)
	})
	d.key = key
	wire.start(d.addr)
	// The first sandbox of an image waits for the image to be built, longer
	// than the SDK's 30 s readiness budget: build it first.
	for _, img := range stocksdk.OpenSandboxImages {
		warm := d.create(api.CreateSandboxRequest{Image: img, CPU: "1", Memory: "512Mi"})
		if code := d.do("DELETE", "/api/v1/sandboxes/"+warm.ID, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete the warm-up sandbox: status %d", code)
		}
	}

	stocksdk.RunOpenSandbox(t, stocksdk.OpenSandbox{
		Domain: wire.addr, Python: pythonBin, Clients: stocksdk.OpenSandboxStockClients(t), Pause: true,
		NoSandboxes: func(t *testing.T) {
			t.Helper()
			var list api.List[api.Sandbox]
			if code := d.do("GET", "/api/v1/sandboxes", nil, &list); code != http.StatusOK || len(list.Items) != 0 {
				t.Errorf("sandboxes left: status %d, %+v", code, list.Items)
			}
		},
	})
	t.Run("wire rules", func(t *testing.T) { wire.assert(t) })
	d.assertNoLeaks()
}
