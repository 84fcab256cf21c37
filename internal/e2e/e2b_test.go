package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2e/stocksdk"
)

// TestE2BSDK runs the stock E2B SDKs (stocksdk.RunE2B: pinned in
// scripts/peers-requirements.txt and scripts/test-peers.sh), unchanged,
// against a daemon on the oci runtime with API keys, configured by
// environment variables alone as the README says, pause and resume
// included, snapshots too where the daemon's runtime takes them; then the README's example word for word and E2B's routes
// (issue 25). kubetest's TestNodeSDKs runs the same stocksdk.RunE2B on the
// kubernetes runtime.
func TestE2BSDK(t *testing.T) {
	pythonBin := stocksdk.Python(t)
	const (
		key   = stocksdk.E2BKey
		image = "agent2env/code-interpreter"
	)
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+key) })
	d.key = key
	// The first sandbox of an image waits for the image to be built: build
	// it first, outside the SDK's request timeout.
	for _, img := range stocksdk.E2BImages {
		warm := d.create(api.CreateSandboxRequest{Image: img, CPU: "1", Memory: "1Gi"})
		if code := d.do("DELETE", "/api/v1/sandboxes/"+warm.ID, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete the warm-up sandbox: status %d", code)
		}
	}
	noSandboxes := func(t *testing.T) {
		t.Helper()
		var list api.List[api.Sandbox]
		if code := d.do("GET", "/api/v1/sandboxes", nil, &list); code != http.StatusOK || len(list.Items) != 0 {
			t.Errorf("sandboxes left: status %d, %+v", code, list.Items)
		}
	}
	// Snapshots run where the daemon takes them (its criu is built), and
	// are refused in E2B's form where not.
	var caps api.Capabilities
	if code := d.do("GET", "/api/v1/capabilities", nil, &caps); code != http.StatusOK {
		t.Fatalf("capabilities: status %d", code)
	}
	tg := stocksdk.E2B{URL: "http://" + d.addr, Python: pythonBin, Clients: stocksdk.E2BStockClients(t), Pause: true, Snapshots: caps.Snapshots, NoSandboxes: noSandboxes}
	stocksdk.RunE2B(t, tg)
	t.Run("readme", func(t *testing.T) {
		readme, err := os.ReadFile("../../README.md")
		if err != nil {
			t.Fatal(err)
		}
		// The script runs the README's example as the README has it.
		script, err := os.ReadFile("testdata/e2b_flow.py")
		if err != nil {
			t.Fatal(err)
		}
		_, example, _ := strings.Cut(string(script), "README = \"\"\"\n")
		example, _, _ = strings.Cut(example, "\"\"\"")
		if !strings.Contains(string(readme), "```python\n"+example+"```") {
			t.Errorf("the README's E2B example is not the one testdata/e2b_flow.py runs:\n%s", example)
		}
		res := tg.Flow(t, "readme")
		if got := fmt.Sprint(res["printed"]); got != "[2 Hello World]" {
			t.Errorf("the README's example printed %s, want [2 Hello World]", got)
		}
		noSandboxes(t)
	})
	t.Run("routes on the real daemon", func(t *testing.T) {
		sb := d.create(api.CreateSandboxRequest{Image: image, CPU: "1", Memory: "1Gi"})
		defer d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil)
		get := func(host string, headers ...string) int {
			req, err := http.NewRequest("GET", "http://"+d.addr+"/health", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		// envd's /health (204) by headers and by a wildcard host, past the
		// daemon's Bearer check and browser guard; the daemon's own
		// /health (200) without them.
		// A server of the sandbox's own, on a port of its loopback, reached
		// through the port gateway by E2B's port header.
		var started api.ExecResponse
		if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: []string{"sh", "-c",
			"echo served > /tmp/index.txt; setsid python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp >/dev/null 2>&1 &"}}, &started); code != http.StatusOK {
			t.Fatalf("start a server in the sandbox: status %d", code)
		}
		var body string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			req, _ := http.NewRequest("GET", "http://"+d.addr+"/index.txt", nil)
			req.Header.Set("E2b-Sandbox-Id", sb.ID)
			req.Header.Set("E2b-Sandbox-Port", "8000")
			req.Header.Set("X-Access-Token", sb.AccessToken)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if body = fmt.Sprintf("%d %s", res.StatusCode, b); res.StatusCode == http.StatusOK {
				break
			}
		}
		if body != "200 served\n" {
			t.Errorf("the sandbox's port 8000 by E2B's headers: %q, want 200 served", body)
		}
		for name, tc := range map[string]struct {
			host    string
			headers []string
			want    int
		}{
			"headers":           {d.addr, []string{"E2b-Sandbox-Id", sb.ID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.AccessToken}, http.StatusNoContent},
			"host":              {"49983-" + sb.ID + ".localhost", []string{"X-Access-Token", sb.AccessToken}, http.StatusNoContent},
			"token only, no id": {d.addr, []string{"X-Access-Token", sb.AccessToken}, http.StatusNoContent},
			"wrong token":       {d.addr, []string{"E2b-Sandbox-Id", sb.ID, "X-Access-Token", "nope"}, http.StatusUnauthorized},
			"unknown":           {d.addr, []string{"E2b-Sandbox-Id", "nosuchsandbox", "X-Access-Token", sb.AccessToken}, http.StatusBadGateway},
			"daemon's own":      {d.addr, nil, http.StatusOK},
		} {
			if got := get(tc.host, tc.headers...); got != tc.want {
				t.Errorf("%s: status %d, want %d", name, got, tc.want)
			}
		}
	})
	t.Run("ended and paused sandboxes on the real daemon", func(t *testing.T) {
		e2b := func(method, path, body string) int {
			t.Helper()
			req, err := http.NewRequest(method, d.url(path), strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-API-KEY", key)
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		get := func(id string) api.Sandbox {
			t.Helper()
			var sb api.Sandbox
			if code := d.do("GET", "/api/v1/sandboxes/"+id, nil, &sb); code != http.StatusOK {
				t.Fatalf("get %s: status %d", id, code)
			}
			return sb
		}
		// A stopped sandbox, whose record agent2env keeps, is one E2B has
		// forgotten: 404, and its expiry left as it was.
		stopped := d.create(api.CreateSandboxRequest{Image: image, CPU: "1", Memory: "1Gi"})
		defer d.do("DELETE", "/api/v1/sandboxes/"+stopped.ID, nil, nil)
		if code := d.do("POST", "/api/v1/sandboxes/"+stopped.ID+"/stop", nil, nil); code != http.StatusOK {
			t.Fatalf("stop: status %d", code)
		}
		before := get(stopped.ID)
		for _, op := range []struct{ path, body string }{{"/timeout", `{"timeout":600}`}, {"/pause", ""}, {"/connect", `{"timeout":60}`}} {
			if code := e2b("POST", "/sandboxes/"+stopped.ID+op.path, op.body); code != http.StatusNotFound {
				t.Errorf("%s of a stopped sandbox: status %d, want 404", op.path, code)
			}
		}
		if after := get(stopped.ID); after.Status != before.Status || !after.ExpiresAt.Equal(before.ExpiresAt) {
			t.Errorf("a stopped sandbox after E2B's calls: %s until %v, want %s until %v", after.Status, after.ExpiresAt, before.Status, before.ExpiresAt)
		}
		// A paused one: a connect whose timeout is refused leaves it
		// paused; connects side by side all answer it.
		paused := d.create(api.CreateSandboxRequest{Image: image, CPU: "1", Memory: "1Gi"})
		defer d.do("DELETE", "/api/v1/sandboxes/"+paused.ID, nil, nil)
		if code := e2b("POST", "/sandboxes/"+paused.ID+"/pause", ""); code != http.StatusNoContent {
			t.Fatalf("pause: status %d", code)
		}
		time.Sleep(time.Second) // its start is a second ago: the longest timeout ends too far from it
		if code := e2b("POST", "/sandboxes/"+paused.ID+"/connect", `{"timeout":2147483647}`); code != http.StatusBadRequest {
			t.Errorf("connect with a timeout too far: status %d, want 400", code)
		}
		if got := get(paused.ID); got.Status != api.StatusPaused {
			t.Errorf("after a refused connect: %s, want paused", got.Status)
		}
		const n = 4
		codes := make(chan int, n)
		for range n {
			go func() { codes <- e2b("POST", "/sandboxes/"+paused.ID+"/connect", `{"timeout":120}`) }()
		}
		created := 0
		for range n {
			switch code := <-codes; code {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Errorf("a connect beside others: status %d, want 200 or 201", code)
			}
		}
		if got := get(paused.ID); created != 1 || got.Status != api.StatusRunning {
			t.Errorf("%d connects resumed it, now %s; want one, running", created, got.Status)
		}
	})
	d.assertNoLeaks()
}
