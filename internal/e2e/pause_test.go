package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// TestPause pauses a sandbox whose loop counts, through the REST API: it
// is paused, its agent out of reach (409, saying how to resume), and it
// stays paused across a crash of the daemon; resumed, the loop goes on
// counting where it was after a gap as long as the pause, and its file is
// there. A paused sandbox is then deleted without a leak.
func TestPause(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	path := "/api/v1/sandboxes/" + sb.ID
	if code, body := d.upload(sb.ID, "/workspace/kept.txt", []byte("kept")); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	counter := `(i=0; while :; do i=$((i+1)); read up _ </proc/uptime; echo "$i $up" >>/tmp/count; sleep 0.05; done) </dev/null >/dev/null 2>&1 &`
	if res := d.exec(sb.ID, "bash", "-c", counter); res.ExitCode != 0 {
		t.Fatalf("start the counting loop: %+v", res)
	}
	time.Sleep(300 * time.Millisecond)

	var got api.Sandbox
	start := time.Now()
	if code := d.do("POST", path+"/pause", nil, &got); code != http.StatusOK || got.Status != api.StatusPaused {
		t.Fatalf("pause: %d %+v", code, got)
	}
	t.Logf("pause answered in %s", time.Since(start))
	var e api.Error
	if code := d.do("POST", path+"/exec", api.ExecRequest{Command: []string{"true"}}, &e); code != http.StatusConflict ||
		e.Code != api.CodeSandboxNotReady || !strings.Contains(e.Message, "resume it first") || e.Details["status"] != "paused" {
		t.Errorf("exec in a paused sandbox: %d %+v, want 409 SANDBOX_NOT_READY saying to resume it, status paused", code, e)
	}
	if code, body := d.download(sb.ID, "/workspace/kept.txt"); code != http.StatusConflict {
		t.Errorf("download from a paused sandbox: %d %s, want 409", code, body)
	}

	// A crash of the daemon leaves it paused, and known.
	d.kill()
	time.Sleep(time.Second)
	d = startDaemon(t, d.dataDir)
	if d.do("GET", path, nil, &got); got.Status != api.StatusPaused {
		t.Fatalf("after a restart the sandbox is %s (%s), want paused", got.Status, got.Reason)
	}
	if code := d.do("POST", path+"/resume", nil, &got); code != http.StatusOK || got.Status != api.StatusRunning {
		t.Fatalf("resume: %d %+v", code, got)
	}
	time.Sleep(300 * time.Millisecond)
	check := `lines = [l.split() for l in open("/tmp/count")]
ok = all(int(n) == i + 1 for i, (n, _) in enumerate(lines))
gap = max(float(b[1]) - float(a[1]) for a, b in zip(lines, lines[1:]))
print(len(lines), ok, gap)`
	out := strings.Fields(d.exec(sb.ID, "python3", "-c", check).Stdout)
	if len(out) != 3 || out[1] != "True" {
		t.Fatalf("the counting loop's lines: %v, want them counting on without a restart", out)
	}
	// Paused for the daemon's restart and a second more: over a second
	// without a turn of a loop that turns every 50 ms.
	if gap, _ := strconv.ParseFloat(out[2], 64); gap < 1 {
		t.Errorf("longest gap of the counting loop %.2f s, want over the second it was paused", gap)
	}
	time.Sleep(200 * time.Millisecond)
	again := strings.Fields(d.exec(sb.ID, "python3", "-c", check).Stdout)
	n0, _ := strconv.Atoi(out[0])
	if n1, _ := strconv.Atoi(again[0]); n1 <= n0 {
		t.Errorf("the counting loop stopped after the resume: %d lines, then %d", n0, n1)
	}
	if code, body := d.download(sb.ID, "/workspace/kept.txt"); code != http.StatusOK || string(body) != "kept" {
		t.Errorf("file after pause and resume: %d %q", code, body)
	}

	if code := d.do("POST", path+"/pause", nil, &got); code != http.StatusOK {
		t.Fatalf("pause again: %d", code)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}
