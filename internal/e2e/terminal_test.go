package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/testenv"
)

const terminalKey = "a2e_e2e-terminal-key-0123456789abcdef"

// startTerminalDaemon starts a daemon with an API key and a running
// sandbox.
func startTerminalDaemon(t *testing.T) (*daemon, api.Sandbox) {
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+terminalKey) })
	d.key = terminalKey
	return d, d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
}

// terminalURL is the WebSocket URL of sandbox id's terminal with query q.
func (d *daemon) terminalURL(id string, q url.Values) string {
	return "ws://" + d.addr + "/api/v1/sandboxes/" + id + "/exec/interactive?" + q.Encode()
}

// dialTerminal opens the terminal's WebSocket offering protocols, with
// header (the key when nil).
func (d *daemon) dialTerminal(id string, q url.Values, header http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	if header == nil {
		header = http.Header{"Authorization": {"Bearer " + d.key}}
	}
	dl := websocket.Dialer{Subprotocols: protocols, HandshakeTimeout: 30 * time.Second}
	return dl.Dial(d.terminalURL(id, q), header)
}

// sdkTerminal opens a terminal with the Go SDK.
func (d *daemon) sdkTerminal(t *testing.T, id string, req api.TerminalRequest, opts client.TerminalOptions) *client.Terminal {
	t.Helper()
	cl, err := client.New(d.url(""), client.WithToken(d.key))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := cl.Sandbox.Terminal(ctx, id, req, opts)
	if err != nil {
		t.Fatalf("terminal %v: %v", req.Command, err)
	}
	t.Cleanup(func() { term.Close() })
	return term
}

// readUntil reads r until what it read contains want, or fails t after
// a while.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var got bytes.Buffer
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if strings.Contains(got.String(), want) {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read %q before %q: %v", got.String(), want, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no %q in the output in 30 s", want)
	}
	return got.String()
}

// TestTerminalK8s drives the terminal in the v5.channel.k8s.io dialect,
// through the Go SDK and over the wire.
func TestTerminalK8s(t *testing.T) {
	d, sb := startTerminalDaemon(t)

	t.Run("echo round trip and stdin half-close", func(t *testing.T) {
		term := d.sdkTerminal(t, sb.ID, api.TerminalRequest{Command: []string{"cat"}}, client.TerminalOptions{})
		r := bufio.NewReader(term)
		const rounds = 200
		start := time.Now()
		for i := range rounds {
			line := fmt.Sprintf("line %d\n", i)
			if _, err := io.WriteString(term, line); err != nil {
				t.Fatal(err)
			}
			got, err := r.ReadString('\n')
			if err != nil || got != line {
				t.Fatalf("echo of %q: %q, %v", line, got, err)
			}
		}
		t.Logf("echo round trip through the daemon: %v on average over %d", time.Since(start)/rounds, rounds)
		if err := term.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
			t.Errorf("after the half-close: %q, %v", rest, err)
		}
		if exit, err := term.Wait(); err != nil || exit.ExitCode != 0 {
			t.Errorf("cat after its input ended: %+v, %v", exit, err)
		}
	})

	t.Run("resize", func(t *testing.T) {
		term := d.sdkTerminal(t, sb.ID, api.TerminalRequest{
			Command: []string{"sh", "-c", "stty size; read x; stty size"}, TTY: true, Rows: 30, Cols: 100,
		}, client.TerminalOptions{})
		readUntil(t, term, "30 100")
		if err := term.Resize(40, 120); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the resize message goes before the input
		io.WriteString(term, "\r")
		readUntil(t, term, "40 120")
	})

	for _, tc := range []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		t.Run(tc.script, func(t *testing.T) {
			term := d.sdkTerminal(t, sb.ID, api.TerminalRequest{Command: []string{"sh", "-c", tc.script}}, client.TerminalOptions{})
			io.Copy(io.Discard, term)
			if exit, err := term.Wait(); err != nil || exit.ExitCode != tc.code {
				t.Errorf("exit: %+v, %v, want code %d", exit, err, tc.code)
			}
		})
	}

	t.Run("wire", func(t *testing.T) {
		q := url.Values{"command": {"sh", "-c", "echo out; echo err >&2; exit 7"}}
		conn, resp, err := d.dialTerminal(sb.ID, q, nil, api.TerminalProtocolK8s)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != api.TerminalProtocolK8s {
			t.Errorf("protocol %q", p)
		}
		streams := map[byte]string{}
		var order []byte
		for {
			typ, p, err := conn.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
					t.Errorf("the end: %v, want a close 1000", err)
				}
				break
			}
			if typ != websocket.BinaryMessage || len(p) == 0 {
				t.Fatalf("message %d %q", typ, p)
			}
			streams[p[0]] += string(p[1:])
			if len(order) == 0 || order[len(order)-1] != p[0] {
				order = append(order, p[0])
			}
		}
		if streams[1] != "out\n" || streams[2] != "err\n" {
			t.Errorf("stdout %q, stderr %q", streams[1], streams[2])
		}
		var st struct {
			Status, Reason string
			Details        struct {
				Causes []struct{ Reason, Message string }
			}
		}
		if err := json.Unmarshal([]byte(streams[3]), &st); err != nil || st.Status != "Failure" || st.Reason != "NonZeroExitCode" ||
			len(st.Details.Causes) != 1 || st.Details.Causes[0].Reason != "ExitCode" || st.Details.Causes[0].Message != "7" {
			t.Errorf("status %q: %+v, %v", streams[3], st, err)
		}
		if len(order) == 0 || order[len(order)-1] != 3 {
			t.Errorf("streams in the order %v: the status is not last", order)
		}
	})

	t.Run("close ends the process", func(t *testing.T) {
		term := d.sdkTerminal(t, sb.ID, api.TerminalRequest{Command: []string{"sh", "-c", "echo started; exec sleep 4242"}}, client.TerminalOptions{})
		readUntil(t, term, "started")
		running := func() bool {
			res := d.exec(sb.ID, "python3", "-c", `import os
n = 0
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        n += open(f"/proc/{p}/cmdline", "rb").read() == b"sleep\x004242\x00"
    except OSError:
        pass
print(n)`)
			if res.ExitCode != 0 {
				t.Fatalf("count the sleeps: %+v", res)
			}
			return strings.TrimSpace(res.Stdout) != "0"
		}
		if !running() {
			t.Fatal("the terminal's sleep does not run")
		}
		term.Close()
		deadline := time.Now().Add(15 * time.Second)
		for running() {
			if time.Now().After(deadline) {
				t.Fatal("the terminal's process still runs after the client closed it")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("3000 box-drawing characters", func(t *testing.T) {
		term := d.sdkTerminal(t, sb.ID, api.TerminalRequest{Command: boxWriter()}, client.TerminalOptions{})
		got, err := io.ReadAll(term)
		if err != nil || string(got) != strings.Repeat("─", 3000) {
			t.Errorf("%d bytes, %d characters, %v", len(got), utf8.RuneCount(got), err)
		}
	})

	d.deleteAll()
	d.assertNoLeaks()
}

// boxWriter is a command that writes 3,000 box-drawing characters (3
// bytes each) in writes of 7 bytes, so that the reads of its output cut
// characters.
func boxWriter() []string {
	return []string{"python3", "-c", `import os, time
b = "─".encode() * 3000
for i in range(0, len(b), 7):
    os.write(1, b[i:i+7])
    if i % 700 == 0: time.sleep(0.001)
`}
}

// TestTerminalJSON drives the terminal in LiteBoxd's JSON dialect, with
// the frames LiteBoxd's web client sends.
func TestTerminalJSON(t *testing.T) {
	d, sb := startTerminalDaemon(t)
	type frame struct {
		Type     string `json:"type"`
		Data     string `json:"data"`
		Stream   string `json:"stream"`
		ExitCode *int   `json:"exitCode"`
		Message  string `json:"message"`
	}
	// collect reads frames to the close: the output by stream and the exit.
	collect := func(t *testing.T, conn *websocket.Conn) (out map[string]string, frames []frame, exit *int) {
		t.Helper()
		out = map[string]string{}
		for {
			typ, p, err := conn.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
					t.Errorf("the end: %v, want a close 1000", err)
				}
				return out, frames, exit
			}
			var f frame
			if err := json.Unmarshal(p, &f); typ != websocket.TextMessage || err != nil {
				t.Fatalf("message %d %q: %v", typ, p, err)
			}
			frames = append(frames, f)
			switch f.Type {
			case "output":
				out[f.Stream] += f.Data
			case "exit":
				exit = f.ExitCode
			case "error":
				t.Errorf("error frame: %s", f.Message)
			}
		}
	}

	t.Run("shell session", func(t *testing.T) {
		conn, resp, err := d.dialTerminal(sb.ID, url.Values{"command": {"sh"}, "tty": {"true"}, "cols": {"100"}, "rows": {"30"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "" {
			t.Errorf("protocol %q selected", p)
		}
		send := func(v any) {
			b, _ := json.Marshal(v)
			if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
				t.Fatal(err)
			}
		}
		// Read until the first size shows, then resize.
		var before strings.Builder
		send(map[string]any{"type": "input", "data": "stty size\r"})
		for !strings.Contains(before.String(), "30 100") {
			var f frame
			if err := conn.ReadJSON(&f); err != nil {
				t.Fatalf("before the resize, after %q: %v", before.String(), err)
			}
			before.WriteString(f.Data)
		}
		send(map[string]any{"type": "resize", "cols": 120, "rows": 40})
		send(map[string]any{"type": "input", "data": "stty size; exit 0\r"})
		out, _, exit := collect(t, conn)
		if !strings.Contains(out[""], "40 120") {
			t.Errorf("output %q after the resize: the size is not 40 120", out[""])
		}
		if exit == nil || *exit != 0 {
			t.Errorf("exit code %v, want 0 sent", exit)
		}
	})

	t.Run("stderr without tty", func(t *testing.T) {
		conn, _, err := d.dialTerminal(sb.ID, url.Values{"command": {"sh", "-c", "echo out; echo err >&2; exit 3"}, "tty": {"false"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		out, _, exit := collect(t, conn)
		if out[""] != "out\n" || out["stderr"] != "err\n" || exit == nil || *exit != 3 {
			t.Errorf("stdout %q, stderr %q, exit %v", out[""], out["stderr"], exit)
		}
	})

	t.Run("UTF-8 never split", func(t *testing.T) {
		q := url.Values{"command": boxWriter(), "tty": {"false"}}
		conn, _, err := d.dialTerminal(sb.ID, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		out, frames, _ := collect(t, conn)
		for _, f := range frames {
			if strings.ContainsRune(f.Data, utf8.RuneError) {
				t.Fatalf("a frame of %d bytes carries a cut character", len(f.Data))
			}
		}
		if out[""] != strings.Repeat("─", 3000) {
			t.Errorf("%d characters in %d frames", utf8.RuneCountInString(out[""]), len(frames))
		}
		if len(frames) < 3 {
			t.Logf("only %d frames: the output was not cut", len(frames))
		}
	})
}

// TestTerminalRefusals: the key, the Origin and bad requests are checked
// before the upgrade.
func TestTerminalRefusals(t *testing.T) {
	d, sb := startTerminalDaemon(t)
	q := url.Values{"command": {"sh", "-c", "echo ok"}}
	status := func(resp *http.Response) int {
		if resp == nil {
			return 0
		}
		return resp.StatusCode
	}
	if _, resp, err := d.dialTerminal(sb.ID, q, http.Header{}); err == nil || status(resp) != http.StatusUnauthorized {
		t.Errorf("without a key: %d, %v; want 401", status(resp), err)
	}
	wrong := api.TerminalAuthProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte("wrong-key-0123456789"))
	if _, resp, err := d.dialTerminal(sb.ID, q, http.Header{}, wrong); err == nil || status(resp) != http.StatusUnauthorized {
		t.Errorf("with a wrong key as a subprotocol: %d, %v; want 401", status(resp), err)
	}
	keyProto := api.TerminalAuthProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(terminalKey))
	for _, protos := range [][]string{{keyProto}, {api.TerminalProtocolK8s, keyProto}} {
		conn, resp, err := d.dialTerminal(sb.ID, q, http.Header{}, protos...)
		if err != nil {
			t.Fatalf("with the key as a subprotocol (%d): %v", status(resp), err)
		}
		want := ""
		if len(protos) == 2 {
			want = api.TerminalProtocolK8s
		}
		if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != want {
			t.Errorf("offered %d protocols, selected %q; want %q (the key never echoed)", len(protos), p, want)
		}
		_, p, err := conn.ReadMessage()
		if err != nil || !strings.Contains(string(p), "ok") {
			t.Errorf("first message %q, %v", p, err)
		}
		conn.Close()
	}
	origin := http.Header{"Authorization": {"Bearer " + terminalKey}, "Origin": {"http://evil.example"}}
	if _, resp, err := d.dialTerminal(sb.ID, q, origin); err == nil || status(resp) != http.StatusForbidden {
		t.Errorf("from a foreign origin: %d, %v; want 403", status(resp), err)
	}
	// LiteBoxd's dialect runs sh then, as LiteBoxd does; Kubernetes' has
	// no default.
	if _, resp, err := d.dialTerminal(sb.ID, url.Values{"tty": {"false"}}, nil, api.TerminalProtocolK8s); err == nil || status(resp) != http.StatusBadRequest {
		t.Errorf("no command without a tty, in Kubernetes' dialect: %d, %v; want 400", status(resp), err)
	}
	if _, resp, err := d.dialTerminal("nosuchsandbox", q, nil); err == nil || status(resp) != http.StatusNotFound {
		t.Errorf("a sandbox that does not exist: %d, %v; want 404", status(resp), err)
	}
	// A browser's one-time ticket, through the daemon's own wiring: once.
	var tk api.TerminalTicket
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec/interactive/ticket", nil, &tk); code != http.StatusCreated || tk.Ticket == "" {
		t.Fatalf("ticket: %d %+v", code, tk)
	}
	tq := url.Values{"command": {"sh", "-c", "echo ok"}, "ticket": {tk.Ticket}}
	conn, resp, err := d.dialTerminal(sb.ID, tq, http.Header{})
	if err != nil {
		t.Fatalf("with a ticket (%d): %v", status(resp), err)
	}
	if _, p, err := conn.ReadMessage(); err != nil || !strings.Contains(string(p), "ok") {
		t.Errorf("with a ticket, first message %q, %v", p, err)
	}
	conn.Close()
	if _, resp, err := d.dialTerminal(sb.ID, tq, http.Header{}); err == nil || status(resp) != http.StatusUnauthorized {
		t.Errorf("a ticket used twice: %d, %v; want 401", status(resp), err)
	}
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/stop", nil, nil); code >= 300 {
		t.Fatalf("stop: %d", code)
	}
	if _, resp, err := d.dialTerminal(sb.ID, q, nil); err == nil || status(resp) != http.StatusConflict {
		t.Errorf("a stopped sandbox: %d, %v; want 409", status(resp), err)
	}
}

// TestTerminalSlowReader: a client that does not read holds the process
// back; the daemon does not buffer its output.
func TestTerminalSlowReader(t *testing.T) {
	d, sb := startTerminalDaemon(t)
	rss := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return n << 10
			}
		}
		t.Fatal("no VmRSS")
		return 0
	}
	// yes writes as fast as it can: hundreds of MB a second.
	conn, _, err := d.dialTerminal(sb.ID, url.Values{"command": {"yes", strings.Repeat("x", 1000)}}, nil, api.TerminalProtocolK8s)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := rss()
	time.Sleep(5 * time.Second)
	after := rss()
	t.Logf("daemon RSS %d MiB before, %d MiB after 5 s of output not read", before>>20, after>>20)
	if after-before > 64<<20 {
		t.Errorf("the daemon grew by %d MiB while the client did not read", (after-before)>>20)
	}
	// The client reads again: the output flows.
	if _, p, err := conn.ReadMessage(); err != nil || len(p) < 2 || p[0] != api.TerminalStreamStdout {
		t.Errorf("reading again: %q, %v", p[:min(len(p), 10)], err)
	}
}

// TestTerminalClientGo: Kubernetes' own executor works against the
// endpoint unchanged.
func TestTerminalClientGo(t *testing.T) {
	d, sb := startTerminalDaemon(t)
	cfg := &rest.Config{Host: d.url(""), BearerToken: terminalKey}
	run := func(q url.Values, opts remotecommand.StreamOptions) error {
		t.Helper()
		ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", d.url("/api/v1/sandboxes/"+sb.ID+"/exec/interactive?"+q.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		return ex.StreamWithContext(ctx, opts)
	}

	var stdout, stderr bytes.Buffer
	q := url.Values{"command": {"sh", "-c", "cat; echo err >&2; exit 3"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}
	err := run(q, remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr})
	var ce utilexec.CodeExitError
	if !errors.As(err, &ce) || ce.Code != 3 {
		t.Errorf("exit: %v, want code 3", err)
	}
	if stdout.String() != "hello\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}

	stdout.Reset()
	// The executor sends the size once the streams are up: the command
	// gives it a moment.
	q = url.Values{"command": {"sh", "-c", "sleep 1; stty size"}, "stdout": {"true"}, "tty": {"true"}}
	sizes := make(sizeQueue, 1)
	sizes <- remotecommand.TerminalSize{Width: 132, Height: 43}
	close(sizes)
	if err := run(q, remotecommand.StreamOptions{Stdout: &stdout, Tty: true, TerminalSizeQueue: sizes}); err != nil {
		t.Errorf("stty size: %v", err)
	}
	if got := strings.TrimSpace(stdout.String()); got != "43 132" {
		t.Errorf("stty size on a tty of 132 x 43: %q", got)
	}
}

// sizeQueue is a TerminalSizeQueue of the sizes it holds; closed, it
// ends.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}

// TestTerminalCLI runs agent2env sandbox shell under tmux, a real
// terminal: it types, reads the screen, resizes the window and exits.
func TestTerminalCLI(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Missing(t, "tmux is not installed: scripts/deps.sh --tests installs it")
	}
	d, sb := startTerminalDaemon(t)
	dir := t.TempDir()
	rcFile := filepath.Join(dir, "rc")
	sock := filepath.Join(dir, "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	script := fmt.Sprintf("AGENT2ENV_URL=%s AGENT2ENV_TOKEN=%s %s sandbox shell %s; echo $? > %s; sleep 600",
		d.url(""), terminalKey, binary, sb.ID, rcFile)
	tm("new-session", "-d", "-x", "100", "-y", "30", "sh", "-c", script)
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	screenHas := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			screen := tm("capture-pane", "-p")
			for _, l := range strings.Split(screen, "\n") {
				if strings.TrimSpace(l) == want {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no line %q on the screen:\n%s", want, screen)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	tm("send-keys", "echo h''i", "Enter")
	screenHas("hi")
	tm("send-keys", "stty size", "Enter")
	screenHas("30 100")
	tm("resize-window", "-x", "120", "-y", "40")
	time.Sleep(300 * time.Millisecond)
	tm("send-keys", "clear; stty size", "Enter")
	screenHas("40 120")
	tm("send-keys", "exit 3", "Enter")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(rcFile)
		if err == nil && strings.TrimSpace(string(b)) != "" {
			if rc := strings.TrimSpace(string(b)); rc != "3" {
				t.Errorf("the CLI exited %s, want the shell's 3", rc)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CLI did not exit; screen:\n%s", tm("capture-pane", "-p"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// exec -i without a terminal: the input goes in, its end ends it,
	// stdout and stderr stay apart and the exit code comes back.
	cmd := exec.Command(binary, "sandbox", "exec", "-i", sb.ID, "--", "sh", "-c", "cat; echo err >&2; exit 5")
	cmd.Env = append(os.Environ(), "AGENT2ENV_URL="+d.url(""), "AGENT2ENV_TOKEN="+terminalKey)
	cmd.Stdin = strings.NewReader("piped\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 5 || stdout.String() != "piped\n" || stderr.String() != "err\n" {
		t.Errorf("exec -i: exit %d (%v), stdout %q, stderr %q", code, err, stdout.String(), stderr.String())
	}
}
