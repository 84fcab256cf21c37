package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// TestSeed003Quickstart replays seed 003 §9.1 against the real daemon, as
// the LiteBoxd Python SDK sends it: create from a template with overrides,
// wait for ready, execute, delete.
func TestSeed003Quickstart(t *testing.T) {
	d := startDaemon(t, "")
	var tpl api.Template
	if code := d.do("POST", "/api/v1/templates", `{"name": "python-data-science", "spec": {"image": "agent2env/python", "resources": {"cpu": "500m", "memory": "512Mi"}, "ttl": 3600}}`, &tpl); code != http.StatusCreated {
		t.Fatalf("create template: %d %+v", code, tpl)
	}
	var sb api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", `{"template": "python-data-science", "overrides": {"ttl": 7200, "env": {"DEBUG": "true"}}}`, &sb); code != http.StatusCreated {
		t.Fatalf("create sandbox: %d %+v", code, sb)
	}
	sb = d.waitRunning(sb.ID)
	if sb.Template != "python-data-science" || sb.TemplateVersion != 1 || sb.TTL != 7200 || sb.Env["DEBUG"] != "true" ||
		sb.CPU != "500m" || sb.Memory != "512Mi" || len(sb.AccessToken) != 64 || !strings.HasSuffix(sb.AccessURL, "/api/v1/sandbox/"+sb.ID) ||
		sb.ExpiresAt.Sub(sb.CreatedAt) != 7200*time.Second {
		t.Errorf("sandbox = %+v", sb)
	}
	var res api.ExecResponse
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", `{"command": ["python", "-c", "print('Hello from sandbox!')"], "timeout": 30}`, &res); code != http.StatusOK || res.Stdout != "Hello from sandbox!\n" || res.ExitCode != 0 {
		t.Errorf("execute: %d %+v", code, res)
	}
	if code := d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent {
		t.Errorf("delete: %d", code)
	}
	d.assertNoLeaks()
}

// TestTemplateLifecycle runs every startup step of a template in a real
// sandbox, then stops and starts it again.
func TestTemplateLifecycle(t *testing.T) {
	d := startDaemon(t, "")
	spec := `{"name": "web", "spec": {
		"image": "agent2env/python",
		"files": [{"destination": "/workspace/site/index.html", "content": "<h1>hi</h1>"}],
		"startupScript": "echo setup > /workspace/setup.txt",
		"command": ["python3", "-m", "http.server", "8000", "--directory", "/workspace/site"],
		"readinessProbe": {"exec": {"command": ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/')"]}, "periodSeconds": 1, "failureThreshold": 10}
	}}`
	if code := d.do("POST", "/api/v1/templates", spec, nil); code != http.StatusCreated {
		t.Fatalf("create template: %d", code)
	}
	var sb api.Sandbox
	d.do("POST", "/api/v1/sandboxes", `{"template": "web"}`, &sb)
	sb = d.waitRunning(sb.ID)
	check := func() {
		t.Helper()
		res := d.exec(sb.ID, "sh", "-c", "cat /workspace/setup.txt; python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8000/').read().decode())\"")
		if res.Stdout != "setup\n<h1>hi</h1>\n" {
			t.Errorf("in the sandbox: %+v", res)
		}
	}
	check()

	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/stop", nil, nil); code != http.StatusOK {
		t.Fatalf("stop: %d", code)
	}
	d.do("GET", "/api/v1/sandboxes/"+sb.ID, nil, &sb)
	if sb.Status != api.StatusSucceeded {
		t.Errorf("after stop: %s (%s)", sb.Status, sb.Reason)
	}
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/start", nil, nil); code != http.StatusOK {
		t.Fatalf("start: %d", code)
	}
	d.waitRunning(sb.ID)
	check()

	// A startup script that fails leaves a failed sandbox with the reason.
	d.do("POST", "/api/v1/templates", `{"name": "broken", "spec": {"image": "agent2env/python", "startupScript": "echo nope >&2; exit 3"}}`, nil)
	var bad api.Sandbox
	d.do("POST", "/api/v1/sandboxes", `{"template": "broken"}`, &bad)
	deadline := time.Now().Add(time.Minute)
	for bad.Status != api.StatusFailed && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		d.do("GET", "/api/v1/sandboxes/"+bad.ID, nil, &bad)
	}
	if bad.Status != api.StatusFailed || !strings.Contains(bad.Reason, "startup script exited with code 3: nope") {
		t.Errorf("broken template sandbox: %s (%s)", bad.Status, bad.Reason)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// TestSeed003Async replays seed 003 §9.2: create from a template without
// overrides, wait for ready, execute, delete.
func TestSeed003Async(t *testing.T) {
	d := startDaemon(t, "")
	if code := d.do("POST", "/api/v1/templates", `{"name": "python-data-science", "spec": {"image": "agent2env/python"}}`, nil); code != http.StatusCreated {
		t.Fatalf("create template: %d", code)
	}
	var sb api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", `{"template": "python-data-science"}`, &sb); code != http.StatusCreated {
		t.Fatalf("create sandbox: %d", code)
	}
	sb = d.waitRunning(sb.ID)
	// Template defaults (LiteBoxd's): 500m, 512Mi, ttl 0 = never expires.
	if sb.CPU != "500m" || sb.Memory != "512Mi" || sb.TTL != 0 || !sb.ExpiresAt.Equal(api.Never) || sb.TemplateVersion != 1 {
		t.Errorf("sandbox = %+v", sb)
	}
	var res api.ExecResponse
	if d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", `{"command": ["python", "-c", "print('Hello!')"], "timeout": 30}`, &res); res.Stdout != "Hello!\n" {
		t.Errorf("execute: %+v", res)
	}
	if code := d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent {
		t.Errorf("delete: %d", code)
	}
	d.assertNoLeaks()
}
