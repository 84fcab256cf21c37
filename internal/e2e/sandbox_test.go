package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// TestQuickstart is the README's quick start over the API: create from
// agent2env/python, run python, move a file in and out, read logs, delete.
func TestQuickstart(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python", Env: map[string]string{"GREETING": "hi"}})
	if sb.Image != "agent2env/python" || sb.CPU == "" || sb.Memory == "" || sb.CreatedAt.IsZero() {
		t.Errorf("sandbox = %+v", sb)
	}

	res := d.exec(sb.ID, "python3", "-c", "print(1)")
	if res.ExitCode != 0 || res.Stdout != "1\n" || res.Stderr != "" {
		t.Fatalf("python3 -c 'print(1)' = %+v", res)
	}
	res = d.exec(sb.ID, "sh", "-c", `echo "$GREETING $HOME $(id -u) $(pwd)"; python -c 'import numpy, pandas, matplotlib; print("libs")'`)
	if res.Stdout != "hi /home/sandbox 1000 /workspace\nlibs\n" {
		t.Errorf("environment = %+v", res)
	}

	data := make([]byte, 5<<20+3)
	rand.Read(data)
	if code, body := d.upload(sb.ID, "/workspace/data.bin", data); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	code, got := d.download(sb.ID, "/workspace/data.bin")
	if code != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("download: status %d, %d bytes, identical %v", code, len(got), bytes.Equal(got, data))
	}
	if res := d.exec(sb.ID, "sha256sum", "data.bin"); res.ExitCode != 0 {
		t.Errorf("uploaded file not visible to commands: %+v", res)
	}

	var logs api.LogsResponse
	if code := d.do("GET", "/api/v1/sandboxes/"+sb.ID+"/logs", nil, &logs); code != http.StatusOK || len(logs.Events) < 2 {
		t.Errorf("logs: %d %+v", code, logs)
	}

	if code := d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	var e api.Error
	if code := d.do("GET", "/api/v1/sandboxes/"+sb.ID, nil, &e); code != http.StatusNotFound || e.Code != api.CodeSandboxNotFound {
		t.Errorf("get after delete: %d %+v", code, e)
	}
	d.assertNoLeaks()
}

func TestNodeImage(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/node"})
	res := d.exec(sb.ID, "node", "-e", "console.log(6*7)")
	if res.ExitCode != 0 || res.Stdout != "42\n" {
		t.Errorf("node -e = %+v", res)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

func TestExecStream(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	body := `{"command": ["sh", "-c", "echo one; sleep 0.3; echo two >&2; exit 7"], "timeout": 10}`
	start := time.Now()
	resp, err := http.Post(d.url("/api/v1/sandboxes/"+sb.ID+"/exec/stream"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	var firstAt time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			if len(events) == 0 {
				firstAt = time.Since(start)
			}
			events = append(events, ev)
		}
		if strings.Contains(sc.Text(), `"exit_code":7`) {
			events = append(events, "exit_code=7")
		}
	}
	want := "stdout,stderr,exit,exit_code=7"
	if strings.Join(events, ",") != want {
		t.Errorf("events = %v, want %s", events, want)
	}
	if firstAt > 250*time.Millisecond {
		t.Errorf("first output arrived after %v: not streamed", firstAt)
	}
	d.deleteAll()
}

func TestExecTimeoutAndLimits(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python", Memory: "256Mi"})
	var res api.ExecResponse
	d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: []string{"sleep", "30"}, Timeout: 1}, &res)
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("timeout: %+v", res)
	}
	// 40 MB of output: the response keeps the configured cap and says so.
	d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: []string{"sh", "-c", "head -c 40000000 /dev/zero | tr '\\0' x"}}, &res)
	if !res.Truncated || len(res.Stdout) != 10<<20 || res.ExitCode != 0 {
		t.Errorf("flood: truncated %v, %d bytes kept, exit %d", res.Truncated, len(res.Stdout), res.ExitCode)
	}
	// A memory bomb is killed inside the sandbox; the sandbox lives on.
	res = d.exec(sb.ID, "python3", "-c", "x = bytearray(1 << 30)")
	if res.ExitCode == 0 {
		t.Errorf("1 GiB allocation in a 256Mi sandbox succeeded: %+v", res)
	}
	if res := d.exec(sb.ID, "true"); res.ExitCode != 0 {
		t.Errorf("sandbox unusable after memory bomb: %+v", res)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

func TestTTLExpiry(t *testing.T) {
	d := startDaemon(t, "")
	ttl := 2
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python", TTL: &ttl})
	if sb.ExpiresAt.Sub(sb.CreatedAt) != 2*time.Second {
		t.Fatalf("expires_at = %v for created_at %v and ttl 2", sb.ExpiresAt, sb.CreatedAt)
	}
	never := 0
	keep := d.create(api.CreateSandboxRequest{Image: "agent2env/python", TTL: &never})
	if !keep.ExpiresAt.Equal(api.Never) {
		t.Errorf("ttl 0 has expires_at %v", keep.ExpiresAt)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.do("GET", "/api/v1/sandboxes/"+sb.ID, nil, nil) != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("sandbox with ttl 2 still exists after 10s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := d.do("GET", "/api/v1/sandboxes/"+keep.ID, nil, nil); code != http.StatusOK {
		t.Errorf("sandbox with ttl 0 is gone: %d", code)
	}
	d.deleteAll()
	d.assertNoLeaks()
}
