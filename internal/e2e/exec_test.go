package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// TestExecDiagnostics: a missing working directory is the caller's error,
// and a command the sandbox's limits end says which limit.
func TestExecDiagnostics(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python", Memory: "256Mi"})
	sbPath := "/api/v1/sandboxes/" + sb.ID

	t.Run("missing cwd", func(t *testing.T) {
		var e api.Error
		code := d.do("POST", sbPath+"/exec", api.ExecRequest{Command: []string{"true"}, Cwd: "/no/such/dir"}, &e)
		if code != http.StatusBadRequest || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, "/no/such/dir does not exist") {
			t.Errorf("exec in a missing directory: %d %+v", code, e)
		}
	})

	t.Run("missing working dir of a context", func(t *testing.T) {
		var e api.Error
		code := d.do("POST", sbPath+"/contexts", api.CreateContextRequest{Language: "python", WorkingDir: "/no/such/dir"}, &e)
		if code != http.StatusBadRequest || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, "/no/such/dir does not exist") {
			t.Errorf("context in a missing directory: %d %+v", code, e)
		}
	})

	t.Run("out of memory", func(t *testing.T) {
		res := d.exec(sb.ID, "python3", "-c", "hog = bytearray(2 << 30)\nhog[::4096] = b'x' * len(hog[::4096])")
		if res.ExitCode != 137 || !res.OOMKilled || res.Reason != api.ExecOutOfMemory || !strings.Contains(res.Stderr, "out-of-memory killer") {
			t.Errorf("memory hog: %+v", res)
		}
		if res := d.exec(sb.ID, "true"); res.ExitCode != 0 || res.OOMKilled || res.Reason != "" {
			t.Errorf("after the hog: %+v", res)
		}
	})

	t.Run("process limit", func(t *testing.T) {
		// A command fills the sandbox's process table with sleeps, and
		// retakes any slot that frees, until it is cancelled.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		filler := make(chan error, 1)
		go func() {
			body, _ := json.Marshal(api.ExecRequest{Command: []string{"bash", "-c", "while :; do sleep 1000 & done"}, Timeout: 120})
			req, _ := http.NewRequestWithContext(ctx, "POST", d.url(sbPath+"/exec"), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			filler <- err
		}()
		time.Sleep(3 * time.Second)
		res := d.exec(sb.ID, "true")
		if res.ExitCode != 126 || res.Reason != api.ExecPidsExhausted || !strings.Contains(res.Stderr, "process limit") {
			t.Errorf("exec with no process left: %+v", res)
		}
		cancel()
		<-filler
		// The cancelled command took its sleeps with it.
		deadline := time.Now().Add(5 * time.Second)
		for res := d.exec(sb.ID, "true"); res.ExitCode != 0; res = d.exec(sb.ID, "true") {
			if time.Now().After(deadline) {
				t.Fatalf("exec after the filler was cancelled: %+v", res)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	d.deleteAll()
	d.assertNoLeaks()
}

// TestExecEndKillsWhatItStarted: a command that times out takes with it
// everything it started, whatever group or session it moved to; one that
// ends by itself leaves what it detached running.
func TestExecEndKillsWhatItStarted(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	// sleeps counts the processes of the sandbox sleeping 1000 s.
	sleeps := func() int {
		res := d.exec(sb.ID, "sh", "-c", `for c in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $c; echo; done 2>/dev/null`)
		return strings.Count(res.Stdout, "sleep 1000 ")
	}
	// processes counts the processes of the sandbox.
	processes := func() int {
		res := d.exec(sb.ID, "sh", "-c", "ls -d /proc/[0-9]* | wc -l")
		n := 0
		for _, c := range strings.TrimSpace(res.Stdout) {
			n = n*10 + int(c-'0')
		}
		return n
	}
	idle := processes()
	for _, cmd := range []string{
		`setsid sh -c "sleep 1000" & sleep 1000`,
		// Fork bombs, which the sandbox's process limit contains: the
		// classic one, in one process group, and one whose every process
		// starts a session of its own (and exits when it cannot fork,
		// leaving orphans). The command itself waits for the timeout.
		`bash -c 'b() { b | b & }; b; exec sleep 1000'`,
		`printf '#!/bin/bash\nwhile :; do setsid "$0" & done\n' > /tmp/bomb && chmod +x /tmp/bomb && /tmp/bomb & exec sleep 1000`,
	} {
		var res api.ExecResponse
		var raw json.RawMessage
		code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: []string{"sh", "-c", cmd}, Timeout: 2}, &raw)
		if err := json.Unmarshal(raw, &res); code != http.StatusOK || err != nil || !res.TimedOut {
			t.Fatalf("%s: %d %.300s", cmd, code, raw)
		}
		// The processes the kill ends are gone a moment later.
		deadline := time.Now().Add(5 * time.Second)
		for n := processes(); n != idle; n = processes() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d processes left after the timeout, %d before", cmd, n, idle)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if res := d.exec(sb.ID, "sh", "-c", "nohup sleep 1000 >/dev/null 2>&1 &"); res.ExitCode != 0 {
		t.Fatalf("nohup: %+v", res)
	}
	time.Sleep(200 * time.Millisecond)
	if n := sleeps(); n != 1 {
		t.Errorf("%d detached sleeps running after their command ended, want 1", n)
	}
	d.deleteAll()
	d.assertNoLeaks()
}
