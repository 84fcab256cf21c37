package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/api"
)

// escapeWriter detaches at ~. at the start of a line only, sends ~~ as
// one ~ and any other ~ as it is, whichever writes cut the keystrokes.
func TestEscapeWriter(t *testing.T) {
	tests := []struct {
		name, in, sent string
		detached       bool
	}{
		{"plain", "ls -l\r", "ls -l\r", false},
		{"detach at the start", "~.", "", true},
		{"detach after a line", "echo hi\r~.after", "echo hi\r", true},
		{"detach after a newline", "a\n~.", "a\n", true},
		{"not mid-line", "a~.b", "a~.b", false},
		{"tilde tilde", "~~.", "~.", false},
		{"tilde then other", "~x\r", "~x\r", false},
		{"home directory", "cd ~/src\r", "cd ~/src\r", false},
		{"tilde at line start then tilde", "\r~~\r~.", "\r~\r", true},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 2, 100} {
			var sent bytes.Buffer
			detached := false
			ew := &escapeWriter{w: &sent, detach: func() { detached = true }}
			var err error
			for i := 0; i < len(tt.in) && err == nil; i += size {
				_, err = ew.Write([]byte(tt.in[i:min(i+size, len(tt.in))]))
			}
			if detached != tt.detached || detached != errors.Is(err, errDetached) {
				t.Errorf("%s in writes of %d: detached %v (%v), want %v", tt.name, size, detached, err, tt.detached)
			}
			if sent.String() != tt.sent {
				t.Errorf("%s in writes of %d: sent %q, want %q", tt.name, size, sent.String(), tt.sent)
			}
		}
	}
}

// terminalDaemon serves a sandbox's /exec/interactive as a process that
// never ends: it passes on each connection's query and the input it gets,
// and says when the client went away.
type terminalDaemon struct {
	recorder
	conns chan url.Values
	input chan []byte
	gone  chan struct{}
}

func newTerminalDaemon(t *testing.T) *terminalDaemon {
	d := &terminalDaemon{conns: make(chan url.Values, 1), input: make(chan []byte, 16), gone: make(chan struct{})}
	up := websocket.Upgrader{Subprotocols: []string{api.TerminalProtocolK8s}}
	d.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/exec/interactive") {
			fail(w, http.StatusNotFound, api.CodeNotFound, "no such path")
			return
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		d.conns <- r.URL.Query()
		defer close(d.gone)
		for {
			_, p, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if len(p) > 1 && p[0] == api.TerminalStreamStdin {
				d.input <- p[1:]
			}
		}
	}))
	return d
}

// isRaw says whether terminal fd is in raw mode: its keys are not signals.
func isRaw(t *testing.T, fd *os.File) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(fd.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatalf("get the termios: %v", err)
	}
	return tio.Lflag&unix.ISIG == 0
}

// A signal ends exec -i, exec -t and shell, and the remote process with
// them (the connection is closed), with the shell's exit code for the
// signal; Ctrl-C is one only where the local terminal is not in raw mode,
// which is where the process reads the keys: exec -it and shell.
func TestTerminalSignals(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pty  bool // stdin is a terminal (else a pipe)
		raw  bool // the local terminal is raw while it runs
		sig  syscall.Signal
		// hangup sends a real SIGHUP, which drive alone watches, rather
		// than cancel the context as NotifyContext does for the others.
		hangup bool
	}{
		{name: "exec -i, SIGINT", args: []string{"sandbox", "exec", "-i", "sb1", "--", "sleep", "1000"}, sig: syscall.SIGINT},
		{name: "exec -i, SIGTERM", args: []string{"sandbox", "exec", "-i", "sb1", "--", "sleep", "1000"}, sig: syscall.SIGTERM},
		{name: "exec -t, SIGINT", args: []string{"sandbox", "exec", "-t", "sb1", "--", "sleep", "1000"}, pty: true, sig: syscall.SIGINT},
		{name: "exec -it, SIGTERM", args: []string{"sandbox", "exec", "-it", "sb1", "--", "sh"}, pty: true, raw: true, sig: syscall.SIGTERM},
		{name: "shell, SIGHUP", args: []string{"sandbox", "shell", "sb1"}, pty: true, raw: true, sig: syscall.SIGHUP, hangup: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTerminalDaemon(t)
			var stdin, keys *os.File
			if tt.pty {
				ptmx, tty, err := pty.Open()
				if err != nil {
					t.Fatalf("open a pty: %v", err)
				}
				t.Cleanup(func() { ptmx.Close(); tty.Close() })
				stdin, keys = tty, ptmx
			} else {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close(); w.Close() })
				stdin = r
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			var stderr bytes.Buffer
			code := make(chan int, 1)
			go func() {
				code <- runMain(ctx, env{stdin: stdin, stdout: io.Discard, stderr: &stderr}, tt.args)
			}()
			select {
			case q := <-d.conns:
				if got := q.Get("tty"); got != strconv.FormatBool(tt.pty) {
					t.Errorf("tty=%s, want %v", got, tt.pty)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the CLI did not connect")
			}
			if tt.pty {
				// The CLI sets the mode once connected: wait for it (or
				// give it the time to, when it should not).
				for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline) && !(tt.raw && isRaw(t, stdin)); {
					time.Sleep(10 * time.Millisecond)
				}
				if isRaw(t, stdin) != tt.raw {
					t.Fatalf("the terminal's raw mode is %v while it runs, want %v", !tt.raw, tt.raw)
				}
			}
			if tt.raw {
				// In raw mode Ctrl-C is a key for the process.
				keys.Write([]byte{3})
				select {
				case in := <-d.input:
					if string(in) != "\x03" {
						t.Errorf("the process got %q, want Ctrl-C", in)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Ctrl-C did not reach the process")
				}
			}
			if tt.hangup {
				// Caught here too, so that a CLI that does not watch it
				// fails the test rather than kill it.
				hup := make(chan os.Signal, 1)
				signal.Notify(hup, syscall.SIGHUP)
				defer signal.Stop(hup)
				syscall.Kill(os.Getpid(), syscall.SIGHUP)
			} else {
				cancel(&signalError{sig: tt.sig})
			}
			select {
			case c := <-code:
				if want := 128 + int(tt.sig); c != want || stderr.Len() > 0 {
					t.Errorf("exit %d, stderr %q; want %d and nothing", c, stderr.String(), want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the CLI goes on after %v", tt.sig)
			}
			select {
			case <-d.gone:
			case <-time.After(10 * time.Second):
				t.Error("the CLI left the connection, and the process, open")
			}
			if tt.pty && isRaw(t, stdin) {
				t.Error("the terminal is left in raw mode")
			}
		})
	}
}
