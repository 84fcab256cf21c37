package kubetest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/bench/restcreate"
)

// TestNodeTerminal: the daemon's terminals on the kubernetes runtime, on a
// real node, through the agent in the Pod (not the kubelet's exec): a
// one-shot shell on a tty of the size asked for, its exit code, and a
// persistent terminal that a client leaves and attaches to again from
// the offset it reached, seeing what it missed.
func TestNodeTerminal(t *testing.T) {
	n := StartNode(t, NodeOptions{})
	agentImage, testImage := n.SelfImage(t), n.RuntimetestImage(t)
	base := serveKube(t, n, agentImage)
	hc := &http.Client{}
	id, err := restcreate.Ready(hc, base, testImage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restcreate.Delete(hc, base, id) })
	cl, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	term, err := cl.Sandbox.Terminal(ctx, id, api.TerminalRequest{Command: []string{"sh"}, TTY: true, Rows: 30, Cols: 100}, client.TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	io.WriteString(term, "stty size; exit 3\n")
	if got := readAll(t, term); !strings.Contains(got, "30 100") {
		t.Errorf("stty size on a tty of 100 x 30: %q", got)
	}
	if exit, err := term.Wait(); err != nil || exit.ExitCode != 3 {
		t.Errorf("exit 3: %+v, %v", exit, err)
	}

	if _, err := cl.Sandbox.CreateTerminal(ctx, id, api.CreateTerminalRequest{Name: "work", Command: []string{"sh"}}); err != nil {
		t.Fatal(err)
	}
	a, err := cl.Sandbox.AttachTerminal(ctx, id, "work", client.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(a, "echo one-$((1+1)); sleep 1; echo two-$((1+2))\n")
	readTo(t, a, "one-2")
	at := a.Offset()
	a.Close()
	time.Sleep(2 * time.Second)
	if a, err = cl.Sandbox.AttachTerminal(ctx, id, "work", client.AttachOptions{Since: at}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := readTo(t, a, "two-3"); strings.Contains(got, "one-2") {
		t.Errorf("attached again at %d: output already seen came again: %q", at, got)
	}
	if _, err := cl.Sandbox.DeleteTerminal(ctx, id, "work"); err != nil {
		t.Error(err)
	}
}

// readAll reads r to its end, failing t after a while.
func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() { r.Close() })
	defer timer.Stop()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %q: %v", b, err)
	}
	return string(b)
}

// readTo reads r until what it read holds want, failing t after a while.
func readTo(t *testing.T, r io.ReadCloser, want string) string {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() { r.Close() })
	defer timer.Stop()
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want) {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("read %q before %q: %v", got.String(), want, err)
		}
	}
	return got.String()
}
