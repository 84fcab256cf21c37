package runtimetest

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
)

// testTerminal drives a terminal through the runtime's channel to the
// agent (a Pod's TLS connection on kubernetes), as the daemon's terminal
// endpoints do: a shell on a tty of the size asked for before it starts,
// a resize, input echoed, an attachment dropped and another replaying
// the output from an offset, and the exit code.
func (s *suite) testTerminal(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)
	ctx := ctxFor(t)
	info, err := c.StartProc(ctx, agent.ProcRequest{Command: []string{"sh"}, TTY: true, Rows: 30, Cols: 100, Tag: "terminal"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.AttachProc(ctx, info.ID, agent.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(a, "stty size\n")
	readTerminal(t, a, "30 100")
	if err := a.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	io.WriteString(a, "stty size\n")
	readTerminal(t, a, "40 120")
	a.Close()
	// The agent lets the writer go once it sees the connection end, a
	// moment after Close returns: until then a new writer is refused.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, err := c.Proc(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Writer {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed attachment is still the terminal's writer after 10 s")
		}
	}

	// Attaching again replays the output kept, from the offset asked for.
	a, err = c.AttachProc(ctx, "terminal", agent.AttachOptions{Since: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := readTerminal(t, a, "40 120"); !strings.Contains(got, "30 100") {
		t.Errorf("replayed from 0: %q, without the first stty size", got)
	}
	io.WriteString(a, "exit 3\n")
	if _, err := io.Copy(io.Discard, a); err != nil {
		t.Fatal(err)
	}
	res, err := a.Wait()
	if err != nil || res.Proc.Running || res.Proc.ExitCode != 3 {
		t.Errorf("exit 3: %+v, %v", res.Proc, err)
	}
	if _, err := c.KillProc(ctx, "terminal"); err != nil {
		t.Errorf("forget the ended terminal: %v", err)
	}
}

// readTerminal reads a until its output holds want and returns what it
// read, or fails t after a while (closing a ends the read).
func readTerminal(t *testing.T, a *agent.ProcAttachment, want string) string {
	t.Helper()
	timer := time.AfterFunc(30*time.Second, func() { a.Close() })
	defer timer.Stop()
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want) {
		n, err := a.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("terminal output %q before %q: %v", got.String(), want, err)
		}
	}
	return got.String()
}
