package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2e/stocksdk"
	"github.com/agent2env/agent2env/internal/image"
)

// TestNodeE2B runs the stock E2B SDKs' checks (stocksdk.RunE2B, the same as
// internal/e2e's TestE2BSDK on the oci runtime) against the daemon
// ($AGENT2ENV_BIN serve --runtime kubernetes) on a real node: each
// sandbox a Pod of the built-in images, which the node's containerd pulls
// by their own names from the node's registry (a mirror of docker.io).
// Pause and resume are left out: the kubernetes runtime cannot pause.
// Directories in the home have the setgid bit there (stocksdk.E2B's
// SetgidDirs). The newest Python SDKs run here, every check of theirs;
// the JavaScript SDKs and the oldest supported versions speak the same
// protocol to the same surface, whatever the runtime, and run on oci
// only (TestE2BSDK), which keeps this test within CI's time.
func TestNodeE2B(t *testing.T) {
	pythonBin := stocksdk.Python(t)
	base := serveSDKs(t, stocksdk.E2BKey, stocksdk.E2BImages)
	stocksdk.RunE2B(t, stocksdk.E2B{
		URL: base, Python: pythonBin, SetgidDirs: true,
		NoSandboxes: func(t *testing.T) { noSandboxes(t, base, stocksdk.E2BKey) },
	})
}

// serveSDKs starts a node and the daemon on it (serveKube) accepting the
// API key key, pushes the built-in images (pushBuiltins) and makes a
// sandbox of each of images, so that the node has pulled them before the
// SDKs' request timeouts run; it returns the daemon's base URL.
func serveSDKs(t *testing.T, key string, images []string) string {
	t.Helper()
	n := StartNode(t, NodeOptions{})
	agentImage := n.SelfImage(t)
	n.pushBuiltins(t, images...)
	t.Setenv("AGENT2ENV_API_KEYS", key)
	base := serveKube(t, n, agentImage)
	for _, img := range images {
		var sb api.Sandbox
		if code := keyed(t, key, "POST", base+"/api/v1/sandboxes", api.CreateSandboxRequest{Image: img, CPU: "1", Memory: "1Gi"}, &sb); code/100 != 2 {
			t.Fatalf("create a sandbox of %s: status %d", img, code)
		}
		for deadline := time.Now().Add(10 * time.Minute); sb.Status == api.StatusPending && time.Now().Before(deadline); {
			time.Sleep(time.Second)
			keyed(t, key, "GET", base+"/api/v1/sandboxes/"+sb.ID, nil, &sb)
		}
		if sb.Status != api.StatusRunning {
			t.Fatalf("a sandbox of %s is %s: %s", img, sb.Status, sb.Reason)
		}
		if code := keyed(t, key, "DELETE", base+"/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete the warm-up sandbox: status %d", code)
		}
	}
	return base
}

// noSandboxes fails t when the daemon at base has sandboxes left.
func noSandboxes(t *testing.T, base, key string) {
	t.Helper()
	var list api.List[api.Sandbox]
	if code := keyed(t, key, "GET", base+"/api/v1/sandboxes", nil, &list); code != http.StatusOK || len(list.Items) != 0 {
		t.Errorf("sandboxes left: status %d, %+v", code, list.Items)
	}
}

// keyed sends a REST request with the API key key, body as JSON when
// not nil, decodes a 2xx answer into out when not nil and returns the
// status.
func keyed(t *testing.T, key, method, url string, body, out any) int {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	if out != nil && res.StatusCode/100 == 2 {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, url, err)
		}
	}
	return res.StatusCode
}

// pushBuiltins pushes the built-in images names (agent2env/python, ...:
// image.Store.BuiltinOCI, from the build cache, as the oci runtime's
// daemon builds them) to the node's registry under their own names, and
// makes the registry docker.io's on the node, so that a Pod naming
// an image as the daemon does ("agent2env/python") runs it.
func (n *Node) pushBuiltins(t *testing.T, names ...string) {
	t.Helper()
	store, err := image.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for _, name := range names {
		start := time.Now()
		img, err := store.BuiltinOCI(ctx, name, nil)
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		n.Push(t, name+":latest", img)
		t.Logf("kubetest: pushed %s in %v", name, time.Since(start).Round(time.Millisecond))
	}
	// containerd reads a registry's hosts.toml at each pull. The node's
	// registry is docker.io's only server: an image it lacks fails at
	// once, as on a cluster that reaches docker.io, rather than when a
	// dial to docker.io, out of reach here, times out.
	dir := filepath.Join(n.dir, "registries", "docker.io")
	hosts := fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", n.Registry)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestNodeOpenSandbox runs the stock OpenSandbox clients' checks
// (stocksdk.RunOpenSandbox, the same as internal/e2e's TestOpenSandboxSDK
// on the oci runtime) against the daemon on the kubernetes runtime on a
// real node, as TestNodeE2B does the E2B SDKs'. Pause and resume are left
// out: the kubernetes runtime cannot pause; so is the missing image's
// check, which that runtime does not pass yet (MissingImageGap).
func TestNodeOpenSandbox(t *testing.T) {
	pythonBin := stocksdk.Python(t)
	clients := stocksdk.OpenSandboxStockClients(t)
	base := serveSDKs(t, stocksdk.OpenSandboxKey, stocksdk.OpenSandboxImages)
	stocksdk.RunOpenSandbox(t, stocksdk.OpenSandbox{
		Domain: strings.TrimPrefix(base, "http://"), Python: pythonBin, Clients: clients,
		MissingImageGap: "kubernetes runtime: a create of an image no registry has waits for the Pod " +
			"(ErrImagePull, then ImagePullBackOff) past the SDK's 30 s request timeout and leaves the " +
			"sandbox pending, where the oci runtime answers 4xx at once",
		NoSandboxes: func(t *testing.T) { noSandboxes(t, base, stocksdk.OpenSandboxKey) },
	})
}
