package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2e/stocksdk"
	"github.com/agent2env/agent2env/internal/image"
)

// TestNodeSDKs runs the stock SDKs' checks against the daemon
// ($AGENT2ENV_BIN serve --runtime kubernetes) on a real node, the E2B
// SDKs' (E2B) and the OpenSandbox clients' (OpenSandbox), as internal/e2e's
// TestE2BSDK and TestOpenSandboxSDK do on the oci runtime. Both run on one
// node and one daemon accepting both SDKs' keys: the node's start, the
// built-in images' push and their first pull are made once (serveSDKs).
// Each sandbox is a Pod of the built-in images, which the node's
// containerd pulls by their own names from the node's registry (a mirror
// of docker.io). Pause and resume are left out: the kubernetes runtime
// cannot pause.
func TestNodeSDKs(t *testing.T) {
	pythonBin := stocksdk.Python(t)
	clients := stocksdk.OpenSandboxStockClients(t)
	images := slices.Clone(stocksdk.E2BImages)
	for _, img := range stocksdk.OpenSandboxImages {
		if !slices.Contains(images, img) {
			images = append(images, img)
		}
	}
	base := serveSDKs(t, []string{stocksdk.E2BKey, stocksdk.OpenSandboxKey}, images)
	// Directories in the home have the setgid bit there (stocksdk.E2B's
	// SetgidDirs). The newest Python SDKs run here, every check of
	// theirs; the JavaScript SDKs and the oldest supported versions speak
	// the same protocol to the same surface, whatever the runtime, and run
	// on oci only (TestE2BSDK), which keeps this test within CI's time.
	t.Run("E2B", func(t *testing.T) {
		// Snapshots as the runtime's capabilities say: without them,
		// E2B's create_snapshot is checked to be refused, saying why.
		var caps api.Capabilities
		if code := keyed(t, stocksdk.E2BKey, "GET", base+"/api/v1/capabilities", nil, &caps); code != http.StatusOK {
			t.Fatalf("capabilities: status %d", code)
		}
		stocksdk.RunE2B(t, stocksdk.E2B{
			URL: base, Python: pythonBin, SetgidDirs: true, Snapshots: caps.Snapshots,
			NoSandboxes: func(t *testing.T) { noSandboxes(t, base, stocksdk.E2BKey) },
		})
	})
	t.Run("OpenSandbox", func(t *testing.T) {
		stocksdk.RunOpenSandbox(t, stocksdk.OpenSandbox{
			Domain: strings.TrimPrefix(base, "http://"), Python: pythonBin, Clients: clients,
			NoSandboxes: func(t *testing.T) { noSandboxes(t, base, stocksdk.OpenSandboxKey) },
		})
	})
}

// serveSDKs starts a node and the daemon on it (serveKube) accepting the
// API keys keys, pushes the built-in images (pushBuiltins) and makes a
// sandbox of each of images, so that the node has pulled them before the
// SDKs' request timeouts run; it returns the daemon's base URL.
func serveSDKs(t *testing.T, keys, images []string) string {
	t.Helper()
	n := StartNode(t, NodeOptions{})
	agentImage := n.SelfImage(t)
	n.pushBuiltins(t, images...)
	t.Setenv("AGENT2ENV_API_KEYS", strings.Join(keys, ","))
	base := serveKube(t, n, agentImage)
	key := keys[0]
	for _, img := range images {
		start := time.Now()
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
		t.Logf("kubetest: the node pulled %s and ran a sandbox of it in %v", img, time.Since(start).Round(time.Millisecond))
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
