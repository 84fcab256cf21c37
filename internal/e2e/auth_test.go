package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// TestAPIKeys: with keys configured every API route needs one; health
// checks do not.
func TestAPIKeys(t *testing.T) {
	const key = "a2e_e2e-test-key-0123456789abcdef"
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+key) })
	tests := []struct {
		path, auth string
		status     int
	}{
		{"/health", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/api/v1/sandboxes", "", http.StatusUnauthorized},
		{"/api/v1/sandboxes", "Bearer wrong-key-0123456789", http.StatusUnauthorized},
		{"/api/v1/sandboxes", "Bearer " + key, http.StatusOK},
		{"/api/v1/images/prepull", "Bearer " + key, http.StatusOK},
		{"/api/v1/sessions", "", http.StatusUnauthorized},
		{"/api/v1/sessions", "Bearer " + key, http.StatusOK},
		{"/api/v1/stats", "Bearer " + key, http.StatusOK},
		{"/mcp", "", http.StatusUnauthorized},
		{"/mcp", "Bearer wrong-key-0123456789", http.StatusUnauthorized},
		{"/mcp", "Bearer " + key, http.StatusMethodNotAllowed}, // stateless: POST only
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, d.url(tt.path), nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("GET %s with %q: %d, want %d", tt.path, tt.auth, resp.StatusCode, tt.status)
		}
	}
}

// A daemon reachable beyond loopback refuses to start without keys.
func TestNoKeysBeyondLoopback(t *testing.T) {
	dir, _ := os.MkdirTemp("", "a2e-")
	defer os.RemoveAll(dir)
	cmd := exec.Command(binary, "serve", "--listen", "0.0.0.0:0", "--data-dir", dir, "--image-dir", imageDir)
	cmd.Env = os.Environ()
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("daemon on 0.0.0.0 without keys kept running")
	}
	if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), "AGENT2ENV_API_KEYS") {
		t.Errorf("exit %d, output %q; want a failure that says how to configure keys", cmd.ProcessState.ExitCode(), out)
	}
}

// TestPrepull prepulls a built-in image through the API and waits for it.
func TestPrepull(t *testing.T) {
	d := startDaemon(t, "")
	var task api.PrepullTask
	if code := d.do("POST", "/api/v1/images/prepull", api.PrepullRequest{Image: "agent2env/node"}, &task); code != http.StatusAccepted && code != http.StatusCreated {
		t.Fatalf("prepull: %d %+v", code, task)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for task.Status != api.PrepullCompleted {
		if task.Status == api.PrepullFailed || time.Now().After(deadline) {
			t.Fatalf("prepull task %+v", task)
		}
		time.Sleep(200 * time.Millisecond)
		d.do("GET", "/api/v1/images/prepull/"+task.ID, nil, &task)
	}
	if task.CompletedAt == nil || task.Progress.Ready != task.Progress.Total {
		t.Errorf("completed task %+v", task)
	}
	var list api.List[api.PrepullTask]
	if d.do("GET", "/api/v1/images/prepull?status=completed", nil, &list); len(list.Items) != 1 {
		t.Errorf("list completed = %+v", list.Items)
	}
}
