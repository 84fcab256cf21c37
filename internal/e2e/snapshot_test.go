package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/testenv"
)

// requireCRIU fails a test of snapshots under CI (and skips it elsewhere)
// when the project's criu is not built (make criu, scripts/criu.sh); every
// daemon is given it when it is (toolFlags).
func requireCRIU(t *testing.T) {
	t.Helper()
	if criuPath == "" {
		testenv.Missing(t, "the project's criu is not built: run make criu (scripts/criu.sh)")
	}
}

// TestSnapshot snapshots a sandbox through the REST API, live, and makes
// sandboxes from the snapshot: a Python process holding x = 41 in memory
// (serving it on the sandbox's loopback), a shell holding a variable, a
// file, and the daemon's services at 127.0.0.1:4000 are all there in the
// restored sandbox, while the parent runs on and its later writes stay its
// own. The snapshot outlives its sandbox and a restart of the daemon, and
// its deletion leaves nothing behind.
func TestSnapshot(t *testing.T) {
	requireCRIU(t)
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	// get prints what a GET of its URL answers: the body, or the status
	// of an error. (The image has no curl.)
	setup := `echo hello > /workspace/f
cat > /tmp/get.py <<'PY'
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode(), end="")
except urllib.error.HTTPError as e:
    print(e.code, end="")
PY
cat > /tmp/hold.py <<'PY'
import http.server
x = 41
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = str(x + 1).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
PY
setsid python3 /tmp/hold.py </dev/null >/dev/null 2>&1 &
setsid bash -c 'v=from-memory; trap "echo \$v > /workspace/v" USR1; while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &
echo $! > /workspace/shell.pid
for i in $(seq 100); do python3 /tmp/get.py http://127.0.0.1:8000/ 2>/dev/null && exit 0; sleep 0.1; done; exit 1`
	if res := d.exec(sb.ID, "bash", "-c", setup); res.ExitCode != 0 || res.Stdout != "42" {
		t.Fatalf("setup: %+v", res)
	}
	// The daemon's services answer (a path it has nothing at: its 404).
	services := `python3 /tmp/get.py http://127.0.0.1:4000/nothing`
	if res := d.exec(sb.ID, "bash", "-c", services); res.Stdout != "404" {
		t.Fatalf("services before the snapshot: %+v", res)
	}

	// A context of the parent: its kernel is in the snapshot too, and the
	// parent's context goes on after it.
	var ctxInfo api.Context
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/contexts", api.CreateContextRequest{Language: "python"}, &ctxInfo); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("create context: %d %+v", code, ctxInfo)
	}
	var ran api.ExecuteResponse
	if code := d.do("POST", "/api/v1/contexts/"+ctxInfo.ContextID+"/execute", api.ExecuteRequest{Code: "x = 41"}, &ran); code != http.StatusOK || !ran.Success {
		t.Fatalf("execute in the context: %d %+v", code, ran)
	}

	var snap api.Snapshot
	start := time.Now()
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/snapshots", api.CreateSnapshotRequest{}, &snap); code != http.StatusCreated {
		t.Fatalf("snapshot: %d %+v", code, snap)
	}
	t.Logf("live snapshot through REST: %v, %d bytes", time.Since(start), snap.SizeBytes)
	if snap.SandboxID != sb.ID || snap.Image != "agent2env/python" || snap.Status != api.SnapshotReady || snap.SizeBytes <= 0 || snap.CPU != sb.CPU {
		t.Errorf("snapshot = %+v", snap)
	}
	var got api.Sandbox
	if d.do("GET", "/api/v1/sandboxes/"+sb.ID, nil, &got); got.Status != api.StatusRunning {
		t.Errorf("parent after a live snapshot: %s (%s), want running", got.Status, got.Reason)
	}
	if res := d.exec(sb.ID, "bash", "-c", "echo changed > /workspace/f; python3 /tmp/get.py http://127.0.0.1:8000/"); res.Stdout != "42" {
		t.Errorf("parent after the snapshot: %+v", res)
	}

	if code := d.do("POST", "/api/v1/contexts/"+ctxInfo.ContextID+"/execute", api.ExecuteRequest{Code: "x + 1"}, &ran); code != http.StatusOK || ran.Result != "42" {
		t.Errorf("the parent's context after the snapshot: %d %+v, want 42", code, ran)
	}

	restore := func(d *daemon) api.Sandbox {
		t.Helper()
		var r api.Sandbox
		start := time.Now()
		code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: snap.ID, Metadata: map[string]string{"rollout": "1"}}, &r)
		if code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("restore: %d %+v", code, r)
		}
		t.Logf("restore through REST to a running sandbox: %v", time.Since(start))
		if r.ID == sb.ID || r.Status != api.StatusRunning || r.Metadata["rollout"] != "1" {
			t.Errorf("restored sandbox = %+v", r)
		}
		check := `python3 /tmp/get.py http://127.0.0.1:8000/; echo; cat /workspace/f; kill -USR1 $(cat /workspace/shell.pid)
for i in $(seq 50); do [ -s /workspace/v ] && break; sleep 0.1; done; cat /workspace/v; ` + services
		if res := d.exec(r.ID, "bash", "-c", check); res.ExitCode != 0 || res.Stdout != "42\nhello\nfrom-memory\n404" {
			t.Errorf("restored sandbox: %+v; want the process's 42, the file, the shell's variable and the services", res)
		}
		ps := d.exec(r.ID, "bash", "-c", `for p in /proc/[0-9]*; do echo "${p#/proc/} $(tr '\0' ' ' <$p/cmdline | head -c 160)"; done`)
		// The context's kernel is there (python3 -c and the agent's
		// bootstrap, whose comment names it), with its memory, as a
		// context of the restored sandbox under a new id.
		if !strings.Contains(ps.Stdout, "<agent2env kernel>") {
			t.Errorf("no Python kernel in the restored sandbox; its processes:\n%s", ps.Stdout)
		}
		var cs api.ContextList
		if code := d.do("GET", "/api/v1/sandboxes/"+r.ID+"/contexts", nil, &cs); code != http.StatusOK || len(cs.Items) != 1 || cs.Items[0].ContextID == ctxInfo.ContextID {
			t.Fatalf("contexts of the restored sandbox: %d %+v; want the parent's one under a new id", code, cs)
		}
		// The answer says where the snapshot's context is, as a fork's does.
		if want := map[string]string{ctxInfo.ContextID: cs.Items[0].ContextID}; !maps.Equal(r.Contexts, want) {
			t.Errorf("restore's contexts = %v, want %v", r.Contexts, want)
		}
		var ran api.ExecuteResponse
		if code := d.do("POST", "/api/v1/contexts/"+cs.Items[0].ContextID+"/execute", api.ExecuteRequest{Code: "x + 1"}, &ran); code != http.StatusOK || ran.Result != "42" {
			t.Errorf("the restored sandbox's context: %d %+v, want 42", code, ran)
		}
		return r
	}
	child := restore(d)
	if res := d.exec(sb.ID, "cat", "/workspace/f"); res.Stdout != "changed\n" {
		t.Errorf("parent's file: %q; a child's writes must not reach it", res.Stdout)
	}

	// Errors: a snapshot's sandbox takes nothing but ttl and metadata; an
	// unknown snapshot is 404; a stopped sandbox is 409.
	var e api.Error
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: snap.ID, Image: "agent2env/python"}, &e); code != http.StatusBadRequest {
		t.Errorf("from_snapshot with an image: %d %+v, want 400", code, e)
	}
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: "snap-none"}, &e); code != http.StatusNotFound {
		t.Errorf("from an unknown snapshot: %d %+v, want 404", code, e)
	}
	if code := d.do("POST", "/api/v1/sandboxes/"+child.ID+"/stop", nil, &got); code != http.StatusOK {
		t.Fatalf("stop: %d", code)
	}
	if code := d.do("POST", "/api/v1/sandboxes/"+child.ID+"/snapshots", nil, &e); code != http.StatusConflict {
		t.Errorf("snapshot of a stopped sandbox: %d %+v, want 409", code, e)
	}

	// The snapshot outlives its sandbox and the daemon.
	if code := d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete parent: %d", code)
	}
	d.stop()
	d = startDaemon(t, d.dataDir)
	var list api.SnapshotList
	if d.do("GET", "/api/v1/snapshots?sandbox_id="+sb.ID, nil, &list); len(list.Items) != 1 || list.Items[0].ID != snap.ID {
		t.Fatalf("snapshots after the parent's deletion and a restart: %+v", list)
	}
	restore(d)

	if code := d.do("DELETE", "/api/v1/snapshots/"+snap.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete snapshot: %d", code)
	}
	if code := d.do("GET", "/api/v1/snapshots/"+snap.ID, nil, &e); code != http.StatusNotFound {
		t.Errorf("deleted snapshot: %d, want 404", code)
	}
	if entries, err := os.ReadDir(filepath.Join(d.dataDir, "snapshots")); err != nil || len(entries) != 0 {
		t.Errorf("snapshot files after the deletion: %v, %v", entries, err)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}

// TestFork forks a sandbox through the REST API into 8 running sandboxes:
// each has the parent's Python context (x = 41) under the new id the
// answer maps it to, diverges on its own (its context's variable, its
// files, its hostname), and draws other random numbers than the others
// and the parent; the parent runs on, unchanged. Bad counts and ids are
// 4xx; a fork of a snapshot makes sandboxes too, and so does a fork of a
// sandbox whose context's kernel is gone; deletion leaves nothing.
func TestFork(t *testing.T) {
	requireCRIU(t)
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	var parentCtx api.Context
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/contexts", api.CreateContextRequest{Language: "python"}, &parentCtx); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("create context: %d %+v", code, parentCtx)
	}
	execute := func(ctxID, code string) api.ExecuteResponse {
		t.Helper()
		var ran api.ExecuteResponse
		if status := d.do("POST", "/api/v1/contexts/"+ctxID+"/execute", api.ExecuteRequest{Code: code}, &ran); status != http.StatusOK || !ran.Success {
			t.Fatalf("execute %q in %s: %d %+v", code, ctxID, status, ran)
		}
		return ran
	}
	execute(parentCtx.ContextID, "import random\nx = 41")
	if res := d.exec(sb.ID, "bash", "-c", "echo parent > /workspace/f"); res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}

	var e api.Error
	for _, n := range []int{0, api.MaxForkCount + 1} {
		if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/fork", api.ForkRequest{Count: n}, &e); code != http.StatusBadRequest {
			t.Errorf("fork with count %d: %d %+v, want 400", n, code, e)
		}
	}
	if code := d.do("POST", "/api/v1/sandboxes/nosuchsandbox/fork", api.ForkRequest{Count: 1}, &e); code != http.StatusNotFound {
		t.Errorf("fork of an unknown sandbox: %d %+v, want 404", code, e)
	}
	if code := d.do("POST", "/api/v1/snapshots/snap-none/fork", api.ForkRequest{Count: 1}, &e); code != http.StatusNotFound {
		t.Errorf("fork of an unknown snapshot: %d %+v, want 404", code, e)
	}

	const n = 8
	var forked api.ForkResponse
	start := time.Now()
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/fork", api.ForkRequest{Count: n, Metadata: map[string]string{"rollout": "yes"}}, &forked); code != http.StatusCreated {
		t.Fatalf("fork: %d %+v", code, forked)
	}
	t.Logf("fork x%d through REST (live snapshot and %d restores): %v", n, n, time.Since(start))
	if len(forked.Sandboxes) != n || forked.SnapshotID == "" {
		t.Fatalf("fork answer: %+v", forked)
	}
	draws := map[string]string{strings.TrimSpace(execute(parentCtx.ContextID, "print(random.random())").Output.Stdout): sb.ID}
	for i, f := range forked.Sandboxes {
		ctxID := f.Contexts[parentCtx.ContextID]
		if f.Status != api.StatusRunning || f.Metadata["rollout"] != "yes" || ctxID == "" || ctxID == parentCtx.ContextID {
			t.Fatalf("forked sandbox %d: %+v", i, f)
		}
		ran := execute(ctxID, fmt.Sprintf("x += %d\nprint(x)\nprint(random.random())", i))
		lines := strings.Split(ran.Output.Stdout, "\n")
		if len(lines) < 2 || lines[0] != strconv.Itoa(41+i) {
			t.Errorf("%s's context: %q, want x = %d first", f.ID, ran.Output.Stdout, 41+i)
			continue
		}
		if other, ok := draws[lines[1]]; ok {
			t.Errorf("%s drew %s, as %s did: its random generator was not reseeded", f.ID, lines[1], other)
		}
		draws[lines[1]] = f.ID
		if res := d.exec(f.ID, "bash", "-c", "echo "+f.ID+" > /workspace/f; hostname"); res.ExitCode != 0 || res.Stdout != f.ID+"\n" {
			t.Errorf("%s: %+v, want its own hostname", f.ID, res)
		}
	}
	for _, f := range forked.Sandboxes {
		if res := d.exec(f.ID, "cat", "/workspace/f"); res.Stdout != f.ID+"\n" {
			t.Errorf("%s's file: %q, want its own write only", f.ID, res.Stdout)
		}
	}
	if res := d.exec(sb.ID, "cat", "/workspace/f"); res.Stdout != "parent\n" {
		t.Errorf("parent's file: %q, the forks' writes must not reach it", res.Stdout)
	}
	if ran := execute(parentCtx.ContextID, "x"); ran.Result != "41" {
		t.Errorf("parent's x after the forks: %+v, want 41", ran)
	}

	// From the fork's snapshot, which was kept.
	var again api.ForkResponse
	if code := d.do("POST", "/api/v1/snapshots/"+forked.SnapshotID+"/fork", api.ForkRequest{Count: 2}, &again); code != http.StatusCreated || len(again.Sandboxes) != 2 {
		t.Fatalf("fork of the snapshot: %d %+v", code, again)
	}
	for _, f := range again.Sandboxes {
		if ran := execute(f.Contexts[parentCtx.ContextID], "x"); ran.Result != "41" {
			t.Errorf("%s (of the snapshot): x = %+v, want 41", f.ID, ran)
		}
	}
	if code := d.do("DELETE", "/api/v1/snapshots/"+forked.SnapshotID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete snapshot: %d", code)
	}

	// After a stop and start the parent's context has no kernel until its
	// next execution: a fork has the context all the same, which starts
	// afresh (state_lost), as the parent's would.
	for _, op := range []string{"stop", "start"} {
		if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/"+op, nil, nil); code != http.StatusOK {
			t.Fatalf("%s the parent: %d", op, code)
		}
	}
	d.waitRunning(sb.ID)
	var cold api.ForkResponse
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/fork", api.ForkRequest{Count: 1}, &cold); code != http.StatusCreated || len(cold.Sandboxes) != 1 {
		t.Fatalf("fork after a stop and start: %d %+v", code, cold)
	}
	if ran := execute(cold.Sandboxes[0].Contexts[parentCtx.ContextID], "1 + 1"); ran.Result != "2" || !ran.StateLost {
		t.Errorf("the copy's context of a kernel that was gone: %+v, want 2 with state_lost", ran)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}

// TestSnapshotWithTerminals: a live snapshot of a sandbox with terminals
// attached (a one-shot one and a persistent one, each a Python REPL on a
// tty) succeeds, and both go on afterwards on the same connections: their
// interpreters kept what they held, and what they write after comes
// through once. A snapshot that stops the sandbox ends them.
func TestSnapshotWithTerminals(t *testing.T) {
	d, sb, terms := snapshotTerminals(t, "python3", "-q", "-i")
	for _, term := range terms {
		fmt.Fprintf(term, "v = 'kept'; print('before', 1 + 1)\n")
		readUntil(t, term, "before 2")
	}
	start := time.Now()
	var snap api.Snapshot
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/snapshots", api.CreateSnapshotRequest{}, &snap); code != http.StatusCreated {
		t.Fatalf("snapshot with terminals attached: %d %+v", code, snap)
	}
	t.Logf("live snapshot with two terminals attached: %v", time.Since(start))
	for _, term := range terms {
		fmt.Fprintf(term, "print('after', v, 2 + 2)\n")
		if got := readUntil(t, term, "after kept 4"); strings.Contains(got, "before 2") {
			t.Errorf("output seen before the snapshot came again: %q", got)
		}
	}

	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/snapshots", api.CreateSnapshotRequest{Stop: true}, &snap); code != http.StatusCreated {
		t.Fatalf("snapshot that stops the sandbox: %d %+v", code, snap)
	}
	for _, term := range terms {
		ended := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, term); ended <- err }()
		select {
		case err := <-ended:
			t.Logf("a terminal of a sandbox a snapshot stopped: %v", err)
		case <-time.After(30 * time.Second):
			t.Errorf("a terminal of a sandbox a snapshot stopped did not end")
		}
	}
}

// TestSnapshotShellTerminal: interactive shells on terminals, which open
// their controlling terminal (/dev/tty) beside the agent's end of it, are
// saved too (scripts/criu/0006; CRIU refused them, "ctty inheritance
// detected"): the live snapshot succeeds, both shells go on holding their
// variables, a sandbox made from the snapshot has the persistent terminal,
// its shell holding the variable too, and so is a program the shell runs
// that opened /dev/tty itself.
func TestSnapshotShellTerminal(t *testing.T) {
	for _, shell := range [][]string{{"sh"}, {"bash", "-l"}} { // bash -l: the console's
		t.Run(shell[0], func(t *testing.T) { testSnapshotShell(t, shell) })
	}
}

func testSnapshotShell(t *testing.T, shell []string) {
	d, sb, terms := snapshotTerminals(t, shell...)
	for _, term := range terms {
		fmt.Fprintf(term, "v=kept; echo before-$((1+1))\n")
		readUntil(t, term, "before-2")
	}
	var snap api.Snapshot
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/snapshots", api.CreateSnapshotRequest{}, &snap); code != http.StatusCreated {
		t.Fatalf("snapshot of a sandbox with shells on terminals: %d %+v", code, snap)
	}
	for _, term := range terms {
		fmt.Fprintf(term, "echo after-$v-$((2+2))\n")
		readUntil(t, term, "after-kept-4")
	}
	var copy api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: snap.ID}, &copy); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("a sandbox from the snapshot: %d %+v", code, copy)
	}
	copy = d.waitRunning(copy.ID)
	restored := attachTerminal(t, d.terminalClient(t), copy.ID, "work", client.AttachOptions{})
	fmt.Fprintf(restored, "echo restored-$v-$((3+3))\n")
	readUntil(t, restored, "restored-kept-6")

	// A program the shell runs that opened /dev/tty itself (as less or
	// sudo reading keys do) is saved too, or, where CRIU still cannot
	// (its process holds no end of the terminal of its own), refused 409
	// saying so; either way it goes on reading.
	term := terms[1]
	fmt.Fprintf(term, "echo reading; cat /dev/tty\n")
	readUntil(t, term, "reading\r\n")
	time.Sleep(300 * time.Millisecond) // cat has opened it
	var e api.Error
	code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/snapshots", api.CreateSnapshotRequest{}, &e)
	t.Logf("snapshot with a program reading /dev/tty: %d %s", code, e.Message)
	if code != http.StatusCreated && (code != http.StatusConflict || !strings.Contains(e.Message, "/dev/tty")) {
		t.Errorf("snapshot with a program reading /dev/tty: %d %+v; want 201, or 409 naming /dev/tty", code, e)
	}
	fmt.Fprintf(term, "to-cat\n")
	readUntil(t, term, "to-cat\r\nto-cat\r\n") // the tty's echo, then cat's
	fmt.Fprintf(term, "\x03")                  // ^C flushes the input behind it: the next line waits
	time.Sleep(500 * time.Millisecond)
	fmt.Fprintf(term, "echo back-$v\n")
	readUntil(t, term, "back-kept")
}

// snapshotTerminals starts a daemon that snapshots, and a sandbox with two
// terminals running command, attached: a one-shot one (as the web
// console's) and a persistent one.
func snapshotTerminals(t *testing.T, command ...string) (*daemon, api.Sandbox, []*client.Terminal) {
	t.Helper()
	requireCRIU(t)
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+terminalKey) })
	d.key = terminalKey
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	cl := d.terminalClient(t)
	oneShot := d.sdkTerminal(t, sb.ID, api.TerminalRequest{Command: command, TTY: true}, client.TerminalOptions{})
	if _, err := cl.Sandbox.CreateTerminal(context.Background(), sb.ID, api.CreateTerminalRequest{Name: "work", Command: command}); err != nil {
		t.Fatal(err)
	}
	return d, sb, []*client.Terminal{oneShot, attachTerminal(t, cl, sb.ID, "work", client.AttachOptions{})}
}

// TestSnapshotExecInFlight: a live snapshot of a sandbox that runs
// commands for clients (a REST exec streaming its output, a buffered REST
// exec, an OpenSandbox foreground command streaming its events) is taken
// at once, and each command goes on: its client gets all its output, once,
// in order, and its exit code. A sandbox made from the snapshot holds a
// copy of the commands' processes, which nothing attaches: it ends them.
func TestSnapshotExecInFlight(t *testing.T) {
	requireCRIU(t)
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	// loop counts to 30 in 6 s, past the 5 s a snapshot waited for a
	// command to end, and into the file /tmp/ticks-<name> too.
	loop := func(name string) string {
		return "for i in $(seq 1 30); do echo $i; echo $i >> /tmp/ticks-" + name + "; sleep 0.2; done"
	}
	var want strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	post := func(url string, header map[string]string, body any) *http.Response {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", url, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
		}
		return resp
	}
	// Each command's output and end, as its client saw them.
	type seen struct {
		out  testenv.Buffer
		end  string
		done chan struct{}
	}
	commands := map[string]*seen{}
	for _, name := range []string{"stream", "buffered", "opensandbox"} {
		commands[name] = &seen{done: make(chan struct{})}
	}

	// The REST exec streaming Server-Sent Events.
	stream := post(d.url("/api/v1/sandboxes/"+sb.ID+"/exec/stream"), nil, api.ExecRequest{Command: []string{"bash", "-c", loop("stream")}, Timeout: 60})
	go func() {
		s := commands["stream"]
		defer close(s.done)
		defer stream.Body.Close()
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev api.ExecEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				s.end = fmt.Sprintf("event %q: %v", data, err)
				return
			}
			switch ev.Type {
			case "stdout":
				s.out.Write([]byte(ev.Data))
			case "exit":
				s.end = fmt.Sprintf("exit %d", ev.ExitCode)
			default:
				s.end = "event " + data
			}
		}
	}()
	// The buffered REST exec.
	go func() {
		s := commands["buffered"]
		defer close(s.done)
		var res api.ExecResponse
		code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: []string{"bash", "-c", loop("buffered")}, Timeout: 60}, &res)
		s.out.Write([]byte(res.Stdout))
		s.end = fmt.Sprintf("exit %d", res.ExitCode)
		if code != http.StatusOK {
			s.end = fmt.Sprintf("status %d", code)
		}
	}()
	// The OpenSandbox foreground command, on its execd endpoint.
	var ep struct {
		Endpoint string            `json:"endpoint"`
		Headers  map[string]string `json:"headers"`
	}
	if code := d.do("GET", "/v1/sandboxes/"+sb.ID+"/endpoints/44772", nil, &ep); code != http.StatusOK {
		t.Fatalf("the OpenSandbox execd endpoint: %d", code)
	}
	command := post("http://"+ep.Endpoint+"/command", ep.Headers, map[string]any{"command": loop("opensandbox")})
	go func() {
		s := commands["opensandbox"]
		defer close(s.done)
		defer command.Body.Close()
		sc := bufio.NewScanner(command.Body)
		for sc.Scan() {
			if sc.Text() == "" {
				continue
			}
			var ev struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				s.end = fmt.Sprintf("event %q: %v", sc.Text(), err)
				return
			}
			switch ev.Type {
			case "stdout":
				s.out.Write([]byte(ev.Text))
			case "execution_complete":
				s.end = "exit 0"
			case "error":
				s.end = "event " + sc.Text()
			}
		}
	}()

	// The streams are under way (the buffered exec started with them).
	deadline := time.Now().Add(time.Minute)
	for _, name := range []string{"stream", "opensandbox"} {
		for !strings.Contains(commands[name].out.String(), "5\n") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	snap := snapshotInFlight(t, d, sb.ID, "three commands")
	for name, s := range commands {
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			t.Fatalf("the %s command did not end", name)
		}
		if got := s.out.String(); got != want.String() || s.end != "exit 0" {
			t.Errorf("the %s command across the snapshot: output %q, %s; want 1 to 30, exit 0", name, got, s.end)
		}
	}

	// A copy holds the commands' processes as they were, and ends them.
	var copy api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: snap.ID}, &copy); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("a sandbox from the snapshot: %d %+v", code, copy)
	}
	copy = d.waitRunning(copy.ID)
	ticks := "sleep 1; cat /tmp/ticks-stream /tmp/ticks-buffered /tmp/ticks-opensandbox | wc -l"
	first := d.exec(copy.ID, "bash", "-c", ticks)
	if again := d.exec(copy.ID, "bash", "-c", ticks); first.ExitCode != 0 || again.Stdout != first.Stdout {
		t.Errorf("the copy's commands count on: %q, then %q (%+v)", first.Stdout, again.Stdout, again)
	}
	d.deleteAll()
}

// snapshotInFlight takes a live snapshot of sandbox id, which has what
// (its requests in flight) under way: 201, well under the 5 s a snapshot
// waited for them.
func snapshotInFlight(t *testing.T, d *daemon, id, what string) api.Snapshot {
	t.Helper()
	start := time.Now()
	var answer struct {
		api.Snapshot
		Error string `json:"error"`
	}
	if code := d.do("POST", "/api/v1/sandboxes/"+id+"/snapshots", api.CreateSnapshotRequest{}, &answer); code != http.StatusCreated {
		t.Fatalf("snapshot with %s in flight: %d %s", what, code, answer.Error)
	}
	took := time.Since(start)
	t.Logf("live snapshot with %s in flight: %v", what, took)
	if took > 2*time.Second {
		t.Errorf("the snapshot with %s in flight took %v; want it well under 5 s", what, took)
	}
	return answer.Snapshot
}

// TestSnapshotCodeInFlight: a live snapshot of a sandbox whose contexts run
// code (a cell printing lines for 2 s, streamed as Server-Sent Events in
// one context and answered whole in another) lets go of the executions
// and takes them up again after: 201 at once, where it waited 5 s for them
// and failed 503, and each caller gets the cell's whole output, once and
// in order, its result and its end. A sandbox made from the snapshot has
// the kernels' state as it was (the copies of the executions interrupted:
// their callers are the original sandbox's).
func TestSnapshotCodeInFlight(t *testing.T) {
	requireCRIU(t)
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	newContext := func() string {
		t.Helper()
		var c api.Context
		if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/contexts", api.CreateContextRequest{Language: "python"}, &c); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("create context: %d %+v", code, c)
		}
		return c.ContextID
	}
	streamed, buffered := newContext(), newContext()
	// The cell counts to 30 in 6 s, past the 5 s a snapshot waited for an
	// execution to end.
	cell := "import time\nmarker = 'set'\nfor i in range(30):\n    print(i)\n    last = i\n    time.sleep(0.2)\nlast + 1"
	var want strings.Builder
	for i := range 30 {
		fmt.Fprintf(&want, "%d\n", i)
	}

	// The streamed execution: its events as they came.
	b, err := json.Marshal(api.ExecuteRequest{Code: cell, Timeout: 60})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(d.url("/api/v1/contexts/"+streamed+"/execute/stream"), "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("execute/stream: %d %s", resp.StatusCode, b)
	}
	var out testenv.Buffer
	var events []string // the events other than output, in order
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				event = name
				continue
			}
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if event == api.EventStdout {
				var ev api.ExecutionOutputEvent
				_ = json.Unmarshal([]byte(data), &ev)
				out.Write([]byte(ev.Text))
				continue
			}
			events = append(events, event+" "+data)
		}
	}()
	// The buffered execution.
	var whole api.ExecuteResponse
	wholeCode := 0
	wholeDone := make(chan struct{})
	go func() {
		defer close(wholeDone)
		wholeCode = d.do("POST", "/api/v1/contexts/"+buffered+"/execute", api.ExecuteRequest{Code: cell, Timeout: 60}, &whole)
	}()

	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "4\n") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	snap := snapshotInFlight(t, d, sb.ID, "two code executions")
	for _, done := range []chan struct{}{streamDone, wholeDone} {
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("an execution did not end")
		}
	}
	if got := out.String(); got != want.String() {
		t.Errorf("the streamed execution's output across the snapshot: %q, want 0 to 29 once", got)
	}
	if len(events) != 2 || !strings.HasPrefix(events[0], api.EventResult+" ") || !strings.Contains(events[0], `"30"`) ||
		!strings.HasPrefix(events[1], api.EventComplete+" ") {
		t.Errorf("the streamed execution's events after its output: %q; want its result 30, then complete", events)
	}
	if wholeCode != http.StatusOK || !whole.Success || whole.Result != "30" || whole.Output.Stdout != want.String() {
		t.Errorf("the buffered execution across the snapshot: %d %+v; want 0 to 29 once and 30", wholeCode, whole)
	}

	// A copy has the kernels' state: what the cell had done when the
	// snapshot was taken.
	var copy api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: snap.ID}, &copy); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("a sandbox from the snapshot: %d %+v", code, copy)
	}
	d.waitRunning(copy.ID)
	for _, id := range []string{streamed, buffered} {
		var ran api.ExecuteResponse
		code := d.do("POST", "/api/v1/contexts/"+copy.Contexts[id]+"/execute", api.ExecuteRequest{Code: "print(marker)\n0 < last < 29"}, &ran)
		if code != http.StatusOK || ran.StateLost || ran.Output.Stdout != "set\n" || ran.Result != "True" {
			t.Errorf("the copy of context %s: %d %+v; want its variables as of the snapshot", id, code, ran)
		}
	}
	d.deleteAll()
}
