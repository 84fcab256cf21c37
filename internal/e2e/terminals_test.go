package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/testenv"
)

// restartTerminalDaemon kills d with SIGKILL, leaving its sandboxes
// running, and starts a daemon on its data directory with its key.
func restartTerminalDaemon(t *testing.T, d *daemon) *daemon {
	d.kill()
	d = startDaemon(t, d.dataDir, func(c *exec.Cmd) { c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+terminalKey) })
	d.key = terminalKey
	return d
}

// terminalClient is the Go SDK's client of d.
func (d *daemon) terminalClient(t *testing.T) *client.Client {
	t.Helper()
	cl, err := client.New(d.url(""), client.WithToken(d.key))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// attachTerminal attaches to persistent terminal name with the Go SDK.
func attachTerminal(t *testing.T, cl *client.Client, id, name string, opts client.AttachOptions) *client.Terminal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := cl.Sandbox.AttachTerminal(ctx, id, name, opts)
	if err != nil {
		t.Fatalf("attach %s since %d: %v", name, opts.Since, err)
	}
	t.Cleanup(func() { term.Close() })
	return term
}

// sandboxSleeps counts the processes of sandbox id that are sleeps of a
// time that starts with prefix.
func (d *daemon) sandboxSleeps(id, prefix string) string {
	d.t.Helper()
	res := d.exec(id, "python3", "-c", fmt.Sprintf(`import os
n = 0
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            argv = open("/proc/"+p+"/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        n += len(argv) > 1 and argv[0] == b"sleep" and argv[1].startswith(%q.encode())
print(n)`, prefix))
	return strings.TrimSpace(res.Stdout)
}

// TestTerminalPersistent: a persistent terminal survives a dropped
// connection and a SIGKILL of the daemon (the agent holds it), and a
// client that attaches again from the offset it reached sees what it
// missed and nothing twice; one writer at a time, with takeover; its
// exit code comes back; ending it, or its sandbox, leaves no process.
func TestTerminalPersistent(t *testing.T) {
	d, sb := startTerminalDaemon(t)
	cl := d.terminalClient(t)
	ctx := context.Background()
	info, err := cl.Sandbox.CreateTerminal(ctx, sb.ID, api.CreateTerminalRequest{Name: "work", Command: []string{"sh"}, Rows: 30, Cols: 100})
	if err != nil || info.Name != "work" || !info.Running || info.Rows != 30 {
		t.Fatalf("create: %+v, %v", info, err)
	}
	if _, err := cl.Sandbox.CreateTerminal(ctx, sb.ID, api.CreateTerminalRequest{Name: "work"}); !errors.Is(err, client.ErrAlreadyExists) {
		t.Errorf("a second terminal of the name: %v", err)
	}

	// A dropped connection: what the shell writes meanwhile is replayed.
	term := attachTerminal(t, cl, sb.ID, "work", client.AttachOptions{})
	fmt.Fprintf(term, "echo one-$((1+1))\n")
	readUntil(t, term, "one-2")
	fmt.Fprintf(term, "sleep 1; echo missed-$((3+3))\n")
	readUntil(t, term, "sleep 1; echo missed-$((3+3))\r\n") // the tty's echo
	at := term.Offset()
	term.Close()
	time.Sleep(2 * time.Second)
	term = attachTerminal(t, cl, sb.ID, "work", client.AttachOptions{Since: at})
	if got := readUntil(t, term, "missed-6"); strings.Contains(got, "one-2") {
		t.Errorf("attached again at %d: output already seen came again: %q", at, got)
	}

	// The daemon dies with the attachment open; the terminal goes on.
	fmt.Fprintf(term, "sleep 2; echo restart-$((4+4))\n")
	readUntil(t, term, "echo restart-$((4+4))\r\n")
	at = term.Offset()
	d = restartTerminalDaemon(t, d)
	cl = d.terminalClient(t)
	time.Sleep(2 * time.Second)
	term = attachTerminal(t, cl, sb.ID, "work", client.AttachOptions{Since: at})
	readUntil(t, term, "restart-8")
	var got api.Sandbox
	if d.do("GET", "/api/v1/sandboxes/"+sb.ID, nil, &got); len(got.Terminals) != 1 || got.Terminals[0].Name != "work" || !got.Terminals[0].Writer {
		t.Errorf("the sandbox's terminals after the restart: %+v", got.Terminals)
	}

	// One writer: another is refused, a takeover ends the first one.
	if _, err := cl.Sandbox.AttachTerminal(ctx, sb.ID, "work", client.AttachOptions{}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("a second writer: %v, want a conflict", err)
	}
	next := attachTerminal(t, cl, sb.ID, "work", client.AttachOptions{Since: term.Offset(), Takeover: true})
	if _, err := term.Wait(); !errors.Is(err, client.ErrTerminalTakenOver) {
		t.Errorf("the writer taken over: %v", err)
	}
	fmt.Fprintf(next, "exit 7\n")
	io.Copy(io.Discard, next) // Wait waits for the output to be read
	if exit, err := next.Wait(); err != nil || exit.ExitCode != 7 {
		t.Errorf("exit 7: %+v, %v", exit, err)
	}
	if info, err := cl.Sandbox.GetTerminal(ctx, sb.ID, "work"); err != nil || info.Running || info.Exit == nil || info.Exit.ExitCode != 7 {
		t.Errorf("the ended terminal: %+v, %v", info, err)
	}

	// Nothing leaks: ending a terminal ends all it started, and so does
	// its sandbox's end.
	if _, err := cl.Sandbox.CreateTerminal(ctx, sb.ID, api.CreateTerminalRequest{Name: "bg", Command: []string{"sh", "-c", "sleep 1001 & sleep 1002"}}); err != nil {
		t.Fatal(err)
	}
	// The shell forks its sleeps after the terminal has started: wait for
	// both to have exec'd (counting at once missed one once, under load).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := d.sandboxSleeps(sb.ID, "100")
		if n == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s sleeps running in the terminal, want 2", n)
		}
	}
	if info, err := cl.Sandbox.DeleteTerminal(ctx, sb.ID, "bg"); err != nil || info.Running {
		t.Errorf("delete: %+v, %v", info, err)
	}
	if n := d.sandboxSleeps(sb.ID, "100"); n != "0" {
		t.Errorf("%s sleeps left after the terminal was deleted", n)
	}
	if _, err := cl.Sandbox.GetTerminal(ctx, sb.ID, "bg"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("a deleted terminal: %v", err)
	}
	if _, err := cl.Sandbox.CreateTerminal(ctx, sb.ID, api.CreateTerminalRequest{Name: "left", Command: []string{"sleep", "1003"}}); err != nil {
		t.Fatal(err)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}

// tmuxSession is a tmux server of its own, for a test.
type tmuxSession struct {
	t    *testing.T
	tmux string
	sock string
}

func newTmux(t *testing.T) *tmuxSession {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Missing(t, "tmux is not installed: scripts/deps.sh --tests installs it")
	}
	s := &tmuxSession{t: t, tmux: tmux, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	t.Cleanup(func() { exec.Command(tmux, "-S", s.sock, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.tmux, append([]string{"-S", s.sock}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// waitScreen waits until a line of the screen satisfies ok.
func (s *tmuxSession) waitScreen(what string, ok func(line string) bool) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		screen := s.run("capture-pane", "-p")
		for _, l := range strings.Split(screen, "\n") {
			if ok(l) {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s on the screen:\n%s", what, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFile waits for a line in file and returns it.
func (s *tmuxSession) waitFile(file string) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the CLI did not exit; screen:\n%s", s.run("capture-pane", "-p"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cliScript runs the CLI with args in d's sandbox shell under sh, then
// writes its exit code and whether the terminal is back in cooked mode
// to rcFile.
func cliScript(d *daemon, rcFile string, args ...string) string {
	return fmt.Sprintf("AGENT2ENV_URL=%s AGENT2ENV_TOKEN=%s %s %s; echo \"$? $(stty -a | grep -o -- '-\\?icanon')\" > %s; sleep 600",
		d.url(""), terminalKey, binary, strings.Join(args, " "), rcFile)
}

// TestTerminalCLIPersistent: sandbox shell --name under tmux: ~. detaches
// (exit 0, the terminal back in cooked mode), the same command attaches
// again and shows the screen's past, and the shell's exit code comes back.
func TestTerminalCLIPersistent(t *testing.T) {
	tm := newTmux(t)
	d, sb := startTerminalDaemon(t)
	dir := t.TempDir()
	rc1, rc2 := filepath.Join(dir, "rc1"), filepath.Join(dir, "rc2")
	tm.run("new-session", "-d", "-x", "100", "-y", "30", "sh", "-c", cliScript(d, rc1, "sandbox", "shell", sb.ID, "--name", "work"))
	line := func(want string) func(string) bool {
		return func(l string) bool { return strings.TrimSpace(l) == want }
	}
	tm.run("send-keys", "echo h''i", "Enter")
	tm.waitScreen("hi", line("hi"))
	tm.run("send-keys", "~.")
	if rc := tm.waitFile(rc1); rc != "0 icanon" {
		t.Errorf("after ~.: exit code and mode %q, want 0 icanon", rc)
	}
	tm.waitScreen("the detach message", func(l string) bool { return strings.Contains(l, "detached from terminal work") })
	// The CLI's close waits for the daemon's, which comes once the
	// sandbox has let go of the attachment: the writer's place is free
	// when the CLI has exited.
	info, err := d.terminalClient(t).Sandbox.GetTerminal(context.Background(), sb.ID, "work")
	if err != nil || !info.Running || info.Writer {
		t.Errorf("the terminal after ~.: %+v, %v; want it running, with no writer", info, err)
	}

	tm.run("new-window", "sh", "-c", cliScript(d, rc2, "sandbox", "shell", sb.ID, "--name", "work"))
	tm.waitScreen("hi replayed", line("hi"))
	tm.run("send-keys", "exit 4", "Enter")
	if rc := tm.waitFile(rc2); rc != "4 icanon" {
		t.Errorf("after exit 4: exit code and mode %q, want 4 icanon", rc)
	}
}

// TestTerminalCLITop: top, a full-screen program, draws under sandbox
// shell in tmux and quits cleanly on q: exit 0, the terminal in cooked
// mode again. top is in agent2env/agent.
func TestTerminalCLITop(t *testing.T) {
	agentImageEnabled(t)
	tm := newTmux(t)
	d, _ := startTerminalDaemon(t)
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/agent", Memory: "1Gi"})
	rc := filepath.Join(t.TempDir(), "rc")
	tm.run("new-session", "-d", "-x", "120", "-y", "40", "sh", "-c", cliScript(d, rc, "sandbox", "shell", sb.ID, "--", "top"))
	tm.waitScreen("top's header", func(l string) bool { return strings.HasPrefix(l, "top - ") && strings.Contains(l, "load average") })
	tm.waitScreen("top's table", func(l string) bool { return strings.Contains(l, "PID") && strings.Contains(l, "COMMAND") })
	tm.run("send-keys", "q")
	if got := tm.waitFile(rc); got != "0 icanon" {
		t.Errorf("after q: exit code and mode %q, want 0 icanon", got)
	}
}
